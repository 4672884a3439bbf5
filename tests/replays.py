"""Replay model files for the tests: the model's turns, one JSON record a line."""

from __future__ import annotations

import json
from pathlib import Path


def write_turns(path: Path, *turns: str) -> Path:
    """Write ``turns`` (the model's text, in order) as the replay file ``path``; return it."""
    path.write_text("".join(json.dumps({"content": t}) + "\n" for t in turns), encoding="utf-8")
    return path
