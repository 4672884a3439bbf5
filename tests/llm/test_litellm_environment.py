"""Loading litellm leaves the process's environment as the user has it.

In a fresh interpreter: litellm's cost map comes from its bundled copy
(``LITELLM_LOCAL_MODEL_COST_MAP`` set for the import only, unless the user
set it), and afterwards ``os.environ`` is what it was, but for the one
variable litellm's own import sets (``TIKTOKEN_CACHE_DIR``, its bundled
tokenizers, which tiktoken reads at every encoding load).
"""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import os, sys
before = dict(os.environ)
from cortex_kernel.llm.litellm_model import load_litellm
litellm = load_litellm()
from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
info = get_model_cost_map_source_info()
assert info["source"] == "local" and info["is_env_forced"] is True, info
changed = {k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k)}
assert changed <= {"TIKTOKEN_CACHE_DIR"}, changed
assert os.environ["TIKTOKEN_CACHE_DIR"].startswith(os.path.dirname(litellm.__file__))
print(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"))
"""


def _run(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "TIKTOKEN_"))}
    env.pop("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", None)
    done = subprocess.run(
        [sys.executable, "-c", CODE],
        env={**env, **extra},
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def test_the_cost_map_is_local_and_the_environment_unchanged() -> None:
    assert _run({}) == "None"


def test_a_value_the_user_set_is_theirs() -> None:
    assert _run({"LITELLM_LOCAL_MODEL_COST_MAP": "true"}) == "true"
