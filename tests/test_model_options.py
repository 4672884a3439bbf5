"""Model options: one parser and validator behind %model, %%agent, the CLI and manifests."""

from __future__ import annotations

import argparse

import pytest

from cortex_kernel.exceptions import ConfigError
from cortex_kernel.model_options import (
    ModelOptions,
    add_model_arguments,
    options_from_args,
    parse_model_line,
)


def test_model_line_with_every_option() -> None:
    spec, options = parse_model_line(
        "openai/local --temperature 0 --max-tokens 800 --seed 7 "
        "--api-base http://127.0.0.1:8377/v1/ --protocol tools"
    )
    assert spec == "openai/local"
    assert options == ModelOptions(
        temperature=0.0,
        max_tokens=800,
        seed=7,
        api_base="http://127.0.0.1:8377/v1",
        protocol="tools",
    )
    # What reaches the model constructor; the protocol is the session's.
    assert options.model_kwargs() == {
        "temperature": 0.0,
        "max_tokens": 800,
        "seed": 7,
        "api_base": "http://127.0.0.1:8377/v1",
    }


def test_options_without_a_model() -> None:
    assert parse_model_line("--temperature 0.3") == (None, ModelOptions(temperature=0.3))
    assert parse_model_line("") == (None, ModelOptions())


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("m --temperature hot", "--temperature 'hot'"),
        ("m --temperature 3", "--temperature '3'"),
        ("m --max-tokens 0", "--max-tokens '0'"),
        ("m --max-tokens 1.5", "--max-tokens '1.5'"),
        ("m --api-base 127.0.0.1:8377", "--api-base '127.0.0.1:8377'"),
        ("m --protocol json", "--protocol"),
        ("m --colour red", "--colour"),
        ("m --temperature", "--temperature"),
        ("m 'unclosed", "quotation"),
    ],
)
def test_bad_values_are_clear_errors(line: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_line(line)
    assert named in str(caught.value)
    assert str(caught.value).startswith("%model")


def test_the_same_flags_on_any_argparse_front_end() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    add_model_arguments(parser)
    args = parser.parse_args(["--model", "m", "--seed", "3", "--max-tokens", "20"])
    assert options_from_args(args) == ModelOptions(seed=3, max_tokens=20)
    bad = parser.parse_args(["--seed", "x"])
    with pytest.raises(ConfigError, match=r"^cortex-kernel run: --seed 'x'"):
        options_from_args(bad, where="cortex-kernel run")


def test_manifest_tables_use_plain_names() -> None:
    options = ModelOptions.from_mapping({"temperature": 0, "max-tokens": 64}, where="agent.yaml")
    assert options == ModelOptions(temperature=0, max_tokens=64)
    with pytest.raises(ConfigError) as caught:
        ModelOptions.from_mapping({"temprature": 0}, where="agent.yaml")
    message = str(caught.value)
    assert message.startswith("agent.yaml: unknown option temprature")
    assert "temperature" in message  # the known names are listed


def test_merged_overrides_only_what_is_set() -> None:
    base = ModelOptions(temperature=0, max_tokens=800, protocol="xml")
    cell = ModelOptions(temperature=0.7, protocol="tools")
    assert base.merged(cell) == ModelOptions(temperature=0.7, max_tokens=800, protocol="tools")
    assert base.merged(None) is base
    assert base.describe() == "--temperature 0.0 --max-tokens 800 --protocol xml"
