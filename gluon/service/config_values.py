"""Readers of the service file's values (durations, windows, numbers, flags), each
refusing a bad value with one line naming the file, the table and what is wrong."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gluon.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


class ConfigFileError(UsageError):
    """The service's configuration file is unreadable or malformed (exit code 2)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A daily time window in UTC; ``end`` before ``start`` wraps past midnight."""

    start: dt.time
    end: dt.time

    def contains(self, moment: dt.datetime) -> bool:
        """Whether ``moment`` (naive UTC, the repository's clock) lies inside the window."""
        now = moment.time()
        if self.start <= self.end:
            return self.start <= now < self.end
        return now >= self.start or now < self.end

    def opened_at(self, moment: dt.datetime) -> dt.datetime:
        """When the window containing ``moment`` opened (``moment`` must be inside it)."""
        opened = dt.datetime.combine(moment.date(), self.start)
        return opened if opened <= moment else opened - dt.timedelta(days=1)

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M} UTC"


def duration(value: object, what: str, path: Path, table: str | None) -> float:
    """Seconds from a number or a text such as ``"90s"``, ``"5m"``, ``"2h"``, ``"1d"``.

    Raises:
        ConfigFileError: not a duration, or not above 0.
    """
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise ConfigFileError(
            f"{where(path, table)}{what} must be a duration above 0 (seconds, or a number "
            f'with s, m, h or d such as "30s"), found {value!r}'
        )
    return seconds


def window_of(value: object, path: Path, table: str, what: str = "compaction window") -> Window:
    match = _WINDOW.match(value) if isinstance(value, str) else None
    if match:
        hour1, minute1, hour2, minute2 = (int(part) for part in match.groups())
        if hour1 < 24 and hour2 < 24 and minute1 < 60 and minute2 < 60:
            start, end = dt.time(hour1, minute1), dt.time(hour2, minute2)
            if start != end:
                return Window(start, end)
    raise ConfigFileError(
        f'{path}: table {table}: {what} must be "HH:MM-HH:MM" (UTC, two different '
        f"times), found {value!r}"
    )


def where(path: Path, table: str | None) -> str:
    return f"{path}: table {table}: " if table is not None else f"{path}: "


def section_of(
    document: dict[str, Any], name: str, path: Path, table: str | None
) -> dict[str, Any]:
    value = document.get(name, {})
    if not isinstance(value, dict):
        raise ConfigFileError(f"{where(path, table)}[{name}] must be a table of settings")
    return value


def only(body: dict[str, Any], allowed: set[str], path: Path, table: str | None, what: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ConfigFileError(
            f"{where(path, table)}unknown setting {unknown[0]!r} in {what} (known: "
            f"{', '.join(sorted(allowed))})"
        )


def integer(value: object, what: str, path: Path, table: str | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigFileError(f"{where(path, table)}{what} must be a whole number, found {value!r}")
    return value


def number(value: object, what: str, path: Path, table: str | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigFileError(f"{where(path, table)}{what} must be a number, found {value!r}")
    return float(value)


def flag(section: dict[str, Any], name: str, path: Path, table: str) -> bool:
    value = section.get(name, False)
    if not isinstance(value, bool):
        raise ConfigFileError(
            f"{path}: table {table}: {name} must be true or false, found {value!r}"
        )
    return value


def as_key(message: str) -> str:
    """A command-line option's message in the file's terms (``--incremental-x`` -> ``x``)."""
    return re.sub(
        r"--incremental-([a-z-]+)",
        lambda match: {
            "wait-time": "wait_minutes",
            "acknowledgement-timeout": "acknowledgement_timeout",
        }.get(match.group(1), match.group(1).replace("-", "_")),
        message,
    )
