"""``cortex-kernel run``: one run without Jupyter, events printed as JSONL on stdout.

Exit status: 0 when the run finished normally (status ``ok``), 1 when it
ended with an error, at a limit or cancelled (or its transcript could not be
copied), 2 for a configuration error (bad model, replay file, manifest, or a
transcript path that cannot be written — checked before the run starts).
``fire_and_forget`` actions get up to ``drain_timeout`` seconds to finish
after the run before they are cancelled.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from .exceptions import CortexError
from .model_options import ModelOptions

if TYPE_CHECKING:
    from .executors.approval import ApprovalRequest

__all__ = ["run_headless"]


class _ManifestApprover:
    """The manifest's ``approvals:`` mode, where nobody is there to ask.

    ``auto`` approves a request its tool noted nothing about (the in-kernel
    ``python``'s writes into existing objects are notes) and refuses the rest.
    """

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.by = f"manifest approvals: {policy}"

    async def __call__(self, request: ApprovalRequest) -> bool:
        """Approved or refused by the mode alone."""
        if self.policy == "auto":
            return not request.notes
        return self.policy == "bypass"


def _manifest_approver(manifest: str | None, agent: str | None) -> _ManifestApprover | None:
    """The approver the manifest's ``approvals:`` asks for; ``None`` (refuse all) for ``ask``."""
    if manifest is None:
        return None
    from .manifest import load_manifest

    policy = load_manifest(manifest).agent(agent).approvals
    return None if policy in (None, "ask") else _ManifestApprover(policy)


def run_headless(
    message: str,
    *,
    model: str | None = None,
    manifest: str | None = None,
    transcript: str | None = None,
    protocol: str | None = None,
    options: ModelOptions | None = None,
    agent: str | None = None,
    yes: bool = False,
    out: IO[str] | None = None,
    drain_timeout: float = 10.0,
    **session_options: Any,
) -> int:
    """Run ``message`` once and print every event as a JSON line.

    Parameters
    ----------
    message
        The user's message.
    model, manifest, protocol, options, agent
        As for :func:`cortex_kernel.agent.build_session`.
    yes
        Approve every tool call marked ``confirm: true``. Without it the
        manifest's ``approvals:`` decides (``auto``, ``bypass``, ``deny``);
        unset or ``ask``, they are refused (nobody is there to ask).
    transcript
        Copy the run's JSONL transcript here.
    out
        Where the events go (default: stdout).
    drain_timeout
        Seconds to wait for ``fire_and_forget`` actions after the run.

    Returns
    -------
    int
        The process exit status.
    """
    stream = out if out is not None else sys.stdout

    target = Path(transcript) if transcript else None
    if target is not None:
        try:  # checked before the run: its work must not be lost at the end
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            print(
                f"cortex-kernel run: cannot write the transcript to {target}: "
                f"{exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2

    async def main() -> int:
        from .agent import build_session
        from .executors.approval import ApproveAll

        try:
            approver = ApproveAll() if yes else _manifest_approver(manifest, agent)
            session = build_session(
                model=model,
                manifest=manifest,
                protocol=protocol,
                options=options,
                agent=agent,
                approver=approver,
                **{
                    # Python in a namespace of the run's own, each call refused
                    # unless --yes: as in the notebook, where the user approves it.
                    "namespace": {},
                    "notebook_python": True,
                    **session_options,
                },
            )
        except CortexError as exc:
            print(f"cortex-kernel run: {exc}", file=sys.stderr)
            return 2
        note = getattr(session.config.model, "note", None)
        if note:
            print(f"note: {note}", file=sys.stderr)

        def show(event: Any) -> None:
            stream.write(event.to_json() + "\n")
            stream.flush()

        async with session:  # its background work and MCP servers end with the block
            result = await session.run(message, on_event=show)
            await session.drain(drain_timeout)
        if target is not None and result.transcript is not None and result.transcript.exists():
            try:
                shutil.copyfile(result.transcript, target)
            except OSError as exc:
                print(
                    f"cortex-kernel run: the run ended {result.status} but its transcript "
                    f"could not be copied to {target}: {exc.strerror or exc}; it is at "
                    f"{result.transcript}",
                    file=sys.stderr,
                )
                return 1
        if result.status != "ok":
            print(f"cortex-kernel run: {result.status}: {result.message}", file=sys.stderr)
            return 1
        return 0

    try:
        return anyio.run(main)
    except KeyboardInterrupt:
        print("cortex-kernel run: interrupted", file=sys.stderr)
        return 130
