"""SQL and report templates (``templates/<dialect>/*.sql.j2``).

Lookup tries the dialect's folders (its own, then those of the dialects it extends), then
``default/`` (dbt's dispatch idea).
Identifiers go through the ``qi`` filter (the dialect's quoting); values are
always bind parameters, never rendered into the text.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jinja2


def templates_root() -> Path:
    """The templates folder: inside the installed package, else the source tree."""
    package_dir = Path(__file__).resolve().parent
    for candidate in (package_dir / "templates", package_dir.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("gluon's templates folder is missing from this installation")


@cache
def _environment(folders: tuple[str, ...]) -> jinja2.Environment:
    root = templates_root()
    # A relative folder is one of gluon's own; a dialect outside gluon gives absolute paths.
    loader = jinja2.FileSystemLoader([str(root / folder) for folder in (*folders, "default")])
    environment = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=folders == ("report",),
    )
    # The quoting function differs per call (per dialect); the filter looks it up in the context.
    environment.filters["qi"] = jinja2.pass_context(lambda context, text: context["qi"](text))
    return environment


def render(
    folder: str | tuple[str, ...],
    name: str,
    *,
    quote: Callable[[str], str] | None = None,
    **context: Any,
) -> str:
    """Render ``<folder>/<name>.sql.j2`` (or ``.html.j2``) with ``context``.

    Args:
        folder: a dialect name, or ``report``; or the folders to search in order (a
            dialect's :meth:`~gluon.source.base.SourceDialect.template_search`).
        name: the template's operation name, e.g. ``describe_columns``.
        quote: the identifier quoting function exposed as the ``qi`` filter.
    """
    folders = (folder,) if isinstance(folder, str) else folder
    environment = _environment(folders)
    suffix = ".html.j2" if folders == ("report",) else ".sql.j2"
    template = environment.get_template(name + suffix)
    return template.render(qi=quote or _no_quoting, **context)


def _no_quoting(text: str) -> str:
    return text
