"""What a compaction was asked to do."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from gluon.naming import TableRef


class CompactionMethod(StrEnum):
    IN_PLACE = "IN_PLACE"
    """Rewrite only the base partitions that hold or receive changed keys."""
    FULL = "FULL"
    """A new base table from the merged rows, in one write."""
    PARTITION_WISE_FULL = "PARTITION_WISE_FULL"
    """A new base table from the merged rows, one partition at a time."""


DEFAULT_WAIT_MINUTES = 15.0
DEFAULT_DELTA_THRESHOLD = 1
DEFAULT_VACUUM_RETENTION_HOURS = 168.0
ACK_POLL_SECONDS = float(os.environ.get("GLUON_ACK_POLL_SECONDS", "5"))
"""How often a waiting compaction looks for the acknowledgement (GLUON_ACK_POLL_SECONDS)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions:
    table: TableRef
    method: CompactionMethod = CompactionMethod.IN_PLACE
    terminate_at_acknowledgement: bool = False
    delta_threshold: int = DEFAULT_DELTA_THRESHOLD
    wait_minutes: float = DEFAULT_WAIT_MINUTES
    retain_obsolete_objects: bool = False
    without_snapshot: bool = False
    vacuum_retention_hours: float = DEFAULT_VACUUM_RETENTION_HOURS
    ack_poll_seconds: float = ACK_POLL_SECONDS
    ack_timeout_minutes: float | None = None

    def recorded(self) -> dict[str, Any]:
        """The options stored with the run (a resumed run keeps its method)."""
        values = asdict(self)
        values["table"] = self.table.key
        return values
