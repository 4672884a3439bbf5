"""The redaction boundary: whole values and streams, whatever the chunking."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from cortex_kernel.redaction import REDACTED, Redactor, StreamRedactor, is_secret_name

SECRETS = ["sk-abcdef123456", "tok-xyz-987654", "sk-abc"]


@given(
    st.lists(st.sampled_from(["hello ", "sk-", "abcdef123456", "tok-xyz-", "987654", "s", "k"])),
    st.lists(st.integers(0, 200), max_size=10),
)
def test_a_stream_is_scrubbed_as_the_whole_text_is(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    redactor = Redactor(SECRETS)
    stream = StreamRedactor(redactor)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    out = "".join(stream.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    out += stream.flush()
    assert out == redactor.text(text)
    assert not any(secret in out for secret in SECRETS[:2])


@given(
    st.lists(st.sampled_from(["a", "b", "ab", "sk", "sk-", "\udcff", "abab", " "]), max_size=30),
    st.lists(st.integers(0, 100), max_size=12),
    st.lists(st.text("abk-s", min_size=6, max_size=9), max_size=3),
)
def test_near_misses_and_surrogates_stream_as_the_whole_text(
    parts: list[str], cuts: list[int], secrets: list[str]
) -> None:
    # Texts full of secrets' first characters and prefixes, and surrogates
    # (which the redactor escapes): the held-back ends and the fast path
    # for clean chunks give what scrubbing the whole text gives.
    text = "".join(parts)
    redactor = Redactor(secrets)
    stream = StreamRedactor(redactor)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    out = "".join(stream.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    assert out + stream.flush() == redactor.text(text)


def test_values_and_models_are_scrubbed_and_clean_ones_kept() -> None:
    redactor = Redactor(["s3cr3t-value"])
    clean = {"a": [1, "x"], "b": ("y",)}
    assert redactor.value(clean) is clean
    dirty = {"a": ["key=s3cr3t-value"], "b": "\udcff"}
    assert redactor.value(dirty) == {"a": [f"key={REDACTED}"], "b": "\\udcff"}


def test_secret_names() -> None:
    for name in [
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "X_SECRET",
    ]:
        assert is_secret_name(name)
    for name in ["PATH", "HOME", "KEYBOARD", "CORTEX_MODEL"]:
        assert not is_secret_name(name)
