"""``display_incremental_status``: the incremental update state of one table."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from gluon.cli.common import run_command, say
from gluon.cli.options import DebugOption, JsonOption, TableOption, VerboseOption
from gluon.config import Settings
from gluon.naming import TableRef
from gluon.status.formatting import jsonable
from gluon.status.incremental_status import table_status
from gluon.status.model import DEFAULT_WAL_RETAINED_MB
from gluon.status.text import render_status

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)

PROGRAM = "display_incremental_status"


@app.command(
    help=(
        "Show where incremental update of SCHEMA.TABLE stands: extraction, change ingestion "
        "(control partitions), compaction, and the objects it uses. Starts no Spark engine."
    )
)
def display_incremental_status(
    table: TableOption,
    json_output: JsonOption = False,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help="Include the runs, snapshots and counts of earlier enablements (disabled "
            "and enabled again); by default only the current enablement's are shown.",
        ),
    ] = False,
    wal_retained_threshold: Annotated[
        float,
        typer.Option(
            "--wal-retained-threshold",
            min=0,
            help="PG_LOGICAL: warn when the replication slot makes the source keep more than "
            "this many MiB of WAL.",
        ),
    ] = DEFAULT_WAL_RETAINED_MB,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    def body(settings: Settings) -> str:
        status = table_status(settings, TableRef.parse(table), earlier_enablements=history)
        if json_output:
            return json.dumps(jsonable(status), indent=2, ensure_ascii=False)
        return render_status(
            status, verbose=verbose, wal_retained_threshold_mb=wal_retained_threshold
        )

    text, _ = run_command(
        PROGRAM,
        body,
        subject=table.replace(".", "_"),
        validate=lambda: TableRef.parse(table),
        verbose=verbose,
        debug=debug,
    )
    say(text.rstrip("\n"))  # plain: no rich to import (issue 14)


def main() -> None:
    app(prog_name=PROGRAM)
