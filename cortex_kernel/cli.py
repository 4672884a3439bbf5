"""The command line: ``cortex-kernel install|parse|run|eval|bench|demo``.

Each command imports what it needs when it runs, so ``cortex-kernel parse``
never pays for litellm or Jupyter.

Exit status (every command): 0 success; 1 the work ran and failed (a run
that ended with an error, at a limit or cancelled; a transcript that could
not be copied); 2 a usage or input error, reported as one line on stderr
(bad arguments, an empty message, a file that is missing, a directory or
not UTF-8 text, an invalid replay file or manifest); 130 interrupted.
A Python traceback is a bug.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .exceptions import ConfigError
from .model_options import add_model_arguments, options_from_args

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cortex-kernel",
        description="A Jupyter kernel for an LLM agent that acts while it thinks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    install = sub.add_parser("install", help="install the 'cortex' kernelspec")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true", help="install into sys.prefix")
    where.add_argument("--prefix", help="install into this prefix")

    parse = sub.add_parser("parse", help="print the parser events of protocol text as JSONL")
    parse.add_argument("file", nargs="?", help="protocol text (default: stdin)")
    parse.add_argument("--chunk", type=int, default=0, help="feed N characters at a time")

    run = sub.add_parser("run", help="one headless run; prints runtime events as JSONL")
    run.add_argument("message")
    run.add_argument("--model", help="litellm model string or replay:PATH[?tps=N]")
    run.add_argument("--manifest", help="agent manifest (YAML or TOML)")
    run.add_argument("--agent", help="which agent of a manifest that defines several")
    run.add_argument(
        "--yes",
        action="store_true",
        help="approve every tool call marked confirm: true (without it the manifest's "
        "approvals: decides; unset, they are refused)",
    )
    run.add_argument("--transcript", help="write the run's JSONL transcript here")
    add_model_arguments(run)

    evaluate = sub.add_parser(
        "eval", help="run an eval suite: how well does a model speak the protocol?"
    )
    evaluate.add_argument("--model", help="litellm model string or replay:PATH")
    evaluate.add_argument(
        "--suite",
        help="suite YAML file (default: the built-in suite), data for questions on "
        "DataFrames, or bfcl[:CATEGORY,...] for BFCL's AST categories scored by BFCL's checker",
    )
    evaluate.add_argument("--samples", type=int, default=1, help="runs per task (variance)")
    evaluate.add_argument("--task", action="append", help="run only this task id (repeatable)")
    evaluate.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="--suite bfcl: N cases per category, drawn with --seed (default 0); default all",
    )
    evaluate.add_argument("--out", help="folder for the JSON report (default benchmarks/results)")
    evaluate.add_argument(
        "--wall-time",
        type=float,
        metavar="SECONDS",
        help="seconds each run may take, for every task (overrides the suite's limits.wall_time)",
    )
    add_model_arguments(evaluate)

    bench = sub.add_parser(
        "bench", help="run the benchmarks and print their figures (in a source checkout)"
    )
    bench.add_argument("name", nargs="?", help="one benchmark (default: all)")

    sub.add_parser(
        "demo", help="execute the example notebooks headless (in a source checkout; make demo)"
    )
    return parser


class UsageError(Exception):
    """Bad input from the command line: one line on stderr, exit status 2."""


def read_text_input(file: str | None) -> str:
    """The UTF-8 text of ``file`` (stdin for ``None`` or ``-``).

    Raises
    ------
    UsageError
        The file is missing, unreadable, a directory, or not UTF-8 text.
    """
    name = "stdin" if file in (None, "-") else str(file)
    try:
        data = sys.stdin.buffer.read() if file in (None, "-") else Path(str(file)).read_bytes()
    except IsADirectoryError:
        raise UsageError(f"{name} is a directory; give a file of protocol text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{name} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"
        ) from None


def _parse(file: str | None, chunk: int) -> int:
    from .protocol import Parser

    text = read_text_input(file)
    parser = Parser()
    out = sys.stdout
    step = chunk if chunk > 0 else max(len(text), 1)
    for start in range(0, len(text), step):
        for event in parser.feed(text[start : start + step]):
            out.write(event.to_json() + "\n")
    for event in parser.close():
        out.write(event.to_json() + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``cortex-kernel`` and ``python -m cortex_kernel``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "run" and not args.message.strip():
        parser.error("run: the message is empty; write what the agent should do")
    try:
        return _dispatch(args)
    except UsageError as exc:
        print(f"cortex-kernel {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `cortex-kernel parse … | head`: the reader left
        # Point stdout at devnull so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"cortex-kernel {args.command}: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "parse":
        return _parse(args.file, args.chunk)
    if args.command == "install":
        from .jupyter.install import install

        return install(user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix)
    if args.command in ("run", "eval"):
        try:  # the model options, checked before anything runs
            options = options_from_args(args, where=f"cortex-kernel {args.command}")
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
    if args.command == "run":
        from .headless import run_headless

        return run_headless(
            args.message,
            model=args.model,
            manifest=args.manifest,
            transcript=args.transcript,
            options=options,
            agent=args.agent,
            yes=args.yes,
        )
    if args.command == "eval":
        from .evaluation import run_eval

        return run_eval(
            model=args.model,
            suite=args.suite,
            options=options,
            samples=args.samples,
            tasks=args.task,
            out=args.out,
            wall_time=args.wall_time,
            sample=args.sample,
        )
    if args.command == "bench":
        from .bench import run_benchmarks

        return run_benchmarks(args.name)
    if args.command == "demo":
        from .demo import notebooks_dir, run_demo

        folder = notebooks_dir()
        if not any(folder.glob("*.ipynb")):
            raise UsageError(
                "the example notebooks are part of the source checkout (notebooks/*.ipynb), "
                f"not of the installed package; none at {folder}. "
                "Run it from the root of a clone of the repository (make demo)"
            )
        return run_demo()
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
