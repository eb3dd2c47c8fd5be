"""Shared formatting for status output: times, sizes, counts, and JSON-ready values."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import operator
from typing import Any

from gluon.repo.compaction import CompactionStep, ObsoleteObject
from gluon.repo.incremental import ExtractionRun
from gluon.status.model import CompactionRunInfo, LakeTableStats

PUBLISHED: dict[type, list[str]] = {
    ExtractionRun: [
        "id",
        "status",
        "started_at",
        "finished_at",
        "rows_read",
        "rows_written",
        "control_partition",
        "message",
    ],
    CompactionRunInfo: [
        "run.id",
        "run.method",
        "run.status",
        "status_text",
        "run.current_step",
        "run.started_at",
        "run.finished_at",
        "run.compacted_partition",
        "run.new_partition",
        "run.changes",
        "run.message",
        "steps",
    ],
    CompactionStep: ["step", "status", "started_at", "finished_at", "detail"],
    ObsoleteObject: [
        "kind",
        "name",
        "location",
        "delta_version",
        "retained_at",
        "compaction_run_id",
    ],
    LakeTableStats: [
        "name",
        "stats.location",
        "stats.exists",
        "stats.version",
        "stats.rows",
        "stats.files",
        "stats.size_bytes",
        "stats.committed_at",
        "stats.error",
    ],
}
"""The attributes (``run.id``: ``id`` of ``run``) the JSON output shows of these records, in
order: the repository may add fields to its records without changing the documented output."""


def iso(value: dt.datetime | None) -> str | None:
    """ISO 8601 with an explicit UTC offset (repository times are naive UTC)."""
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return aware.astimezone(dt.UTC).isoformat()


def when(value: dt.datetime | None, missing: str = "never") -> str:
    """A time for people: ``2026-11-22 12:01:23 UTC``."""
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else missing


def size(value: int) -> str:
    """Bytes for people: ``512 B``, ``4.1 KiB``, ``3.0 MiB``."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{int(amount)} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float | None, missing: str = "unknown") -> str:
    """A duration for people: ``0.4 s``, ``42 s``, ``3 min 12 s``, ``2 h 05 min``, ``3 d 4 h``."""
    if seconds is None:
        return missing
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


CAUSED_BY = "caused by"
"""How deltalake chains an error to its cause, on a line of its own."""
GENERIC_PREFIXES = ("Generic DeltaTable error: ", "Generic error: ")
"""Wrappers that name no problem: the line after them does."""


def failure_line(message: str | None) -> str:
    """A recorded failure in one line that names the problem.

    A run records its error whole; a deltalake error's first line is a wrapper
    (``Generic DeltaTable error: type_coercion``) and the actionable part follows on
    ``caused by`` lines: they are joined, innermost last, the wrappers dropped.
    """
    lines = [line.strip() for line in (message or "").strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if CAUSED_BY not in lines:
        return lines[0]
    parts = [line for line in lines if line != CAUSED_BY]
    for prefix in GENERIC_PREFIXES:
        parts = [part.replace(prefix, "") for part in parts]
    return ": ".join(parts)


def count(value: int | None, missing: str = "unknown") -> str:
    """``12,345`` (or ``missing`` for None)."""
    return missing if value is None else f"{value:,}"


def jsonable(value: Any) -> Any:
    """``value`` as JSON types: dataclasses as objects in field order (or ``PUBLISHED``'s),
    times in ISO 8601."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = PUBLISHED.get(type(value)) or [item.name for item in dataclasses.fields(value)]
        return {
            name.rsplit(".", 1)[-1]: jsonable(operator.attrgetter(name)(value)) for name in names
        }
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value
