"""Figures of an eval: per task and overall, as a dict, a table and a JSON file."""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .runner import TaskResult

__all__ = ["overall", "report", "table", "write_report"]


def overall(results: list[TaskResult], samples: int = 1) -> dict[str, Any]:
    """Success rate, clean-run rate, means and totals over the applicable tasks.

    With several samples, ``success_rate_stdev`` is the spread of the
    per-sample success rates.
    """
    done = [r for r in results if r.applicable]
    n = len(done)

    def mean(values: list[float]) -> float:
        return round(statistics.fmean(values), 3) if values else 0.0

    per_sample = [
        sum(r.correct for r in done if r.sample == s) / max(1, sum(r.sample == s for r in done))
        for s in range(samples)
    ]
    statuses: dict[str, int] = {}
    for r in done:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "tasks": n,
        "not_applicable": len(results) - n,
        "correct": sum(r.correct for r in done),
        "success_rate": round(sum(r.correct for r in done) / n, 4) if n else 0.0,
        "success_rate_stdev": round(statistics.stdev(per_sample), 4) if samples > 1 else 0.0,
        "clean_runs": sum(r.clean for r in done),
        "clean_run_rate": round(sum(r.clean for r in done) / n, 4) if n else 0.0,
        "mean_turns": mean([r.turns for r in done]),
        "mean_tokens": mean([r.tokens for r in done]),
        # A turn cut by a limit reports no usage: average the turns that did.
        "mean_first_prompt_tokens": mean(
            [r.first_prompt_tokens for r in done if r.first_prompt_tokens]
        ),
        "total_tokens": sum(r.tokens for r in done),
        "mean_seconds": mean([r.seconds for r in done]),
        "total_seconds": round(sum(r.seconds for r in done), 1),
        "action_errors": sum(r.action_errors for r in done),
        "warnings": sum(r.warnings for r in done),
        "repair_turns": sum(r.repair_turns for r in done),
        "ok_with_empty_answer": sum(r.empty_ok for r in done),
        "unverified": sum(r.unverified for r in done),
        "names_overwritten": sum(len(r.overwritten) for r in done),
        "statuses": statuses,
        # A suite with python: the tasks whose last run ran code without an error.
        "ran_code": sum(bool(r.code_runs) for r in done if r.code_runs is not None),
        "python_tasks": sum(r.code_runs is not None for r in done),
        "unmarked": sum(r.unmarked for r in done),
        # BFCL: the score with each distinct call of a turn counted once.
        "distinct_correct": sum(bool(r.distinct_correct) for r in done),
        "distinct_scored": sum(r.distinct_correct is not None for r in done),
    }


def by_category(results: list[TaskResult]) -> dict[str, dict[str, Any]]:
    """Per category (in order of first appearance), over its applicable tasks.

    Each entry: ``tasks``, ``correct``, ``success_rate``, ``mean_seconds``
    (seconds per task) and ``total_seconds``.
    """
    groups: dict[str, list[TaskResult]] = {}
    for r in results:
        if r.applicable:
            groups.setdefault(r.category, []).append(r)
    figures: dict[str, dict[str, Any]] = {}
    for category, done in groups.items():
        correct = sum(r.correct for r in done)
        seconds = [r.seconds for r in done]
        figures[category] = {
            "tasks": len(done),
            "correct": correct,
            "success_rate": round(correct / len(done), 4),
            "mean_seconds": round(statistics.fmean(seconds), 3),
            "total_seconds": round(sum(seconds), 1),
        }
    return figures


