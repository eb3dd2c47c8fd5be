"""``gluon views``: the merged latest state of DEFERRED tables, as view definitions other
engines run over the Delta folders.

The SELECT is the one merging view template (``templates/lake/merge_view.sql.j2``, the
union-all one for insert-only methods) rendered as for gluon's sessions, then transpiled
by sqlglot from Spark SQL into the chosen dialect, with each relation replaced by the
way that engine reads a Delta folder. A definition holds the view's control-partition
range and the base table's folder of the moment: export again after each compaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gluon.errors import UsageError
from gluon.lake import sql
from gluon.lake.changes import view_sql
from gluon.methods import get_method
from gluon.naming import TableRef
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED, IncrementalState
from gluon.states import MergeMode, TableStatus

BASE_PLACEHOLDER = "gl_export_base"
DELTA_PLACEHOLDER = "gl_export_changes"


@dataclass(frozen=True)
class Dialect:
    """How one engine names a Delta folder and a view."""

    sqlglot: str
    """sqlglot's name of the dialect written."""
    relation: Callable[[str, str], str]
    """(lake name, Delta folder) -> the relation in that engine's SQL."""
    note: str
    """What the user does before running the definitions (a comment above them)."""


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _flat(name: str) -> str:
    """A lake name as one identifier (``sh_load.t_changes`` -> ``sh_load__t_changes``)."""
    return name.replace(".", "__")


DIALECTS: dict[str, Dialect] = {
    "spark": Dialect(
        "spark",
        lambda _name, folder: f"delta.`{folder.replace('`', '``')}`",
        "Spark with Delta Lake (Databricks, delta-spark): run in a session with the Delta "
        "extensions; the views read the folders directly.",
    ),
    "duckdb": Dialect(
        "duckdb",
        lambda _name, folder: f"delta_scan({_quoted(folder)})",
        "DuckDB: INSTALL delta; LOAD delta; first (object stores: a CREATE SECRET).",
    ),
    "trino": Dialect(
        "trino",
        lambda name, _folder: f"delta.{name}",
        "Trino, catalog `delta` (Delta Lake connector): register each folder first, "
        "CALL delta.system.register_table(schema_name => ..., table_name => ..., "
        "table_location => ...), as listed below.",
    ),
    "datafusion": Dialect(
        "postgres",
        lambda name, _folder: f'"{_flat(name)}"',
        "DataFusion, e.g. deltalake's QueryBuilder (its result is Arrow: Polars reads it "
        "with pl.from_arrow): register each folder under the name listed below, "
        "QueryBuilder().register(name, DeltaTable(folder)).",
    ),
}
DIALECT_NAMES = tuple(DIALECTS)


@dataclass(frozen=True)
class ExportedView:
    """One table's merged latest state in one dialect."""

    view: str
    """The user view's name (``sh.products``)."""
    select: str
    """The SELECT, in the dialect, of the table's columns under their user names."""
    relations: dict[str, str]
    """Lake name -> Delta folder of each relation the SELECT reads."""


def exported_view(repo: Repository, record: OffloadedTable, dialect: str) -> ExportedView:
    """``record``'s merged latest state as a SELECT in ``dialect`` over its Delta folders.

    Raises:
        UsageError: the dialect is unknown, or the table has no merged state to export.
    """
    target = check_dialect(dialect)
    state = repo.incremental.get_state(record.table_key)
    relations = {record.base_table: record.base_path}
    if state is None or state.status != ENABLED:
        select = _columns_of(record, sql.quote(BASE_PLACEHOLDER))
    elif state.merge_mode == MergeMode.IMMEDIATE:
        select = _columns_of(record, sql.quote(BASE_PLACEHOLDER))  # the base is current
    else:
        relations[state.delta_table] = state.delta_path
        select = _columns_of(record, f"({_merged(record, state)}) gl_merged")
    return ExportedView(
        view=record.user_view,
        select=_transpiled(select, target, record, state, relations),
        relations=relations,
    )


def check_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name.lower()]
    except KeyError:
        raise UsageError(
            f"unknown --dialect {name!r}: choose one of {', '.join(DIALECT_NAMES)}"
        ) from None


def _merged(record: OffloadedTable, state: IncrementalState) -> str:
    return view_sql(
        get_method(state.method).view_kind.value,
        columns=record.columns,
        keys=state.key_columns,
        base=sql.quote(BASE_PLACEHOLDER),
        delta=sql.quote(DELTA_PLACEHOLDER),
        min_partition=state.view_min_partition,
        truncated=state.truncates_from(state.view_min_partition),
    )


def _columns_of(record: OffloadedTable, source: str) -> str:
    """The table's columns of ``source`` (a relation) under their user names."""
    renamed = [
        f"{sql.quote_part(column.lake_name)} AS {sql.quote_part(column.view_name)}"
        for column in record.columns
    ]
    return sql.select_expressions(source, renamed)


def _transpiled(
    select: str,
    target: Dialect,
    record: OffloadedTable,
    state: IncrementalState | None,
    relations: dict[str, str],
) -> str:
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(select, read="spark")
    placeholders = {BASE_PLACEHOLDER: record.base_table}
    if state is not None:
        placeholders[DELTA_PLACEHOLDER] = state.delta_table
    for table in list(tree.find_all(exp.Table)):
        name = placeholders.get(table.name)
        if name is None:
            continue
        relation = sqlglot.parse_one(
            target.relation(name, relations[name]), into=exp.Table, read=target.sqlglot
        )
        alias = table.args.get("alias")
        if alias is not None:
            relation.set("alias", alias)
        table.replace(relation)
    # DataFusion's parser binds IS NOT DISTINCT FROM looser than AND: parenthesized.
    for comparison in list(tree.find_all(exp.NullSafeEQ)):
        comparison.replace(exp.Paren(this=comparison.copy()))
    return tree.sql(dialect=target.sqlglot, pretty=True)


def export_views(repo: Repository, dialect: str, tables: list[str] | None) -> list[ExportedView]:
    """The exported view of each named table (``SCHEMA.TABLE``), or of every offloaded one.

    Raises:
        UsageError: a named table is not offloaded, or the dialect is unknown.
    """
    check_dialect(dialect)
    offloaded = {record.table_key: record for record in repo.list_tables()}
    if tables is None:
        chosen = [record for record in offloaded.values() if record.status == TableStatus.OFFLOADED]
    else:
        chosen = []
        for table in tables:
            key = TableRef.parse(table).key
            record = offloaded.get(key)
            if record is None or record.status != TableStatus.OFFLOADED:
                raise UsageError(
                    f"{key} is not offloaded: offload it first (offload -t {table} -x)"
                )
            chosen.append(record)
    return [exported_view(repo, record, dialect) for record in chosen]


def render_script(views: list[ExportedView], dialect: str) -> str:
    """The definitions as one script: the dialect's note, then per table the folders it
    reads and ``CREATE OR REPLACE VIEW <user view> AS <select>``."""
    import sqlglot

    target = check_dialect(dialect)
    lines = [f"-- {target.note}"]
    for view in views:
        lines.append("")
        for name, folder in view.relations.items():
            lines.append(f"-- {target.relation(name, folder)} <- {folder}")
        schema, _, table = view.view.partition(".")  # a user name may hold spaces
        name = sqlglot.exp.table_(table, db=schema, quoted=True).sql(dialect=target.sqlglot)
        lines.append(sql.view_statement(name, view.select))
    return "\n".join(lines)
