"""A test double of an Oracle source with ORA_ROWSCN semantics, over SQLite.

Oracle gives each committed row the SCN of its commit (with ROWDEPENDENCIES)
and a current SCN that only grows. The double keeps an SCN counter in
``gl_scn`` and a per-row ``gl_rowscn`` column that AFTER INSERT/UPDATE
triggers set from it, and renders gluon's two ORA_ROWSCN queries
(``current_scn``, ``read_rowscn_changes``) against them; ``gl_rowscn`` is
hidden from the table's description, as ORA_ROWSCN is a pseudo-column.
Everything else (types, offload) is SQLite's.

``install()`` makes ``gluon.source.connect`` return the double for SQLite URLs
and lets the ORA_ROWSCN method accept it; tests call it through ``monkeypatch``
(``install(monkeypatch.setattr)``) and child processes through ``CHILD_MAIN``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

import gluon.source
from gluon.methods.ora_rowscn import OraRowscnMethod
from gluon.naming import TableRef
from gluon.schema import TableSpec
from gluon.source.sqlite import SQLiteSource

SCN_COLUMN = "gl_rowscn"
FIRST_SCN = 1000

# Run in a child process: install the double, then run ``offload`` with the child's argv.
CHILD_MAIN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1))\n"
    "from support.rowscn import install; install()\n"
    "from gluon.cli.offload import main; main()\n"
)


class RowscnSQLite(SQLiteSource):
    """SQLite that answers gluon's ORA_ROWSCN queries the way Oracle would."""

    after_current_scn: Callable[[], None] | None = None
    """Called right after the current SCN is read (a commit racing the extraction)."""

    def render(self, template: str, **context: Any) -> str:
        if template == "current_scn":
            return "SELECT scn FROM gl_scn"
        if template == "read_rowscn_changes":
            columns = ", ".join(context["columns"])
            table = f"{self.quote(context['schema'])}.{self.quote(context['table'])}"
            return (
                f"SELECT {columns}, {SCN_COLUMN} AS gl_seq, 'U' AS gl_op FROM {table} "
                f"WHERE {SCN_COLUMN} > :since AND {SCN_COLUMN} <= :upto ORDER BY {SCN_COLUMN}"
            )
        return super().render(template, **context)

    def run_query(
        self, template: str, params: dict[str, Any] | None = None, **context: Any
    ) -> list[Any]:
        rows: list[Any] = list(super().run_query(template, params, **context))
        if template == "current_scn" and RowscnSQLite.after_current_scn is not None:
            RowscnSQLite.after_current_scn()
        return rows

    def describe_table(self, ref: TableRef) -> TableSpec:
        spec = super().describe_table(ref)
        return replace(
            spec,
            columns=tuple(c for c in spec.columns if c.name.lower() != SCN_COLUMN),
            options={**spec.options, "rowdependencies": "ENABLED"},
        )


def create_table(engine: sa.Engine, table: str, columns: str, data_columns: list[str]) -> None:
    """``table`` with ``columns`` plus the hidden SCN column, and the triggers that set it."""
    listed = ", ".join(data_columns)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE IF NOT EXISTS gl_scn (scn INTEGER NOT NULL)"))
        if db.execute(sa.text("SELECT COUNT(*) FROM gl_scn")).scalar() == 0:
            db.execute(sa.text(f"INSERT INTO gl_scn VALUES ({FIRST_SCN})"))
        db.execute(sa.text(f"CREATE TABLE {table} ({columns}, {SCN_COLUMN} INTEGER)"))
        for event, when in (("INSERT", "INSERT"), ("UPDATE", f"UPDATE OF {listed}")):
            db.execute(
                sa.text(
                    f"CREATE TRIGGER {table}_scn_{event.lower()} AFTER {when} ON {table} BEGIN "
                    "UPDATE gl_scn SET scn = scn + 1; "
                    f"UPDATE {table} SET {SCN_COLUMN} = (SELECT scn FROM gl_scn) "
                    "WHERE rowid = NEW.rowid; END"
                )
            )


def current_scn(engine: sa.Engine) -> int:
    with engine.connect() as db:
        return int(db.execute(sa.text("SELECT scn FROM gl_scn")).scalar_one())


def install(setattr_: Callable[[Any, str, Any], None] | None = None) -> None:
    """Route SQLite URLs to the double and let ORA_ROWSCN accept it."""
    set_ = setattr_ or setattr
    original = gluon.source.connect

    def connect(url: str, timeouts: Any = None) -> gluon.source.SourceDialect:
        source = original(url, timeouts)
        return RowscnSQLite(source.engine) if isinstance(source, SQLiteSource) else source

    set_(gluon.source, "connect", connect)
    set_(OraRowscnMethod, "dialects", frozenset({"oracle", "sqlite"}))
