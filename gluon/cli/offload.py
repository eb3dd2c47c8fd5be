"""``offload``: offload a table to the lake and keep it in sync (incremental update).

The command's options are declared once, as the fields of ``OffloadArguments``
(``gluon/cli/offload_options.py``); typer reads them from the signature built from those
fields, and the command copies what it was given into ``OffloadArguments``.
"""

# isort: off
from gluon.cli import startup  # first: the modules below load with the collector paused

# isort: on
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gluon.cli.common import run_command, say
from gluon.cli.declare import arguments_from, command_signature, given_flags
from gluon.cli.offload_actions import PROGRAM, dispatch, validate
from gluon.cli.offload_options import OffloadArguments
from gluon.cli.options import DebugOption, VerboseOption

if TYPE_CHECKING:
    from gluon.progress import Shows

startup.done()

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)


def offload(ctx: typer.Context, **values: Any) -> None:
    arguments = arguments_from(OffloadArguments, values, given=given_flags(ctx))
    table = arguments.table
    result, log_path = run_command(
        PROGRAM,
        partial(dispatch, arguments),
        subject=table.replace(".", "_"),
        validate=partial(validate, arguments),
        verbose=values["verbose"],
        debug=values["debug"],
    )
    _render(result, log_path)


# Typer reads the parameters from the signature: the declared options, then the console ones.
offload.__signature__ = command_signature(  # type: ignore[attr-defined]
    OffloadArguments, extra=[("verbose", VerboseOption, False), ("debug", DebugOption, False)]
)
app.command(
    help=(
        "Offload SCHEMA.TABLE from the source database (GLUON_SOURCE_URL) into the lake and "
        "keep it up to date with incremental update. Without -x, only print the steps it "
        "would run and change nothing."
    )
)(offload)


def _render(result: "Shows", log_path: Path | None) -> None:
    # Plain lines (``say``): a no-op extraction, scheduled every few minutes, does not
    # import rich (issue 14).
    for line in result.shown():
        if line.label:
            say(f"{PROGRAM}: {line.label}: {line.text}", err=True)
        else:
            say(line.text)
    say(f"Log file: {log_path}")


def main() -> None:
    app(prog_name=PROGRAM)
