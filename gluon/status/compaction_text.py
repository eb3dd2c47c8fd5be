"""The compaction part of status's text: runs named by their repository id, the last
completed one, the snapshot and the kept objects."""

from __future__ import annotations

from gluon import states
from gluon.repo.compaction import CompactionRun
from gluon.status.formatting import count, failure_line, when
from gluon.status.model import CompactionRunInfo, CompactionStatus


def compaction_label(run: CompactionRun) -> str:
    """``compaction run 22``: the repository's run id, as the command's result line and the
    log say it (it counts the compaction runs of every table)."""
    return f"compaction run {run.id}"


def _compaction_run(info: CompactionRunInfo) -> str:
    run = info.run
    text = f"{compaction_label(run)} ({run.method}), started {when(run.started_at)}"
    if run.current_step:
        text += f"; current step: {run.current_step}"
    text += f"; status: {info.status_text}"
    if run.message and run.status != states.CompactionStatus.SUCCESS:
        text += f" ({failure_line(run.message)})"
    return text


def completed_compaction(run: CompactionRun) -> str:
    """When the last compaction finished, its run, and what it did."""
    if run.compacted_partition is None:  # merge mode IMMEDIATE: small files rewritten
        what = f"{run.method}: rewrote the base table's small files, vacuumed"
    else:
        what = (
            f"{run.method}, control partition {run.compacted_partition}, "
            f"{count(run.changes, 'unknown')} changes"
        )
    return f"{when(run.finished_at, 'unknown')} ({compaction_label(run)}, {what})"


def compaction_lines(
    compaction: CompactionStatus, verbose: bool
) -> tuple[list[tuple[str, str]], list[str]]:
    """The compaction section's ``label: value`` pairs, then its further lines."""
    ongoing = compaction.ongoing
    last = compaction.last_completed.run if compaction.last_completed else None
    pairs = [
        ("Ongoing compaction", _compaction_run(ongoing) if ongoing else "none"),
        ("Last completed compaction", completed_compaction(last) if last else "none completed yet"),
        ("Completed compactions", str(compaction.completed_runs)),
    ]
    extra: list[str] = []
    snapshot = compaction.snapshot
    if snapshot is not None:
        state = "completed" if snapshot.run_completed else "ongoing"
        extra += ["", f"Pre-compaction snapshot of compaction run {snapshot.run_id} ({state}):"]
        for entry in snapshot.entries:
            extra.append(f"  {entry.role}: {entry.table} version {entry.version} at {entry.path}")
            extra.append(f"    {entry.command}")
    extra += ["", "Retained obsolete objects:" if compaction.retained else "No retained objects."]
    extra += [
        f"  {item.kind} {item.name}"
        + (f" at {item.location}" if item.location else "")
        + (f" version {item.delta_version}" if item.delta_version is not None else "")
        + f" (kept {when(item.retained_at)}, compaction run {item.compaction_run_id})"
        for item in compaction.retained
    ]
    shown = ongoing or compaction.last_completed
    if verbose and shown is not None and shown.steps:
        extra += ["", f"Steps of {compaction_label(shown.run)}:"]
        extra += [
            f"  {step.step}: {step.status} ({when(step.started_at)}"
            + (f" - {when(step.finished_at)}" if step.finished_at else "")
            + ")"
            + (f" {step.detail}" if step.detail else "")
            for step in shown.steps
        ]
    return pairs, extra
