"""``offload_status_report``: every offloaded table (filtered), saved as text, HTML, JSON or CSV.

The service reports its stages through ``announce`` (the CLI prints them) and
never prints itself. It reads the repository, the Delta logs and the source's
changelog counts; it starts no Spark engine.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gluon import __version__
from gluon.config import Settings
from gluon.errors import ConfigError, NotFoundError
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.status.attention import findings
from gluon.status.changelog_counter import ChangelogCounter
from gluon.status.incremental_status import collect_status
from gluon.status.model import (
    OutputFormat,
    OutputLevel,
    Report,
    TableReport,
    TableStatus,
    Thresholds,
)
from gluon.status.report_formats import WRITERS

HISTORY_RUNS = 30
"""Extraction and compaction runs per table in a report (newest first)."""


EXTENSIONS: dict[OutputFormat, str] = {
    OutputFormat.TEXT: "txt",
    OutputFormat.HTML: "html",
    OutputFormat.JSON: "json",
    OutputFormat.CSV: "csv",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportOptions:
    schema: str | None = None
    """Only tables of this schema (case-insensitive; ``*`` and ``?`` match like a shell)."""
    table: str | None = None
    """Only tables with this name (or ``SCHEMA.TABLE``; wildcards as for ``schema``)."""
    level: OutputLevel = OutputLevel.SUMMARY
    output_format: OutputFormat = OutputFormat.TEXT
    output_dir: Path | None = None
    """Where the report file goes (default: the log directory)."""
    thresholds: Thresholds = field(default_factory=Thresholds)


Announce = Callable[[str], None]


@contextmanager
def _stage(announce: Announce, title: str) -> Iterator[None]:
    announce(title)
    yield
    announce("Done")


def _matches(pattern: str | None, value: str) -> bool:
    return pattern is None or fnmatch.fnmatchcase(value.upper(), pattern.upper())


def find_tables(repo: Repository, options: ReportOptions) -> list[OffloadedTable]:
    """The offloaded tables the filters select, in key order.

    Raises:
        NotFoundError: filters were given and no table matches them.
    """
    schema, table = options.schema, options.table
    if table and "." in table:
        schema, table = table.split(".", 1)
    found = [
        record
        for record in repo.list_tables()
        if _matches(schema, record.table_key.split(".", 1)[0])
        and _matches(table, record.table_key.split(".", 1)[1])
    ]
    if not found and (schema or table):
        asked = " ".join(
            f"--{name}={value}" for name, value in (("schema", schema), ("table", table)) if value
        )
        raise NotFoundError(
            f"no offloaded table matches {asked} ({len(repo.list_tables())} tables are "
            "offloaded; run without filters to see them all)"
        )
    return found


def report_path(directory: Path, output_format: OutputFormat, at: dt.datetime) -> Path:
    """``gluon_offload_status_report_<timestamp>.<ext>`` in ``directory``."""
    stamp = at.strftime("%Y-%m-%d_%H-%M-%S_%f")
    return directory / f"gluon_offload_status_report_{stamp}.{EXTENSIONS[output_format]}"


READERS = 4
"""Tables collected at a time: a table's collection mostly waits (source queries, Delta
logs), so a few at once took 200 tables from 16 s to a few (``bench/service_scale.py``)."""


def _collect(
    repo: Repository, records: list[OffloadedTable], counter: ChangelogCounter
) -> list[TableStatus]:
    """Every table's status, in ``records``' order. The first is collected alone: it
    opens the source connection the others share (the counter connects once)."""
    if not records:
        return []
    first = collect_status(repo, records[0], counter, history=HISTORY_RUNS)
    with ThreadPoolExecutor(READERS, thread_name_prefix="gluon-report") as pool:
        rest = pool.map(
            lambda record: collect_status(repo, record, counter, history=HISTORY_RUNS),
            records[1:],
        )
        return [first, *rest]


def generate_report(
    settings: Settings, options: ReportOptions, announce: Announce = lambda _: None
) -> Path:
    """Collect the report, write it to a new file, and return where it is.

    Raises:
        NotFoundError: filters were given and no table matches them.
        ConfigError: the output directory cannot be created or written.
    """
    repo = Repository(settings.repo_url)
    with _stage(announce, "Find Tables For Report"):
        records = find_tables(repo, options)
    with _stage(announce, "Fetch Repository, Source And Lake Data"):
        counter = ChangelogCounter(settings.source_url, settings.source_timeouts)
        counter.count_ahead(repo, records)
        counter.describe_ahead(records)
        statuses = _collect(repo, records, counter)
    with _stage(announce, "Process Report Data"):
        generated_at = now()
        report = Report(
            generated_at=generated_at,
            gluon_version=__version__,
            level=options.level,
            schema_filter=options.schema,
            table_filter=options.table,
            thresholds=options.thresholds,
            tables=tuple(
                TableReport(status, findings(status, options.thresholds, generated_at))
                for status in statuses
            ),
        )
    with _stage(announce, "Generate Report"):
        directory = options.output_dir or settings.log_dir
        path = report_path(directory, options.output_format, dt.datetime.now())
        text = WRITERS[options.output_format](report)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the report to {directory}: {exc}") from None
    return path
