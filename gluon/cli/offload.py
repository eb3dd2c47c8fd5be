"""``offload``: offload a table to the lake (and, with incremental options, keep it in sync)."""

from __future__ import annotations

from typing import Annotated

import typer

from gluon.cli.common import progress_for, run_command, stdout
from gluon.cli.options import DebugOption, TableOption, VerboseOption, split_list
from gluon.config import Settings
from gluon.naming import TableRef
from gluon.offload import OffloadOptions, OffloadResult, offload_table

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)

PROGRAM = "offload"


@app.command(
    help=(
        "Offload SCHEMA.TABLE from the source database (GLUON_SOURCE_URL) into the lake. "
        "Without -x, only print the steps it would run and change nothing."
    )
)
def offload(
    table: TableOption,
    execute: Annotated[
        bool, typer.Option("-x", "--execute", help="Run the steps (without it: show them only).")
    ] = False,
    reset_backend_table: Annotated[
        bool,
        typer.Option(
            "--reset-backend-table",
            help="Offload a table that is already offloaded again, replacing its lake data.",
        ),
    ] = False,
    partition_columns: Annotated[
        str | None,
        typer.Option(
            "--partition-columns",
            help="Comma-separated source columns that partition the lake base table.",
        ),
    ] = None,
    partition_granularity: Annotated[
        str | None,
        typer.Option(
            "--partition-granularity",
            help=(
                "How each partition column is bucketed: Y, M or D for dates (default M), a range "
                "width for numbers (e.g. 1000), a prefix length for strings; one value for all "
                "columns or one per column, comma-separated."
            ),
        ),
    ] = None,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    def body(settings: Settings) -> OffloadResult:
        options = OffloadOptions(
            table=TableRef.parse(table),
            execute=execute,
            reset_backend_table=reset_backend_table,
            partition_columns=split_list(partition_columns),
            partition_granularity=split_list(partition_granularity),
        )
        return offload_table(settings, options, progress_for(quiet=False))

    result, log_path = run_command(
        PROGRAM, body, subject=table.replace(".", "_"), verbose=verbose, debug=debug
    )
    _render(result, log_path)


def _render(result: OffloadResult, log_path: object) -> None:
    if not result.executed:
        stdout.print(
            f"Steps to offload {result.table_key} (nothing was changed; add -x to run them):"
        )
        for number, step in enumerate(result.steps, start=1):
            stdout.print(f"  {number}. {step.description}")
    else:
        stdout.print(
            f"Offloaded {result.table_key}: {result.rows} rows, query it as {result.user_view}"
        )
    stdout.print(f"Log file: {log_path}")


def main() -> None:
    app(prog_name=PROGRAM)
