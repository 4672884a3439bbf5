"""Run the parser fuzz target split over processes, each with its own seed.

``make fuzz EXAMPLES=1000000 JOBS=2`` calls this. The budget is divided
between ``JOBS`` pytest processes running ``tests/protocol/test_fuzz.py``
(its ``test_fuzz_budget``) with distinct seeds — ``CORTEX_FUZZ_SEED`` and
``--hypothesis-seed`` are ``SEED + shard`` — so they draw different inputs;
the run fails if any shard fails. Each shard's output goes to
``.fuzz/shard-N.log``; every ``--every`` seconds, and at the end, the
examples done per shard and in total are printed, with the time taken::

    python scripts/fuzz.py --examples 1000000 --jobs 2 [--seed 1234]

A failing shard's log holds the failing example's seed, input and cuts;
``tests.protocol.test_fuzz.check_seed(SEED)`` replays it.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _read_count(path: Path) -> int:
    try:
        return int(path.read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return 0


def _status(progress: list[Path], started: float) -> str:
    counts = [_read_count(p) for p in progress]
    shards = ", ".join(f"shard {i}: {n:,}" for i, n in enumerate(counts))
    return f"{sum(counts):,} examples in {time.monotonic() - started:,.0f} s ({shards})"


def main(argv: list[str] | None = None) -> int:
    """Start the shards, report progress, and return 0 when every shard passed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None, help="base seed (default: random)")
    parser.add_argument("--every", type=float, default=300.0, help="progress every N seconds")
    parser.add_argument("--out", type=Path, default=ROOT / ".fuzz")
    args = parser.parse_args(argv)
    jobs = max(1, args.jobs)
    base = args.seed if args.seed is not None else random.randrange(2**31)
    args.out.mkdir(exist_ok=True)
    budgets = [args.examples // jobs + (i < args.examples % jobs) for i in range(jobs)]
    progress = [args.out / f"shard-{i}.progress" for i in range(jobs)]
    procs = []
    started = time.monotonic()
    for i, budget in enumerate(budgets):
        seed = base + i
        progress[i].write_text("0\n", encoding="utf-8")
        env = {
            **os.environ,
            "CORTEX_FUZZ_EXAMPLES": str(budget),
            "CORTEX_FUZZ_SEED": str(seed),
            "CORTEX_FUZZ_PROGRESS": str(progress[i]),
        }
        cmd = [
            sys.executable, "-m", "pytest", "tests/protocol/test_fuzz.py",
            "-p", "no:timeout", "-p", "no:cacheprovider", "-q",
            f"--hypothesis-seed={seed}",
        ]  # fmt: skip
        if i:  # the cheap hypothesis and regression tests once, in shard 0
            cmd += ["-k", "test_fuzz_budget"]
        log = (args.out / f"shard-{i}.log").open("w", encoding="utf-8")
        print(f"shard {i}: {budget:,} examples, seed {seed}", flush=True)
        procs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log), log))
    next_report = time.monotonic() + args.every
    while any(p.poll() is None for p, _ in procs):
        time.sleep(1.0)
        if time.monotonic() >= next_report:
            print(_status(progress, started), flush=True)
            next_report += args.every
    failed = [i for i, (p, log) in enumerate(procs) if (log.close(), p.returncode)[1] != 0]
    print(_status(progress, started), flush=True)
    for i in failed:
        print(f"shard {i} FAILED (seed {base + i}); its log, {args.out / f'shard-{i}.log'}:")
        print((args.out / f"shard-{i}.log").read_text(encoding="utf-8")[-6000:])
    print("fuzz: " + ("FAILED" if failed else f"passed, {args.examples:,} examples"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
