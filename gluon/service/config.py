"""The service's configuration file (``gluon service --config tables.toml``).

Example::

    [service]
    parallel = 2                      # runs at a time (``--parallel`` overrides)

    [defaults]                        # every table inherits these
    extraction_interval = "1m"

    [tables."SH.PRODUCTS"]
    extraction_interval = "30s"
    batch_size = 50000

    [tables."SH.PRODUCTS".compaction]
    window = "01:00-05:00"            # UTC; a compaction starts only inside it
    every = "1d"                      # at most one compaction start per day
    method = "FULL"
    delta_threshold = 10000
    wait_minutes = 5

    [tables."SH.PRODUCTS".verify]     # gluon verify by the service (docs/operations.md)
    window = "02:00-04:00"            # UTC; a verify starts only inside it
    every = "1d"                      # at most one verify start per day
    max_rows_per_second = 20000       # pace the source read

    [tables."SH.ORDERS"]
    continuous = true                 # extracted as its changes commit (small batches)
    poll_interval = 0.15              # seconds between checks for new changes
    fold_files = 200                  # compact when the delta table holds more files

Durations are seconds (a number) or a number with ``s``, ``m``, ``h`` or ``d``. A bad file
is refused as a whole, before anything runs, with one line naming the file, the table and
what is wrong.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gluon.compact.options import (
    DEFAULT_DELTA_THRESHOLD,
    DEFAULT_VACUUM_RETENTION_HOURS,
    DEFAULT_WAIT_MINUTES,
    CompactionMethod,
    CompactionOptions,
    compaction_options,
)
from gluon.errors import UsageError
from gluon.extract.run import check_batch_size
from gluon.naming import TableRef
from gluon.service.config_values import (
    ConfigFileError,
    Window,
    as_key,
    duration,
    flag,
    integer,
    number,
    only,
    section_of,
    window_of,
)

DEFAULT_PARALLEL = 2
DEFAULT_COMPACTION_RETRY_SECONDS = 300.0
"""How long after a failed or skipped compaction attempt the service tries again."""

TABLE_KEYS = {
    "extraction_interval",
    "batch_size",
    "compaction",
    "continuous",
    "poll_interval",
    "fold_files",
    "verify",
}
DEFAULT_POLL_SECONDS = 0.15
"""How often a continuous table's loop checks for new changes (``poll_interval``)."""
DEFAULT_FOLD_FILES = 200
"""A continuous table is compacted when its delta table holds more data files
(``fold_files``): small frequent batches would otherwise pile up small files."""
COMPACTION_KEYS = {
    "window",
    "every",
    "retry_interval",
    "method",
    "delta_threshold",
    "wait_minutes",
    "retain_obsolete_objects",
    "without_snapshot",
    "vacuum_retention_hours",
    "acknowledgement_timeout",
}

VERIFY_KEYS = {"window", "every", "retry_interval", "max_rows_per_second"}
DEFAULT_VERIFY_RETRY_SECONDS = 300.0
"""How long after a verify that failed or met a lock the service tries again."""


@dataclass(frozen=True, slots=True)
class CompactionSchedule:
    """When and how the service compacts a table."""

    window: Window | None
    every_seconds: float | None
    retry_seconds: float
    options: CompactionOptions
    """How each compaction runs (every option the file can set counts as given)."""


@dataclass(frozen=True, slots=True)
class VerifySchedule:
    """When the service verifies a table (``gluon verify``): inside ``window``, ``every``
    after the last verify (with a window and no ``every``: once per opening)."""

    window: Window | None
    every_seconds: float | None
    retry_seconds: float
    max_rows_per_second: int | None


