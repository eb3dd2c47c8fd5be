"""``offload_status_report``: a report over every offloaded table, saved to a file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gluon import __version__
from gluon.cli.common import run_command, stderr, stdout
from gluon.cli.options import DebugOption, VerboseOption
from gluon.config import Settings
from gluon.status.model import (
    DEFAULT_BACKLOG_THRESHOLD,
    DEFAULT_LAG_MINUTES,
    DEFAULT_WAIT_MINUTES,
    DEFAULT_WAL_RETAINED_MB,
    OutputFormat,
    OutputLevel,
    Thresholds,
)
from gluon.status.report import ReportOptions, generate_report

app = typer.Typer(add_completion=False, rich_markup_mode=None)

PROGRAM = "offload_status_report"


@app.command(
    help=(
        "Report on offloaded tables: source and lake objects, Delta table sizes, control "
        "partitions, extraction and compaction history, and what needs attention. Saves "
        "gluon_offload_status_report_<time>.<ext> in --output-dir. Starts no Spark engine."
    )
)
def offload_status_report(
    schema: Annotated[
        str | None, typer.Option("--schema", help="Only this schema (* and ? match).")
    ] = None,
    table: Annotated[
        str | None,
        typer.Option("--table", help="Only this table, TABLE or SCHEMA.TABLE (* and ? match)."),
    ] = None,
    output_level: Annotated[
        OutputLevel, typer.Option("--output-level", help="One line per table, or everything.")
    ] = OutputLevel.SUMMARY,
    output_format: Annotated[
        OutputFormat, typer.Option("--output-format", help="The report file's format.")
    ] = OutputFormat.TEXT,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", help="Where to save the report (default: $OFFLOAD_HOME/log)."),
    ] = None,
    backlog_threshold: Annotated[
        int,
        typer.Option(
            "--backlog-threshold",
            min=0,
            help="Flag tables with more changes than this in the changelog or the delta table.",
        ),
    ] = DEFAULT_BACKLOG_THRESHOLD,
    wait_threshold: Annotated[
        float,
        typer.Option(
            "--wait-threshold",
            min=0,
            help="Flag compactions waiting (or runs running) for longer than this many minutes.",
        ),
    ] = DEFAULT_WAIT_MINUTES,
    lag_threshold: Annotated[
        float,
        typer.Option(
            "--lag-threshold",
            min=0,
            help="Flag tables whose oldest change not yet in the lake was captured more than "
            "this many minutes ago.",
        ),
    ] = DEFAULT_LAG_MINUTES,
    wal_retained_threshold: Annotated[
        float,
        typer.Option(
            "--wal-retained-threshold",
            min=0,
            help="Flag PG_LOGICAL tables whose replication slot makes the source keep more "
            "than this many MiB of WAL.",
        ),
    ] = DEFAULT_WAL_RETAINED_MB,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    options = ReportOptions(
        schema=schema,
        table=table,
        level=output_level,
        output_format=output_format,
        output_dir=output_dir,
        thresholds=Thresholds(
            backlog_rows=backlog_threshold,
            wait_minutes=wait_threshold,
            lag_minutes=lag_threshold,
            wal_retained_mb=wal_retained_threshold,
        ),
    )

    def body(settings: Settings) -> Path:
        # Progress goes to stderr: stdout holds only the result, for scripts to capture. The
        # banner comes with the first progress line, so bad input stays one line of error.
        banner = [f"Offload Status Report v{__version__}\n"]

        def progress(line: str) -> None:
            while banner:
                stderr.print(banner.pop(), markup=False)
            stderr.print(line, markup=False)

        return generate_report(settings, options, progress)

    path, log_path = run_command(PROGRAM, body, verbose=verbose, debug=debug)
    stdout.print(f"Report saved to {path}", markup=False)
    stderr.print(f"\nLog file: {log_path}", markup=False)


def main() -> None:
    app(prog_name=PROGRAM)
