"""resolve_model and the lazy package: the kernel must start without litellm."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cortex_kernel.llm as llm
from cortex_kernel.exceptions import ConfigError
from cortex_kernel.llm import DEMO_NOTE, DEMO_TRANSCRIPT, default_model_name, resolve_model
from cortex_kernel.llm.errors import PROVIDER_KEY_ENV
from cortex_kernel.model_options import ModelOptions

KEY_VARS = sorted(set(PROVIDER_KEY_ENV.values()) | set(llm.DEFAULT_MODELS) | {"CORTEX_MODEL"})


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_importing_the_package_does_not_import_litellm() -> None:
    code = (
        "import sys, cortex_kernel.llm as m; "
        "m.resolve_model; m.DEMO_NOTE; "
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_resolving_a_litellm_model_does_not_import_litellm_yet() -> None:
    code = (
        "import sys\n"
        "from cortex_kernel.llm import resolve_model, ProtocolPrompt\n"
        "from cortex_kernel.model_options import ModelOptions\n"
        "m = resolve_model('openai/gpt-4o-mini', ModelOptions(timeout=5))\n"
        "ProtocolPrompt().system_prompt.__call__\n"
        "assert type(m).__name__ == 'LiteLLMModel'\n"
        "assert 'litellm' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_lazy_exports() -> None:
    assert set(llm.__all__) <= set(dir(llm))
    for name in llm.__all__:
        assert getattr(llm, name) is not None
    assert llm.PROMPT_VERSION
    with pytest.raises(AttributeError):
        _ = llm.NoSuchThing


def test_no_model_and_no_key_gives_the_demo_with_a_note(clean_env: pytest.MonkeyPatch) -> None:
    assert default_model_name() is None
    model = resolve_model()
    assert model.name.startswith("replay:")
    assert str(DEMO_TRANSCRIPT) in model.name
    assert model.note == DEMO_NOTE
    assert "OPENAI_API_KEY" in DEMO_NOTE and "--model" in DEMO_NOTE


def test_a_provider_key_picks_a_real_model(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant-xxxxxxxx")
    model = resolve_model(None)
    assert type(model).__name__ == "LiteLLMModel"
    assert model.name.startswith("anthropic/")
    assert model.note is None


def test_cortex_model_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-xxxxxxxxxx")
    clean_env.setenv("CORTEX_MODEL", "groq/llama3-8b-8192")
    assert resolve_model().name == "groq/llama3-8b-8192"


def test_a_named_model_and_options() -> None:
    options = ModelOptions(protocol="tools", timeout=3, retries=1, api_base="http://h/v1")
    model = resolve_model("openai/gpt-4o", options)
    from cortex_kernel.llm import LiteLLMModel

    assert isinstance(model, LiteLLMModel)
    assert (model.name, model.protocol, model.timeout, model.num_retries, model.api_base) == (
        "openai/gpt-4o",
        "tools",
        3.0,
        1,
        "http://h/v1",
    )


def test_replay_specs_go_to_the_replay_model() -> None:
    model = resolve_model(f"replay:{DEMO_TRANSCRIPT}?tps=50")
    assert type(model).__name__ == "ReplayModel"
    assert model.note is None


def test_a_bad_protocol_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="protocol"):
        resolve_model("openai/x", ModelOptions.from_mapping({"protocol": "json"}))


def test_preload_imports_litellm_in_the_background() -> None:
    code = (
        "import sys, anyio\n"
        "import cortex_kernel.llm as m\n"
        "assert 'litellm' not in sys.modules\n"
        "m.preload().join(120)\n"
        "assert 'litellm' in sys.modules\n"
        "from cortex_kernel.llm.litellm_model import aload_litellm\n"
        "assert anyio.run(aload_litellm) is sys.modules['litellm']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
