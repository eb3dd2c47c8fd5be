"""Options shared by several commands, declared once (spec names, verbatim)."""

from __future__ import annotations

from typing import Annotated

import typer

TableOption = Annotated[
    str,
    typer.Option(
        "-t",
        "--table",
        help=(
            "The table as SCHEMA.TABLE (case-insensitive); quote a part with spaces or "
            'other characters: shop."Order Items".'
        ),
        show_default=False,
    ),
]
VerboseOption = Annotated[
    bool, typer.Option("-v", "--verbose", help="Show each step's detail on stderr.")
]
DebugOption = Annotated[
    bool, typer.Option("--debug", help="Show a traceback for errors (also GLUON_DEBUG=1).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def split_list(value: str | None) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``; empty or None -> ``()``."""
    if not value:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())
