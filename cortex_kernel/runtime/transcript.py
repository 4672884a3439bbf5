"""JSONL transcripts: every event of a run, plus the model's raw text per turn.

One file per run, ``<run_id>.transcript.jsonl``, in the session's
``transcript_dir``; by default ``$CORTEX_TRANSCRIPT_DIR`` or, failing that,
the platform's per-user state folder (``~/.local/state/cortex-kernel/transcripts``
on Linux, ``~/Library/Application Support/cortex-kernel/transcripts`` on
macOS, ``%LOCALAPPDATA%\\cortex-kernel\\transcripts`` on Windows). A run never
litters the notebook's folder unasked, and never a shared temp folder:
transcripts hold what the model saw, so folders are created ``0700`` and
files ``0600`` (the default folder is made private even if it existed).

Lines are events (``parse_event`` reads them back) and one extra record per
turn, which is not an event::

    {"type": "model_turn", "turn": 1, "t": 0.8, "content": "…",
     "tool_calls": [...], "opening": [...]}

``content`` is the assistant text exactly as the run kept it (cut at the
``</action>`` of a sync action); ``ReplayModel`` replays these records.
``opening`` holds the messages the turn answered, as the model got them
(the user's message, the results of the last turn's actions or the tool
messages of its calls, a repair request), so a transcript shows what the
model saw as well as what it wrote; never the feeds message that followed
them (rebuilt every turn; a feed's fetches are ``feed_updated`` events).
When the adapter read tool calls out of the model's text (function calling
with a server that returns calls as text), ``written`` holds that text as the
model wrote it, the result it imagined after its calls included.
Events that arrive after the run finished (``fire_and_forget`` actions) are
appended to the same file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import IO, Any

from platformdirs import user_state_dir

from .ports import Message, ToolCall
from .tool_calls import openai_tool_calls

__all__ = ["default_transcript_dir", "open_private"]


def default_transcript_dir() -> Path:
    """Where transcripts go when the session names no folder."""
    env = os.environ.get("CORTEX_TRANSCRIPT_DIR")
    if env:
        return Path(env).expanduser()
    return Path(user_state_dir("cortex-kernel")) / "transcripts"


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) readable by its owner only.

    New folders are ``0700``. An existing default folder of ours is tightened
    to ``0700``; a folder the user named (``$CORTEX_TRANSCRIPT_DIR``) is left
    as they made it.
    """
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for created in missing:  # mkdir's mode applies to the leaf only
        os.chmod(created, 0o700)
    if path == Path(user_state_dir("cortex-kernel")) / "transcripts":
        for folder in (path, path.parent):
            info = folder.stat()
            owner = os.getuid() if hasattr(os, "getuid") else info.st_uid
            if info.st_uid == owner and stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(folder, 0o700)
    return path


def open_private(path: Path, mode: str = "w") -> IO[str]:
    """Open a text file (UTF-8) that only its owner can read: created ``0600``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    if hasattr(os, "fchmod"):  # an existing file keeps its mode through os.open
        os.fchmod(fd, 0o600)
    # backslashreplace: a surrogate inside a JSON string becomes its exact
    # \udxxx escape, so a line is always written and reads back the same.
    return os.fdopen(fd, mode, encoding="utf-8", errors="backslashreplace")


class TranscriptWriter:
    """Appends a run's records to its JSONL file; never raises on I/O errors after opening.

    Parameters
    ----------
    path
        The file (its folder is created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._file: IO[str] | None = open_private(path)
        self.error: str | None = None

    def write_line(self, line: str) -> None:
        """Write one JSON line (reopening in append mode once closed)."""
        try:
            if self._file is None:
                with open_private(self.path, "a") as late:
                    late.write(line + "\n")
                return
            self._file.write(line + "\n")
        except (OSError, ValueError) as exc:  # a full disk must not break the run
            self.error = str(exc)

    def write_event(self, event: Any) -> None:
        """Write an event (anything with ``to_json``)."""
        self.write_line(event.to_json())

    def write_model_turn(
        self,
        turn: int,
        t: float,
        content: str,
        tool_calls: list[ToolCall],
        *,
        written: str | None = None,
        opening: list[Message] | None = None,
    ) -> None:
        """Record the raw text of one turn (and the model's own, when calls were read from it).

        ``opening`` is what the turn answered: the messages added to the
        conversation since the last turn (the user's, the results, a repair).
        """
        record: dict[str, Any] = {"type": "model_turn", "turn": turn, "t": t, "content": content}
        if opening:
            record["opening"] = opening
        if tool_calls:
            record["tool_calls"] = openai_tool_calls(tool_calls)
        if written is not None:
            record["written"] = written
        self.write_line(json.dumps(record, ensure_ascii=False))

    def close(self) -> None:
        """Flush and close; later writes append."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.error = str(exc)
            self._file = None
