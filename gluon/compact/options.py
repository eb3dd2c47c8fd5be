"""What a compaction was asked to do."""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from gluon.errors import UsageError
from gluon.naming import TableRef


class CompactionMethod(StrEnum):
    IN_PLACE = "IN_PLACE"
    """Rewrite only the base partitions that hold or receive changed keys."""
    FULL = "FULL"
    """The merged rows staged in one write, published as the base's next version."""
    PARTITION_WISE_FULL = "PARTITION_WISE_FULL"
    """The merged rows staged one partition batch at a time, published in one commit."""


DEFAULT_WAIT_MINUTES = 15.0
DEFAULT_DELTA_THRESHOLD = 1
DEFAULT_VACUUM_RETENTION_HOURS = 168.0
ACK_POLL_SECONDS = float(os.environ.get("GLUON_ACK_POLL_SECONDS", "5"))
"""How often a waiting compaction looks for the acknowledgement (GLUON_ACK_POLL_SECONDS)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions:
    table: TableRef
    method: CompactionMethod | None = None
    """None: the table's default (``gluon.extract.insert_only.default_compaction_method``)."""
    terminate_at_acknowledgement: bool = False
    delta_threshold: int = DEFAULT_DELTA_THRESHOLD
    wait_minutes: float = DEFAULT_WAIT_MINUTES
    retain_obsolete_objects: bool = False
    without_snapshot: bool = False
    vacuum_retention_hours: float = DEFAULT_VACUUM_RETENTION_HOURS
    ack_poll_seconds: float = ACK_POLL_SECONDS
    acknowledgement_timeout_seconds: float | None = None
    """Give up waiting for a running extraction's acknowledgement after this long (None:
    wait as long as it takes)."""
    given: frozenset[str] | None = None
    """The names of the options the user gave (None: all of them). A resumed run notes only
    given options that differ from the ones it keeps, not defaults."""

    def recorded(self) -> dict[str, Any]:
        """The options stored with the run (a resumed run keeps its method)."""
        values = asdict(self)
        values["table"] = self.table.key
        del values["given"]
        return values

    def is_given(self, name: str) -> bool:
        """Whether the user gave option ``name`` (a field of this class)."""
        return self.given is None or name in self.given


def chosen_method(
    *, full: bool, partition_wise_full: bool, in_place: bool
) -> CompactionMethod | None:
    """The compaction method the method flags name; None when none is given.

    Raises:
        UsageError: more than one is given.
    """
    chosen = [
        method
        for method, flag in (
            (CompactionMethod.FULL, full),
            (CompactionMethod.PARTITION_WISE_FULL, partition_wise_full),
            (CompactionMethod.IN_PLACE, in_place),
        )
        if flag
    ]
    if len(chosen) > 1:
        raise UsageError(
            "use only one of --incremental-full-compaction, "
            "--incremental-partition-wise-full-compaction and "
            "--incremental-in-place-compaction"
        )
    return chosen[0] if chosen else None


METHOD_FLAGS: dict[CompactionMethod, str] = {
    CompactionMethod.FULL: "--incremental-full-compaction",
    CompactionMethod.PARTITION_WISE_FULL: "--incremental-partition-wise-full-compaction",
    CompactionMethod.IN_PLACE: "--incremental-in-place-compaction",
}


def refuse_method_for_merged_table(options: CompactionOptions) -> None:
    """Merge mode IMMEDIATE has no delta table to merge (its compaction rewrites small
    files): a compaction method would be ignored, so it is refused.

    Raises:
        UsageError: a method is given.
    """
    if options.method is not None:
        raise UsageError(
            f"{options.table.key} uses merge mode IMMEDIATE: its compaction only rewrites small "
            f"files and takes no compaction method; leave out {METHOD_FLAGS[options.method]}"
        )


def check_count(option: str, value: int) -> None:
    """Refuse a count below 0 (``--incremental-delta-threshold``).

    Raises:
        UsageError: names ``option`` and the value.
    """
    if value < 0:
        raise UsageError(f"{option} must be at least 0, found {value}")


def check_amount(option: str, value: float | None) -> None:
    """Refuse a time that is below 0 or not finite (None: not given, no limit).

    Raises:
        UsageError: names ``option`` and the value.
    """
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{option} must be a finite number of at least 0, found {value}")


def check_option_values(
    *,
    delta_threshold: int,
    wait_minutes: float,
    vacuum_retention_hours: float,
    acknowledgement_timeout_seconds: float | None = None,
) -> None:
    """Refuse compaction option values no run can take, before anything runs.

    Raises:
        UsageError: a value below 0 or not finite.
    """
    check_count("--incremental-delta-threshold", delta_threshold)
    check_amount("--incremental-wait-time", wait_minutes)
    check_amount("--incremental-vacuum-retention-hours", vacuum_retention_hours)
    check_amount("--incremental-acknowledgement-timeout", acknowledgement_timeout_seconds)


def compaction_options(
    table: TableRef, values: Mapping[str, Any], *, given: Collection[str] | None = None
) -> CompactionOptions:
    """The options of one compaction of ``table``: the one place they are built, from the
    command line (``offload --incremental-run-compaction``) and from the service's file.

    Args:
        values: ``CompactionOptions`` fields by name; a field left out keeps its default.
        given: the fields the user gave (None: all of them; see ``CompactionOptions.given``).

    Raises:
        UsageError: a value no run can take (``check_option_values``).
    """
    options = CompactionOptions(
        table=table, given=None if given is None else frozenset(given), **values
    )
    check_option_values(
        delta_threshold=options.delta_threshold,
        wait_minutes=options.wait_minutes,
        vacuum_retention_hours=options.vacuum_retention_hours,
        acknowledgement_timeout_seconds=options.acknowledgement_timeout_seconds,
    )
    return options
