"""The states gluon records in the repository, each set defined once.

The values are the stored strings (``StrEnum``: a member equals its value), so
existing repositories, ``--json`` output and reports are unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class TableStatus(StrEnum):
    """An offloaded table (``offloaded_tables.status``)."""

    OFFLOADING = "offloading"
    OFFLOADED = "offloaded"


class IncrementStatus(StrEnum):
    """One increment of a partially offloaded table."""

    PENDING = "pending"
    DONE = "done"


class IncrementalStatus(StrEnum):
    """Incremental update of a table (``incremental_state.status``)."""

    ENABLING = "enabling"
    ENABLED = "enabled"
    DISABLING = "disabling"


class ExtractionStatus(StrEnum):
    """One extraction run."""

    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    """Recorded as running by a command that died (a later extraction marks it; status also
    shows a running run whose lock no live process holds so)."""


class CompactionStatus(StrEnum):
    """One compaction run."""

    RUNNING = "running"
    WAITING = "waiting"
    """Stopped at the acknowledgement step (--incremental-terminate-compaction)."""
    FAILED = "failed"
    SUCCESS = "success"
    ABANDONED = "abandoned"
    """Ended before its views switched (--incremental-abandon-compaction); never resumed."""


class MergeMode(StrEnum):
    """How extracted changes reach the base table (``incremental_state.merge_mode``), chosen
    when incremental update is enabled (``--incremental-merge-mode``)."""

    DEFERRED = "DEFERRED"
    """The Hadoop behaviour: a delta table read through views until a compaction merges it."""
    IMMEDIATE = "IMMEDIATE"
    """The cloud behaviour: each extraction merges its batch into the base table (one Delta
    commit per batch); no delta table, no views, no compaction."""


MERGE_MODE_SUMMARIES = {
    MergeMode.DEFERRED: "changes go to a delta table read through views until a compaction "
    "merges them",
    MergeMode.IMMEDIATE: "each extraction merges its changes into the base table, a plain "
    "Delta table any Delta reader sees current",
}
"""Each mode in a few words, for ``offload --help`` (``merge_mode_choices``)."""


def merge_mode_choices() -> str:
    """Every merge mode with its summary, the default first: for help texts."""
    return " or ".join(
        f"{mode.value} ({'default: ' if mode is MergeMode.DEFERRED else ''}"
        f"{MERGE_MODE_SUMMARIES[mode]})"
        for mode in MergeMode
    )


def parse_merge_mode(text: str | None) -> MergeMode:
    """``--incremental-merge-mode`` (None: the default, DEFERRED).

    Raises:
        ValueError: not a mode (the message lists them).
    """
    if text is None:
        return MergeMode.DEFERRED
    try:
        return MergeMode(text.strip().upper())
    except ValueError:
        known = ", ".join(mode.value for mode in MergeMode)
        raise ValueError(
            f"--incremental-merge-mode must be one of {known}, found {text!r}"
        ) from None


class SlotScope(StrEnum):
    """Which replication slot a log-based table's changes come from
    (``--incremental-pg-logical-slot``), chosen when incremental update is enabled and
    recorded in its capture objects."""

    TABLE = "table"
    """A slot of the table's own: each slot decodes all the WAL."""
    DATABASE = "database"
    """The one pgoutput slot and publication its database's member tables share: the WAL
    is decoded once per extraction for all of them. The default (the option not given)
    for a table that can be a member; one that cannot gets a slot of its own."""


def parse_slot_scope(text: str | None) -> SlotScope | None:
    """``--incremental-pg-logical-slot`` (None: not given; the feed chooses, see
    :class:`SlotScope`).

    Raises:
        ValueError: not a scope (the message lists them).
    """
    if text is None:
        return None
    try:
        return SlotScope(text.strip().lower())
    except ValueError:
        known = " or ".join(scope.value for scope in SlotScope)
        raise ValueError(f"--incremental-pg-logical-slot must be {known}, not {text!r}") from None