@dataclass(frozen=True, slots=True)
class TableConfig:
    ref: TableRef
    extraction_interval_seconds: float
    batch_size: int | None
    """None: the default of the table's merge mode (``gluon.extract.run.default_batch_size``)."""
    compaction: CompactionSchedule | None
    verify: VerifySchedule | None = None
    continuous: bool = False
    """Extracted by its own loop as changes commit (``gluon.service.continuous``), not on
    the interval."""
    poll_seconds: float = DEFAULT_POLL_SECONDS
    fold_files: int = DEFAULT_FOLD_FILES

    @property
    def key(self) -> str:
        return self.ref.key


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    path: Path
    tables: tuple[TableConfig, ...]
    parallel: int


CONTINUOUS_FULL_RUN_SECONDS = 300.0
"""A continuous table's extraction_interval when the file sets none (unused by its loop)."""


def all_continuous(config: ServiceConfig) -> ServiceConfig:
    """``gluon service --continuous``: every table of the file in continuous mode."""
    tables = tuple(replace(table, continuous=True) for table in config.tables)
    return replace(config, tables=tables)


def load_config(path: Path) -> ServiceConfig:
    """Read and check the whole file.

    Raises:
        ConfigFileError: one line: the file, the table if any, and what is wrong.
    """
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path}: not a UTF-8 text file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(document, path)


def parse_config(document: dict[str, Any], path: Path) -> ServiceConfig:
    """Check a parsed TOML document (see :func:`load_config`)."""
    only(document, {"service", "defaults", "tables"}, path, None, "the file")
    service = section_of(document, "service", path, None)
    only(service, {"parallel"}, path, None, "[service]")
    parallel = integer(service.get("parallel", DEFAULT_PARALLEL), "parallel", path, None)
    if parallel < 1:
        raise ConfigFileError(f"{path}: [service] parallel must be at least 1, found {parallel}")
    defaults = section_of(document, "defaults", path, None)
    only(defaults, TABLE_KEYS, path, None, "[defaults]")
    tables = section_of(document, "tables", path, None)
    if not tables:
        raise ConfigFileError(
            f'{path}: no tables: declare at least one, e.g. [tables."SH.PRODUCTS"]'
        )
    parsed: list[TableConfig] = []
    seen: dict[str, str] = {}
    for name, body in tables.items():
        if not isinstance(body, dict):
            raise ConfigFileError(f"{path}: table {name}: expected a table of settings")
        table = _table(name, {**defaults, **body}, path)
        if table.key in seen:
            raise ConfigFileError(
                f"{path}: table {name}: declared twice (also as {seen[table.key]})"
            )
        seen[table.key] = name
        parsed.append(table)
    return ServiceConfig(path, tuple(parsed), parallel)


def _table(name: str, body: dict[str, Any], path: Path) -> TableConfig:
    try:
        ref = TableRef.parse(name)
    except UsageError:
        raise ConfigFileError(
            f"{path}: table {name}: not SCHEMA.TABLE (two identifiers joined by a dot)"
        ) from None
    only(body, TABLE_KEYS, path, name, "the table")
    if "extraction_interval" not in body and body.get("continuous") is not True:
        raise ConfigFileError(
            f"{path}: table {name}: extraction_interval is missing (set it for the table or "
            "in [defaults])"
        )
    interval = duration(
        body.get("extraction_interval", CONTINUOUS_FULL_RUN_SECONDS),
        "extraction_interval",
        path,
        name,
    )
    batch_size = None
    if "batch_size" in body:
        batch_size = integer(body["batch_size"], "batch_size", path, name)
        try:
            check_batch_size(batch_size)
        except UsageError as exc:
            raise ConfigFileError(f"{path}: table {name}: {as_key(str(exc))}") from None
    compaction = None
    if "compaction" in body:
        section = body["compaction"]
        if not isinstance(section, dict):
            raise ConfigFileError(f"{path}: table {name}: compaction must be a table of settings")
        compaction = _compaction(section, path, name, ref)
    verify = None
    if "verify" in body:
        section = body["verify"]
        if not isinstance(section, dict):
            raise ConfigFileError(f"{path}: table {name}: verify must be a table of settings")
        verify = _verify(section, path, name)
    continuous = flag(body, "continuous", path, name)
    poll = duration(body.get("poll_interval", DEFAULT_POLL_SECONDS), "poll_interval", path, name)
    fold_files = integer(body.get("fold_files", DEFAULT_FOLD_FILES), "fold_files", path, name)
    if fold_files < 2:
        raise ConfigFileError(
            f"{path}: table {name}: fold_files must be at least 2, found {fold_files}"
        )
    return TableConfig(
        ref,
        interval,
        batch_size,
        compaction,
        verify=verify,
        continuous=continuous,
        poll_seconds=poll,
        fold_files=fold_files,
    )