def report(
    results: list[TaskResult],
    *,
    suite: str,
    model: str,
    protocol: str,
    options: dict[str, Any],
    samples: int,
    prompt_version: str,
    limits: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole report as a JSON-ready dict.

    ``limits`` are the run limits the tasks ran under (the suite's, with any
    override from the command line); the report records them as given.
    ``extra`` entries are added at the top level (the BFCL suite's version,
    categories and sample).
    """
    tasks = []
    for r in results:
        entry = asdict(r)
        entry["clean"] = r.clean
        entry["tokens"] = r.tokens
        entry["seconds"] = round(r.seconds, 2)
        tasks.append(entry)
    return {
        "suite": suite,
        "model": model,
        "protocol": protocol,
        "prompt_version": prompt_version,
        "options": options,
        "samples": samples,
        "limits": dict(limits or {}),
        **(extra or {}),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "overall": overall(results, samples),
        "categories": by_category(results),
        "tasks": tasks,
    }


def table(data: dict[str, Any]) -> str:
    """A plain-text summary: one line per task, the overall figures, one line per category."""
    # A suite with python adds a column: the last run's code runs (that raised).
    code = any(t.get("code_runs") is not None for t in data["tasks"])
    lines = [
        f"{'task':<28} {'ok':<4} {'status':<9} {'turns':>5} {'acts':>4} {'errs':>4} "
        f"{'warn':>4} {'rep':>3} {'unv':>3} {'tokens':>7} {'sec':>6}" + ("  code" if code else "")
    ]
    for t in data["tasks"]:
        if not t["applicable"]:
            lines.append(f"{t['id']:<28} n/a")
            continue
        lines.append(
            f"{t['id']:<28} {'yes' if t['correct'] else 'NO':<4} {t['status']:<9} "
            f"{t['turns']:>5} {t['actions_parsed']:>4} {t['action_errors']:>4} "
            f"{t['warnings']:>4} {t['repair_turns']:>3} {t.get('unverified', 0):>3} "
            f"{t['tokens']:>7} {t['seconds']:>6.1f}" + (_code_cell(t) if code else "")
        )
    o = data["overall"]
    lines.append(
        f"success {o['correct']}/{o['tasks']} ({o['success_rate']:.0%}), clean runs "
        f"{o['clean_runs']}/{o['tasks']} ({o['clean_run_rate']:.0%}), mean turns "
        f"{o['mean_turns']:.2f}, mean tokens {o['mean_tokens']:.0f}, mean "
        f"{o['mean_seconds']:.1f} s/task, total {o['total_seconds']:.0f} s; "
        f"ok-with-empty-answer {o['ok_with_empty_answer']}, names overwritten "
        f"{o['names_overwritten']}, unverified figures {o.get('unverified', 0)}"
        + (
            f"; ran code {o['ran_code']}/{o['python_tasks']}, unmarked answers "
            f"{o.get('unmarked', 0)}"
            if o.get("python_tasks")
            else ""
        )
        + (
            f"; counting each distinct call once {o['distinct_correct']}/{o['distinct_scored']}"
            if o.get("distinct_scored")
            else ""
        )
    )
    categories = data.get("categories") or {}
    if categories:
        lines.append(f"{'category':<28} {'correct':>7} {'tasks':>5} {'rate':>5} {'s/task':>7}")
        for name, c in categories.items():
            lines.append(
                f"{name:<28} {c['correct']:>7} {c['tasks']:>5} {c['success_rate']:>5.0%} "
                f"{c['mean_seconds']:>7.1f}"
            )
    return "\n".join(lines)


def _code_cell(task: dict[str, Any]) -> str:
    runs, errors = task.get("code_runs"), task.get("code_errors", 0)
    if runs is None:
        return ""
    return f"  {runs}" + (f" ({errors} raised)" if errors else "")


def write_report(data: dict[str, Any], folder: Path) -> Path:
    """Write ``data`` as ``eval-<model>-<protocol>-<time>.json`` under ``folder``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(data["model"]))
    if len(slug) > 60:
        # Keep the model's kind (`replay`, `openai`…) and the end of the rest:
        # cutting the front alone turned `replay:/a/long/path` into `eplay_…`.
        kind = slug.split("_", 1)[0][:20]
        slug = f"{kind}_{slug[-(59 - len(kind)) :]}"
    stamp = data["timestamp"].replace(":", "").replace("-", "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"eval-{slug}-{data['protocol']}-{stamp}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path
