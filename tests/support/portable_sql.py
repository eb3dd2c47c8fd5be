"""The portable subset of Spark SQL, checked on parsed statements (sqlglot's ``spark`` dialect).

gluon must run the same statements on the embedded Sail engine and on a Spark+Delta
cluster, so every statement it sends is recorded (``GLUON_RECORD_SQL``,
gluon/lake/sqllog.py) and checked here against the subset DESIGN.md section 1 measured
on both. The check works on the syntax tree, not the text: a keyword inside a string
literal or an identifier is not a violation, and an unparsable statement is one.

Two kinds of record are checked:

- ``sql``: Spark SQL text. Each statement must parse, be of a kind the subset lists
  (:data:`ALLOWED_STATEMENTS`), and use none of the constructs DESIGN.md forbids
  (:data:`FORBIDDEN`).
- ``write``: a DataFrame write, recorded as
  ``"<mode> <location> partitionBy=[...] replaceWhere=<predicate or None>"``. The mode
  must be ``append`` or ``overwrite``, the predicate must parse, and no dynamic
  partition overwrite may be asked for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Tokenizer

__all__ = ["ALLOWED_STATEMENTS", "FORBIDDEN", "sql_violations", "violations", "write_violations"]

DIALECT = "spark"

NOT_PARSED = "does not parse"
OUTSIDE_THE_SUBSET = "statement kind outside the subset"

ALLOWED_STATEMENTS: tuple[type[exp.Expression], ...] = (
    exp.Select,
    exp.Union,
    exp.Intersect,
    exp.Except,
    exp.Insert,  # INSERT INTO [REPLACE WHERE]; OVERWRITE and PARTITION are refused below
    exp.Merge,
    exp.Delete,
    exp.Update,
    exp.Create,  # of the kinds in CREATED_KINDS
    exp.Drop,  # of the kinds in CREATED_KINDS
    exp.Describe,  # DESCRIBE TABLE [EXTENDED]; HISTORY is refused below
)
"""Statement kinds of DESIGN.md's "Use" list, plus the catalog statements gluon runs on both
engines (CREATE SCHEMA, CREATE TABLE ... USING delta LOCATION, DROP, DESCRIBE TABLE)."""

CREATED_KINDS = {"TABLE", "VIEW", "SCHEMA"}
"""What CREATE and DROP may name (not FUNCTION, not a materialized view, ...)."""

DYNAMIC_OVERWRITE = re.compile(r"partitionOverwriteMode", re.I)
"""The Spark setting that makes an overwrite replace only the partitions written: on Sail it
replaces the whole table. Matched in a SET statement, a table option or property, and in a
recorded write."""


def _is_insert_overwrite(node: exp.Expression) -> bool:
    return isinstance(node, exp.Insert) and bool(node.args.get("overwrite"))


def _is_insert_into_partition(node: exp.Expression) -> bool:
    return isinstance(node, exp.Insert) and bool(node.find(exp.Partition))


def _is_rename(node: exp.Expression) -> bool:
    return isinstance(node, exp.Alter) and any(
        isinstance(action, exp.AlterRename | exp.RenameColumn)
        for action in node.args.get("actions") or []
    )


def _is_describe_history(node: exp.Expression) -> bool:
    return isinstance(node, exp.Describe) and str(node.args.get("style") or "").upper() == "HISTORY"


def _is_dynamic_partition_overwrite(node: exp.Expression) -> bool:
    """``SET ...partitionOverwriteMode=...``, or the setting as a table option or property."""
    setting = isinstance(node, exp.SetItem) or type(node) is exp.Property
    return setting and bool(DYNAMIC_OVERWRITE.search(node.sql(DIALECT)))


def _reads_a_delta_path(node: exp.Expression) -> bool:
    """A table reference ``delta.`<path>``` (a Delta table read by its location)."""
    return isinstance(node, exp.Table) and node.db.lower() == "delta" and bool(node.name)


def _is_view_over_a_delta_path(node: exp.Expression) -> bool:
    """A view must read registered tables: a view over ``delta.`path``` breaks on Spark+Delta."""
    if not (isinstance(node, exp.Create) and str(node.args.get("kind") or "").upper() == "VIEW"):
        return False
    body = node.expression
    return body is not None and any(
        _reads_a_delta_path(table) for table in body.find_all(exp.Table)
    )


def _is_command(keyword: str) -> Callable[[exp.Expression], bool]:
    """sqlglot keeps a statement it has no grammar for (OPTIMIZE, VACUUM) as a Command."""

    def matches(node: exp.Expression) -> bool:
        return isinstance(node, exp.Command) and str(node.this).upper() == keyword

    return matches


FORBIDDEN: dict[str, Callable[[exp.Expression], bool]] = {
    "INSERT OVERWRITE": _is_insert_overwrite,
    "INSERT ... PARTITION": _is_insert_into_partition,
    "ALTER TABLE ... RENAME": _is_rename,
    "DESCRIBE HISTORY": _is_describe_history,
    "OPTIMIZE": _is_command("OPTIMIZE"),
    "VACUUM": _is_command("VACUUM"),
    "dynamic partition overwrite": _is_dynamic_partition_overwrite,
    "view over a delta path": _is_view_over_a_delta_path,
}
"""DESIGN.md's "Never use" list, as tests on syntax-tree nodes (any node of a statement).
RESTORE has no sqlglot grammar and does not parse: :data:`UNPARSABLE_KEYWORDS` names it."""

UNPARSABLE_KEYWORDS = {"RESTORE"}
"""Forbidden statements sqlglot cannot parse, named by their first keyword when they fail."""


def _first_keyword(statement: str) -> str:
    try:
        tokens = Tokenizer().tokenize(statement)
    except TokenError:
        return ""
    return tokens[0].text.upper() if tokens else ""


def _statement_kind_violation(tree: exp.Expression) -> str | None:
    """Why ``tree`` is not a statement kind of the subset, if it is not."""
    if isinstance(tree, exp.Command):
        keyword = str(tree.this).upper()
        # OPTIMIZE and VACUUM are named by FORBIDDEN; any other Command sqlglot could not read.
        return None if keyword in FORBIDDEN else f"{OUTSIDE_THE_SUBSET}: {keyword}"
    if not isinstance(tree, ALLOWED_STATEMENTS):
        return f"{OUTSIDE_THE_SUBSET}: {type(tree).__name__.upper()}"
    if isinstance(tree, exp.Create | exp.Drop):
        kind = str(tree.args.get("kind") or "").upper()
        if kind not in CREATED_KINDS:
            return f"{OUTSIDE_THE_SUBSET}: {type(tree).__name__.upper()} {kind}"
    return None


def _named(tree: exp.Expression) -> list[str]:
    """The forbidden constructs any node of ``tree`` is."""
    return [
        name
        for name, matches in FORBIDDEN.items()
        if any(matches(node) for node in tree.walk() if isinstance(node, exp.Expression))
    ]


def sql_violations(text: str) -> list[str]:
    """What puts the Spark SQL ``text`` (one or more statements) outside the portable subset."""
    try:
        trees = sqlglot.parse(text, read=DIALECT)
    except (ParseError, TokenError) as exc:
        keyword = _first_keyword(text)
        if keyword in UNPARSABLE_KEYWORDS:
            return [keyword]
        return [f"{NOT_PARSED}: {str(exc).splitlines()[0]}"]
    found: list[str] = []
    for tree in trees:
        if not isinstance(tree, exp.Expression):  # None: nothing between two semicolons
            continue
        named = _named(tree)
        kind = _statement_kind_violation(tree)
        if kind and not named:  # a named construct says more than its statement kind
            found.append(kind)
        found.extend(name for name in named if name not in found)
    return found


WRITE_RECORD = re.compile(
    r"(?P<mode>\S+) (?P<location>.+) partitionBy=(?P<partition_by>\[.*?\])"
    r" replaceWhere=(?P<replace_where>.*)",
    re.S,
)
WRITE_MODES = {"append", "overwrite"}


def write_violations(text: str) -> list[str]:
    """What puts a recorded DataFrame write outside the portable subset."""
    found: list[str] = []
    if DYNAMIC_OVERWRITE.search(text):
        found.append("dynamic partition overwrite")
    record = WRITE_RECORD.fullmatch(text)
    if record is None:
        return [*found, f"{NOT_PARSED}: not '<mode> <location> partitionBy=[...] replaceWhere=...'"]
    if record["mode"] not in WRITE_MODES:
        found.append(f"write mode outside the subset: {record['mode']}")
    try:
        columns = ast.literal_eval(record["partition_by"])
    except (ValueError, SyntaxError):
        columns = None
    if not (isinstance(columns, list) and all(isinstance(name, str) for name in columns)):
        found.append(f"{NOT_PARSED}: partitionBy={record['partition_by']}")
    predicate = record["replace_where"]
    if predicate != "None":
        try:
            sqlglot.parse_one(predicate, read=DIALECT)
        except (ParseError, TokenError) as exc:
            found.append(f"{NOT_PARSED}: replaceWhere: {str(exc).splitlines()[0]}")
    return found


def violations(kind: str, text: str) -> list[str]:
    """What puts one recorded statement (``kind`` ``sql`` or ``write``) outside the subset."""
    if kind == "sql":
        return sql_violations(text)
    if kind == "write":
        return write_violations(text)
    return [f"unknown record kind {kind!r}"]
