"""JSONL transcripts: every event of a run, plus the model's raw text per turn.

One file per run, ``<run_id>.transcript.jsonl``, in the session's
``transcript_dir``; by default ``$CORTEX_TRANSCRIPT_DIR`` or, failing that,
``<tempdir>/cortex-kernel/transcripts`` (a run must never litter the
notebook's folder unasked).

Lines are events (``parse_event`` reads them back) and one extra record per
turn, which is not an event::

    {"type": "model_turn", "turn": 1, "t": 0.8, "content": "…", "tool_calls": [...]}

``content`` is the assistant text exactly as the run kept it (cut at the
``</action>`` of a sync action); ``ReplayModel`` replays these records.
Events that arrive after the run finished (``fire_and_forget`` actions) are
appended to the same file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from .ports import ToolCall

__all__ = ["TranscriptWriter", "default_transcript_dir", "read_model_turns"]


def default_transcript_dir() -> Path:
    """Where transcripts go when the session names no folder."""
    env = os.environ.get("CORTEX_TRANSCRIPT_DIR")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / "cortex-kernel" / "transcripts"


class TranscriptWriter:
    """Appends a run's records to its JSONL file; never raises on I/O errors after opening.

    Parameters
    ----------
    path
        The file (its folder is created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # backslashreplace: a surrogate inside a JSON string becomes its exact
        # \udxxx escape, so a line is always written and reads back the same.
        self._file: IO[str] | None = path.open("w", encoding="utf-8", errors="backslashreplace")
        self.error: str | None = None

    def write_line(self, line: str) -> None:
        """Write one JSON line (reopening in append mode once closed)."""
        try:
            if self._file is None:
                with self.path.open("a", encoding="utf-8", errors="backslashreplace") as late:
                    late.write(line + "\n")
                return
            self._file.write(line + "\n")
        except (OSError, ValueError) as exc:  # a full disk must not break the run
            self.error = str(exc)

    def write_event(self, event: Any) -> None:
        """Write an event (anything with ``to_json``)."""
        self.write_line(event.to_json())

    def write_model_turn(
        self, turn: int, t: float, content: str, tool_calls: list[ToolCall]
    ) -> None:
        """Record the raw text of one turn."""
        record: dict[str, Any] = {"type": "model_turn", "turn": turn, "t": t, "content": content}
        if tool_calls:
            record["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in tool_calls
            ]
        self.write_line(json.dumps(record, ensure_ascii=False))

    def close(self) -> None:
        """Flush and close; later writes append."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.error = str(exc)
            self._file = None


def read_model_turns(path: Path) -> list[dict[str, Any]]:
    """The ``model_turn`` records of a recorded transcript, in order."""
    turns: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            record = json.loads(line)
            if isinstance(record, dict) and record.get("type") == "model_turn":
                turns.append(record)
    return turns
