"""The optional compiled build of the parser (mypyc, as black builds its wheels).

The parser's scanning loop is Python; compiled with mypyc it runs faster, by
as much as ``cortex-kernel bench parser`` measures on both builds (figures in
docs/benchmarks.md, "parser"). The pure-Python modules always ship and
always work: the compiled ones sit beside them and Python prefers an
extension module to a ``.py`` of the same name.

- As a hatch build hook (``[tool.hatch.build.targets.wheel.hooks.custom]``):
  a wheel (not an editable install) gets the compiled modules when a C
  compiler and mypyc are present; otherwise, or when ``CORTEX_PURE_PYTHON=1``,
  or when compiling fails, it is the pure-Python wheel (with a message).
- As a script, ``python hatch_build.py --out build/compiled``: a copy of the
  package with the compiled modules in place, which ``make test`` runs the
  protocol tests against (``CORTEX_COMPILED_DIR``, see ``tests/conftest.py``);
  without a C compiler it builds nothing and ``make test`` says so.

Both compile into ``build/compiled`` and reuse it while the sources it was
built from are unchanged (a hash of them is kept beside it), so a wheel built
after ``make test`` does not compile again (mypyc takes minutes here).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
PACKAGE = "cortex_kernel"
# The parser's hot path: the modules compiled, relative to the project root.
COMPILED_MODULES = (
    "cortex_kernel/protocol/parser.py",
    "cortex_kernel/protocol/_body.py",
    "cortex_kernel/protocol/_scanner.py",
    "cortex_kernel/protocol/_states.py",
    "cortex_kernel/protocol/_attributes.py",
    "cortex_kernel/protocol/_actions.py",
)
# What those modules import (and so what mypyc reads): a change here rebuilds.
_SOURCES = ("cortex_kernel/protocol", "cortex_kernel/safejson.py")
_STAMP = ".compiled-from"


def compiler_present() -> bool:
    """Whether the C compiler Python was built with is on this machine."""
    cc = sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(cc)[0]) is not None


def source_hash(root: Path = ROOT) -> str:
    """A hash of the sources the compiled modules are built from (and of their list)."""
    digest = hashlib.sha256(" ".join(COMPILED_MODULES).encode())
    files: list[Path] = []
    for name in _SOURCES:
        path = root / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def build_compiled(out: Path, root: Path = ROOT) -> list[Path]:
    """Copy the package to ``out`` and compile :data:`COMPILED_MODULES` there.

    Returns the extension modules built (paths under ``out``). Skips mypyc
    when ``out`` was compiled from the same sources. Raises
    ``subprocess.CalledProcessError`` when mypyc fails.
    """
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        root / PACKAGE,
        out / PACKAGE,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
    )
    wanted = source_hash(root)
    stamp = out / _STAMP
    built = _extensions(out)
    if stamp.exists() and stamp.read_text() == wanted and built:
        return built
    for path in built:
        path.unlink()
    stamp.unlink(missing_ok=True)
    subprocess.run(
        # mypy's settings (strict, the pydantic plugin) from the project's file.
        [
            sys.executable,
            "-m",
            "mypyc",
            "--config-file",
            str(root / "pyproject.toml"),
            *COMPILED_MODULES,
        ],
        cwd=out,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    stamp.write_text(wanted)
    return _extensions(out)


def _extensions(out: Path) -> list[Path]:
    """The compiled modules under ``out``: the shared ``*__mypyc`` library and one per module."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    shared = sorted(out.glob(f"*__mypyc{suffix}"))
    modules = [out / (name.removesuffix(".py") + suffix) for name in COMPILED_MODULES]
    if not shared or not all(path.exists() for path in modules):
        return []
    return [*shared, *modules]


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script without hatchling: the hook is not needed
    BuildHookInterface = object  # type: ignore[assignment,misc]


class CompiledParserHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Adds the compiled parser to a wheel when it can be built (else: pure Python)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile (or reuse ``build/compiled``) and ship the extension modules."""
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("CORTEX_PURE_PYTHON", "") not in ("", "0"):
            return
        if not compiler_present():
            self.app.display_warning("no C compiler: the pure-Python parser only")
            return
        out = Path(self.root) / "build" / "compiled"
        try:
            built = build_compiled(out, Path(self.root))
        except (OSError, subprocess.CalledProcessError) as exc:
            self.app.display_warning(f"mypyc failed ({exc}): the pure-Python parser only")
            return
        for path in built:
            build_data["force_include"][str(path)] = path.relative_to(out).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True


def main() -> None:
    """``python hatch_build.py --out DIR``: the compiled copy of the package in DIR."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "compiled")
    args = parser.parse_args()
    if not compiler_present():
        # The pure-Python parser is the whole product then: nothing to build or test.
        (args.out / _STAMP).unlink(missing_ok=True)
        print("no C compiler: the compiled parser is not built", file=sys.stderr)
        return
    for path in build_compiled(args.out.resolve()):
        print(path)


if __name__ == "__main__":
    main()
