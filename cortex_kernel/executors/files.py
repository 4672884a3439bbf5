"""``read_file``, ``write_file`` and ``list_files``: file access inside one workspace.

Every path is resolved (symlinks followed, ``..`` applied) before use and
must stay inside the workspace directory; anything else is refused with a
message that names the path. Resolving first is what stops both ``../x`` and
a symlink inside the workspace that points out of it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..exceptions import ToolError

__all__ = ["Workspace"]


class Workspace:
    """A directory the agent's file tools are confined to.

    Parameters
    ----------
    root
        The directory (made by the first ``write_file``; until then it lists empty).
    max_bytes
        Largest file ``read_file`` returns and ``write_file`` accepts.
    """

    def __init__(self, root: str | os.PathLike[str], max_bytes: int = 1_000_000) -> None:
        self.root = Path(root).expanduser().resolve()
        self.max_bytes = max_bytes

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace) as an absolute path inside it.

        Raises
        ------
        ToolError
            When the path leaves the workspace, through ``..``, an absolute
            path or a symlink.
        """
        if "\x00" in path:
            raise ToolError(f"path {path!r} contains a NUL byte")
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise ToolError(
                f"path {path!r} is outside the workspace {self.root} (paths are relative to "
                "it; '..' and symlinks may not leave it)"
            )
        return target

    def _read(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"no file {path!r} in the workspace")
        size = target.stat().st_size
        if size > self.max_bytes:
            raise ToolError(f"file {path!r} has {size} bytes; the limit is {self.max_bytes}")
        return target.read_text(encoding="utf-8", errors="replace")

    def _write(self, path: str, content: str) -> dict[str, Any]:
        data = content.encode("utf-8")
        if len(data) > self.max_bytes:
            raise ToolError(f"content has {len(data)} bytes; the limit is {self.max_bytes}")
        target = self.resolve(path)
        self.resolve(str(target.parent.relative_to(self.root)))  # parent inside too
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a symlink planted after resolve() is refused, not followed.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return {"path": str(target.relative_to(self.root)), "bytes": len(data)}

    def _list(self, path: str) -> list[str]:
        target = self.resolve(path)
        if target == self.root and not target.exists():
            return []  # not written to yet
        if not target.is_dir():
            raise ToolError(f"no directory {path!r} in the workspace")
        out = []
        for entry in sorted(target.iterdir()):
            name = str(entry.relative_to(self.root))
            out.append(name + "/" if entry.is_dir() else name)
        return out

    async def read_file(self, path: str) -> str:
        """Return the text of ``path``.

        Parameters
        ----------
        path
            A file path relative to the workspace.
        """
        return await anyio.to_thread.run_sync(self._read, path)

    async def write_file(self, path: str, content: str) -> dict[str, Any]:
        """Write ``content`` to ``path`` (parents created); returns the path and size.

        Parameters
        ----------
        path
            A file path relative to the workspace.
        content
            The text to write (UTF-8).
        """
        return await anyio.to_thread.run_sync(self._write, path, content)

    async def list_files(self, path: str = ".") -> list[str]:
        """List a directory of the workspace (folders end with ``/``).

        Parameters
        ----------
        path
            A directory relative to the workspace.
        """
        return await anyio.to_thread.run_sync(self._list, path)
