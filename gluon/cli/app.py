"""``gluon``: utility commands (query the lake, ...)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from gluon.cli.common import fail, run_command, stderr, stdout
from gluon.cli.options import DebugOption, JsonOption, TableOption, VerboseOption
from gluon.config import Settings
from gluon.errors import ExitCode
from gluon.locks import unlock as unlock_table
from gluon.logs import redact
from gluon.naming import TableRef
from gluon.query import run_query, to_csv, to_json, to_text
from gluon.repo import Repository

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)

PROGRAM = "gluon"


@app.callback()
def callback() -> None:
    """gluon utility commands."""


@app.command(help="Run Spark SQL against the lake with the gluon views it names registered.")
def query(
    statement: Annotated[str, typer.Argument(help='The SQL, e.g. "SELECT * FROM sh.products".')],
    json_output: JsonOption = False,
    csv_output: Annotated[bool, typer.Option("--csv", help="Print CSV with a header row.")] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    def body(settings: Settings) -> str:
        table = run_query(settings, statement, warn=_warn)
        if json_output:
            return to_json(table)
        if csv_output:
            return to_csv(table)
        return to_text(table)

    text, _ = run_command(PROGRAM, body, subject="query", verbose=verbose, debug=debug)
    stdout.print(text.rstrip("\n"), markup=False)  # CSV ends with a newline: print adds one


@app.command(
    help=(
        "An interactive SQL shell over the lake: one engine session with every offloaded "
        "table and view registered; statements end with ';' (.help lists the dot commands). "
        "Reads stdin without prompts when it is not a terminal."
    )
)
def shell(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print each result as a JSON array.")
    ] = False,
    csv_output: Annotated[
        bool, typer.Option("--csv", help="Print each result as CSV with a header row.")
    ] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    from gluon.cli.shell import run_shell

    if json_output and csv_output:
        fail("--json and --csv exclude each other: choose one", ExitCode.USAGE, program=PROGRAM)
    mode = "json" if json_output else "csv" if csv_output else "table"
    interactive = sys.stdin.isatty()

    def body(settings: Settings) -> int:
        return run_shell(settings, mode, interactive)

    failed, _ = run_command(PROGRAM, body, subject="shell", verbose=verbose, debug=debug)
    if failed and not interactive:
        raise typer.Exit(int(ExitCode.ERROR))  # a script learns that a statement failed


def _warn(message: str) -> None:
    logging.getLogger("gluon.query").warning(message)
    stderr.print(f"{PROGRAM}: warning: {redact(message)}", markup=False)


@app.command(
    help=(
        "Clear the repository's lock records of a table left by a command that died on "
        "another node (refused while the holder is alive on this node)."
    )
)
def unlock(table: TableOption, verbose: VerboseOption = False, debug: DebugOption = False) -> None:
    def body(settings: Settings) -> str:
        key = TableRef.parse(table).key
        cleared = unlock_table(Repository(settings.repo_url), key)
        if not cleared:
            return f"{key} has no lock records: nothing to clear"
        return "\n".join(f"{key}: cleared the {what}" for what in cleared)

    text, _ = run_command(PROGRAM, body, subject="unlock", verbose=verbose, debug=debug)
    stdout.print(text, markup=False)


def main() -> None:
    app(prog_name=PROGRAM)
