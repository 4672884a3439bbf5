"""The sandbox image, built locally: no registry needed.

Our machines run a Docker engine but reach no image registry, so the image
for Docker tools and the ``python``/``shell`` sandboxes is assembled from
this machine's own files and loaded with ``docker import``: the Python
interpreter that runs cortex-kernel (its standard library without
site-packages and tests), ``/bin/sh`` and a few core utilities, each with the
shared libraries ``ldd`` reports and the dynamic loader. The tag is a hash of
the file list and sizes, so the image is built once per machine and reused.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import ToolError

if TYPE_CHECKING:
    from .docker import DockerEngine

__all__ = ["ensure_sandbox_image", "sandbox_image"]

SANDBOX_REPOSITORY = "cortex-kernel-sandbox"

_UTILITIES = (
    "sh", "cat", "echo", "id", "sleep", "ls", "head", "tail", "wc", "env", "true", "false",
    "mkdir", "rm", "touch", "dd", "yes", "printf",
)  # fmt: skip
_SKIP_DIRS = {
    "site-packages", "test", "tests", "__pycache__", "idlelib", "tkinter", "turtledemo",
    "ensurepip", "lib2to3", "pydoc_data",
}  # fmt: skip
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def _ldd(paths: Iterable[str]) -> set[str]:
    """Shared libraries (and the loader) the ELF files ``paths`` need."""
    found: set[str] = set()
    batch = [p for p in paths]
    for start in range(0, len(batch), 200):
        run = subprocess.run(
            ["ldd", *batch[start : start + 200]], capture_output=True, text=True, check=False
        )
        for line in run.stdout.splitlines():
            match = _LDD_LINE.search(line)
            if match:
                found.add(match.group(1))
    return found


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _stdlib_files(root: Path) -> Iterator[str]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith("config-")]
        for name in files:
            yield os.path.join(folder, name)


def _python() -> str:
    # The interpreter behind a venv's python (a venv is not copied, its base is).
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def sandbox_files() -> list[str]:
    """Every host file that goes into the image (absolute paths, sorted)."""
    executable = _python()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files: set[str] = {executable}
    files.update(_stdlib_files(stdlib))
    for tool in _UTILITIES:
        located = shutil.which(tool, path="/usr/bin:/bin")
        if located:
            files.add(located)
            files.add(os.path.realpath(located))
    elf = [path for path in files if _is_elf(path)]
    libraries = _ldd(elf)
    files.update(libraries)
    files.update(os.path.realpath(lib) for lib in libraries)
    return sorted(files)


def _tag(files: list[str]) -> str:
    digest = hashlib.sha256()
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}\0{stat.st_size}\0".encode())
    return digest.hexdigest()[:12]


def _dirs(archive: tarfile.TarFile, folder: str, seen: set[str]) -> None:
    """Directory entries for ``folder`` (a real path) and its parents."""
    parts = Path(folder).parts
    for depth in range(2, len(parts) + 1):
        current = str(Path(*parts[:depth]))
        if current not in seen:
            seen.add(current)
            info = tarfile.TarInfo(current.lstrip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            archive.addfile(info)


def _link(archive: tarfile.TarFile, path: str, seen: set[str]) -> str:
    """Place ``path`` (file or link) under its parent's real location; returns that name."""
    parent = os.path.realpath(os.path.dirname(path))
    _dirs(archive, parent, seen)
    return os.path.join(parent, os.path.basename(path))


def _add(archive: tarfile.TarFile, path: str, seen: set[str]) -> None:
    # Merged-/usr systems reach libraries through symlinked folders (/lib -> usr/lib):
    # files go in at their real place, and each symlinked folder on the way is a link.
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        ancestor = str(Path(*parts[:depth]))
        if os.path.islink(ancestor):
            where = _link(archive, ancestor, seen)
            if where not in seen:
                seen.add(where)
                _dirs(archive, os.path.realpath(ancestor), seen)
                info = tarfile.TarInfo(where.lstrip("/"))
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(ancestor)
                archive.addfile(info)
    where = _link(archive, path, seen)
    if where in seen:
        return
    seen.add(where)
    archive.add(path, arcname=where.lstrip("/"), recursive=False)


def _rootfs(files: list[str], python: str) -> bytes:
    buffer = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder in ("tmp", "workspace", "etc", "usr", "usr/local", "usr/local/bin"):
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if folder in ("tmp", "workspace") else 0o755
            archive.addfile(info)
            seen.add("/" + folder)
        for path in files:
            if os.path.exists(path) or os.path.islink(path):
                _add(archive, path, seen)
        for name, target in (("usr/local/bin/python3", python), ("usr/local/bin/python", python)):
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
        if not os.path.exists("/bin/sh"):  # pragma: no cover - every Linux has /bin/sh
            raise ToolError("cannot build the sandbox image: this machine has no /bin/sh")
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n"
        group = b"root:x:0:\nnogroup:x:65534:\n"
        for name, data in (("etc/passwd", passwd), ("etc/group", group)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def ensure_sandbox_image(client: Any) -> str:
    """The sandbox image's tag on ``client``'s engine, built (once) when missing.

    Returns
    -------
    str
        ``cortex-kernel-sandbox:<hash>``; ``python3`` and ``sh`` are on its ``PATH``.
    """
    import docker.errors

    files = sandbox_files()
    tag = _tag(files)
    name = f"{SANDBOX_REPOSITORY}:{tag}"
    try:
        client.images.get(name)
        return name
    except docker.errors.ImageNotFound:
        pass
    python = _python()
    data = _rootfs(files, python)
    try:
        client.api.import_image_from_data(
            data,
            repository=SANDBOX_REPOSITORY,
            tag=tag,
            changes=[
                "ENV PATH=/usr/local/bin:/usr/bin:/bin",
                "ENV PYTHONDONTWRITEBYTECODE=1",
                "WORKDIR /tmp",
            ],
        )
    except docker.errors.APIError as exc:
        raise ToolError(f"cannot build the sandbox image {name}: {exc}") from None
    return name


async def sandbox_image(engine: DockerEngine | None = None) -> str:
    """:func:`ensure_sandbox_image` on ``engine``, off the event loop."""
    import anyio.to_thread

    from .docker import docker_client

    client = await anyio.to_thread.run_sync(docker_client, engine)
    name: str = await anyio.to_thread.run_sync(ensure_sandbox_image, client)
    return name