def _verify(section: dict[str, Any], path: Path, name: str) -> VerifySchedule:
    only(section, VERIFY_KEYS, path, name, "verify")
    window = (
        window_of(section["window"], path, name, "verify window") if "window" in section else None
    )
    every = duration(section["every"], "verify every", path, name) if "every" in section else None
    if window is None and every is None:
        raise ConfigFileError(
            f'{path}: table {name}: verify needs a window (e.g. "02:00-04:00"), an '
            'interval (every = "1d"), or both'
        )
    retry = duration(
        section.get("retry_interval", DEFAULT_VERIFY_RETRY_SECONDS),
        "verify retry_interval",
        path,
        name,
    )
    pace = None
    if "max_rows_per_second" in section:
        pace = integer(section["max_rows_per_second"], "max_rows_per_second", path, name)
        if pace < 1:
            raise ConfigFileError(
                f"{path}: table {name}: max_rows_per_second must be at least 1, found {pace}"
            )
    return VerifySchedule(window, every, retry, pace)


def _compaction(
    section: dict[str, Any], path: Path, name: str, ref: TableRef
) -> CompactionSchedule:
    only(section, COMPACTION_KEYS, path, name, "compaction")
    window = window_of(section["window"], path, name) if "window" in section else None
    every = (
        duration(section["every"], "compaction every", path, name) if "every" in section else None
    )
    if window is None and every is None:
        raise ConfigFileError(
            f'{path}: table {name}: compaction needs a window (e.g. "01:00-05:00"), an '
            'interval (every = "1d"), or both'
        )
    retry = duration(
        section.get("retry_interval", DEFAULT_COMPACTION_RETRY_SECONDS),
        "compaction retry_interval",
        path,
        name,
    )
    method = None
    if "method" in section:
        text = section["method"]
        choices = [member.value for member in CompactionMethod]
        if not isinstance(text, str) or text.upper() not in choices:
            raise ConfigFileError(
                f"{path}: table {name}: compaction method must be one of "
                f"{', '.join(choices)}, found {text!r}"
            )
        method = CompactionMethod(text.upper())
    threshold = integer(
        section.get("delta_threshold", DEFAULT_DELTA_THRESHOLD), "delta_threshold", path, name
    )
    wait = number(section.get("wait_minutes", DEFAULT_WAIT_MINUTES), "wait_minutes", path, name)
    retention = number(
        section.get("vacuum_retention_hours", DEFAULT_VACUUM_RETENTION_HOURS),
        "vacuum_retention_hours",
        path,
        name,
    )
    timeout = (
        duration(section["acknowledgement_timeout"], "acknowledgement_timeout", path, name)
        if "acknowledgement_timeout" in section
        else None
    )
    values = {
        "method": method,
        "delta_threshold": threshold,
        "wait_minutes": wait,
        "retain_obsolete_objects": flag(section, "retain_obsolete_objects", path, name),
        "without_snapshot": flag(section, "without_snapshot", path, name),
        "vacuum_retention_hours": retention,
        "acknowledgement_timeout_seconds": timeout,
    }
    try:
        options = compaction_options(ref, values)
    except UsageError as exc:
        raise ConfigFileError(f"{path}: table {name}: compaction {as_key(str(exc))}") from None
    return CompactionSchedule(
        window=window, every_seconds=every, retry_seconds=retry, options=options
    )
