"""The extraction plan: what an extraction of a table would do now (``extraction_plan``, the
``--incremental-run-extraction`` run without ``-x``), without changing anything.
"""

from __future__ import annotations

from gluon import locks
from gluon import source as sources
from gluon.config import Settings
from gluon.extract.feeds import feed_of
from gluon.extract.run import NOT_ENABLED_HINT, default_batch_size
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.states import MergeMode


def extraction_plan(
    settings: Settings, ref: TableRef, *, batch_size: int | None = None
) -> list[tuple[str, str]]:
    """What an extraction of ``ref`` would do now, as (step name, description); changes nothing.

    Raises:
        StateError: incremental update is not enabled.
    """
    repo = Repository(settings.repo_url)
    record, state = repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)
    running = locks.holder(repo, ref.key, locks.EXTRACTION)
    if running is not None:
        return [("refused", f"nothing: a running {locks.describe(running)} holds the table")]
    feed = feed_of(state)(sources.connect_configured(settings), record, state, repo)
    pending = feed.pending()
    if pending == 0:
        return [("nothing_to_do", f"nothing to extract: no changes of {ref.key} are captured")]
    partition = state.ingestion_partition
    changes = "the captured changes" if pending is None else f"{pending} captured changes"
    batch_size = batch_size or default_batch_size(MergeMode(state.merge_mode or MergeMode.DEFERRED))
    steps = [
        ("read", f"read {changes} of {ref.key}, lowest gl_seq first, {batch_size} per batch"),
        (
            (
                "merge",
                f"stage each batch in {state.delta_table}, then merge it into the base table "
                f"{record.base_path} (the latest change per key; insert-only methods append), "
                "one Delta commit per batch recording it, so a re-run never applies it twice",
            )
            if state.merge_mode == MergeMode.IMMEDIATE
            else (
                "append",
                f"append them to {state.delta_table} (control partition {partition}), one "
                "Delta commit per batch, skipping any already there",
            )
        ),
        ("done", f"mark them shipped: {feed.marks_shipped}"),
    ]
    if state.diverting:
        steps.append(
            (
                "acknowledge",
                f"acknowledge change ingestion diversion to control partition {partition} "
                "(the waiting compaction goes on)",
            )
        )
    return steps
