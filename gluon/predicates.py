"""A small predicate language for ``--offload-predicate`` and lake-row selections.

Users never paste SQL into gluon's statements; they write, for example::

    column(SOLD_ON) >= date(2017-01-01) and column(SOLD_ON) < date(2017-02-01)
    column(REGION) = string("EMEA") or column(AMOUNT) is null

Grammar (keywords and function names are case-insensitive)::

    predicate  := term ("or" term)*
    term       := factor ("and" factor)*
    factor     := "(" predicate ")" | "not" factor | comparison
    comparison := "column(" NAME ")" (OP value | "is" ["not"] "null")
    OP         := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    value      := "numeric(" NUMBER ")" | "string(" QUOTED ")" | "date(" YYYY-MM-DD ")"
                | "datetime(" YYYY-MM-DD[ T]HH:MM:SS[.ffffff] ")"

A parsed predicate renders to source SQL with bind parameters, or to Spark SQL
with typed literals; both check the columns against the table.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gluon.errors import UsageError
from gluon.schema import Column

Value = decimal.Decimal | str | dt.date | dt.datetime

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<open>\() | (?P<close>\)) |
        (?P<op><=|>=|!=|<>|=|<|>) |
        (?P<column>column\(\s*(?P<name>[A-Za-z_][A-Za-z0-9_$#]*)\s*\)) |
        (?P<value>(?P<kind>numeric|string|date|datetime)\(\s*
            (?P<arg>"(?:[^"\\]|\\.)*"|[^()"]*?)\s*\)) |
        (?P<word>[A-Za-z]+)
    )""",
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Compare:
    column: str
    op: str
    value: Value


@dataclass(frozen=True, slots=True)
class IsNull:
    column: str
    negated: bool


@dataclass(frozen=True, slots=True)
class Not:
    item: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # "AND" | "OR"
    items: tuple[Node, ...]


Node = Compare | IsNull | Not | BoolOp


def _value(kind: str, arg: str, text: str) -> Value:
    kind = kind.lower()
    try:
        if kind == "numeric":
            number = decimal.Decimal(arg)
            if not number.is_finite():
                raise UsageError(
                    f"predicate {text!r}: {arg!r} is not a finite number (write e.g. numeric(1.5))"
                )
            return number
        if kind == "string":
            if not (arg.startswith('"') and arg.endswith('"')):
                raise ValueError('string values are quoted: string("text")')
            return re.sub(r"\\(.)", r"\1", arg[1:-1])
        if kind == "date":
            return dt.date.fromisoformat(arg)
        return dt.datetime.fromisoformat(arg)
    except decimal.InvalidOperation:
        raise UsageError(f"predicate {text!r}: {arg!r} is not a number") from None
    except ValueError as exc:
        raise UsageError(f"predicate {text!r}: bad {kind} value {arg!r} ({exc})") from None


def _tokens(text: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if not match or match.end() == position:
            raise UsageError(
                f"predicate {text!r}: cannot read {stripped[position:].strip()[:30]!r}; write "
                'e.g. column(SOLD_ON) >= date(2017-01-01) and column(REGION) = string("EMEA")'
            )
        position = match.end()
        if match.group("open"):
            tokens.append(("(", None))
        elif match.group("close"):
            tokens.append((")", None))
        elif match.group("op"):
            tokens.append(("op", "!=" if match.group("op") == "<>" else match.group("op")))
        elif match.group("column"):
            tokens.append(("column", match.group("name")))
        elif match.group("value"):
            tokens.append(("value", _value(match.group("kind"), match.group("arg"), text)))
        else:
            tokens.append(("word", match.group("word").lower()))
    return tokens


MAX_NESTING = 100
"""Deepest nesting of parentheses and ``not`` a predicate may have (the parser and the
renderers recurse once per level; no real predicate comes close)."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0
        self.depth = 0

    def fail(self, expected: str) -> UsageError:
        found = self.tokens[self.index] if self.index < len(self.tokens) else ("end", None)
        shown = found[1] if found[1] is not None else found[0]
        return UsageError(f"predicate {self.text!r}: expected {expected}, found {shown!r}")

    def peek(self, kind: str, value: Any = None) -> bool:
        if self.index >= len(self.tokens):
            return False
        token = self.tokens[self.index]
        return token[0] == kind and (value is None or token[1] == value)

    def take(self, kind: str, value: Any = None, expected: str = "") -> Any:
        if not self.peek(kind, value):
            raise self.fail(expected or (value or kind))
        self.index += 1
        return self.tokens[self.index - 1][1]

    def parse(self) -> Node:
        if not self.tokens:
            raise UsageError("the predicate is empty")
        node = self.disjunction()
        if self.index != len(self.tokens):
            raise self.fail("'and', 'or' or the end")
        return node

    def disjunction(self) -> Node:
        items = [self.conjunction()]
        while self.peek("word", "or"):
            self.index += 1
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else BoolOp("OR", tuple(items))

    def conjunction(self) -> Node:
        items = [self.factor()]
        while self.peek("word", "and"):
            self.index += 1
            items.append(self.factor())
        return items[0] if len(items) == 1 else BoolOp("AND", tuple(items))

    def factor(self) -> Node:
        if self.peek("(") or self.peek("word", "not"):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise UsageError(
                    f"predicate {self.text[:60]!r}...: nested more than {MAX_NESTING} levels "
                    "deep (parentheses and 'not'); write it flatter"
                )
            try:
                return self._nested()
            finally:
                self.depth -= 1
        return self.comparison()

    def _nested(self) -> Node:
        if self.peek("("):
            self.index += 1
            node = self.disjunction()
            self.take(")", expected="')'")
            return node
        self.index += 1  # "not"
        return Not(self.factor())

    def comparison(self) -> Node:
        column = self.take("column", expected="column(NAME)")
        if self.peek("word", "is"):
            self.index += 1
            negated = self.peek("word", "not")
            if negated:
                self.index += 1
            self.take("word", "null", expected="null")
            return IsNull(column, negated)
        op = self.take("op", expected="a comparison (=, !=, <, <=, >, >=) or 'is null'")
        value = self.take("value", expected='a value such as numeric(1), string("a"), date(...)')
        return Compare(column, op, value)


@dataclass(frozen=True, slots=True)
class Predicate:
    """A parsed predicate over a table's columns."""

    text: str
    root: Node

    def leaves(self) -> list[Compare | IsNull]:
        """The comparisons and null tests, in order."""
        found: list[Compare | IsNull] = []

        def visit(node: Node) -> None:
            if isinstance(node, Compare | IsNull):
                found.append(node)
            elif isinstance(node, Not):
                visit(node.item)
            else:
                for item in node.items:
                    visit(item)

        visit(self.root)
        return found

    def columns(self) -> set[str]:
        return {leaf.column.lower() for leaf in self.leaves()}

    def check_columns(self, columns: Sequence[Column]) -> dict[str, Column]:
        """The predicate's columns by lower-case name.

        Raises:
            UsageError: an unknown column, or a value of another kind than its column (which
                would fail half-way in the lake, or quietly match nothing).
        """
        known = {column.name.lower(): column for column in columns}
        unknown = sorted(self.columns() - set(known))
        if unknown:
            raise UsageError(
                f"predicate {self.text!r}: no column {', '.join(unknown)} "
                f"(columns: {', '.join(column.name for column in columns)})"
            )
        for node in (leaf for leaf in self.leaves() if isinstance(leaf, Compare)):
            column = known[node.column.lower()]
            kind = _value_kind(node.value)
            family = "decimal" if column.lake_type.startswith("decimal(") else column.lake_type
            if family not in VALUE_KINDS[kind]:
                raise UsageError(
                    f"predicate {self.text!r}: column {column.name} holds {column.lake_type} "
                    f"values, which cannot be compared with a {kind}(...) value"
                )
        return known

    def to_source_sql(
        self, columns: Sequence[Column], quote: Callable[[str], str], prefix: str = "p"
    ) -> tuple[str, dict[str, Any]]:
        """SQL for the source database, values as bind parameters ``:p0``, ``:p1``..."""
        known = self.check_columns(columns)
        params: dict[str, Any] = {}

        def render(node: Node) -> str:
            if isinstance(node, Compare):
                name = f"{prefix}{len(params)}"
                params[name] = node.value
                return f"{quote(known[node.column.lower()].name)} {node.op} :{name}"
            if isinstance(node, IsNull):
                null = "IS NOT NULL" if node.negated else "IS NULL"
                return f"{quote(known[node.column.lower()].name)} {null}"
            if isinstance(node, Not):
                return f"NOT ({render(node.item)})"
            return "(" + f" {node.op} ".join(render(item) for item in node.items) + ")"

        return render(self.root), params


VALUE_KINDS: dict[str, frozenset[str]] = {
    "numeric": frozenset({"tinyint", "smallint", "int", "bigint", "float", "double", "decimal"}),
    "string": frozenset({"string"}),
    "date": frozenset({"date", "timestamp_ntz", "timestamp"}),
    "datetime": frozenset({"date", "timestamp_ntz", "timestamp"}),
}
"""Which lake column types each kind of predicate value may be compared with."""


def _value_kind(value: Value) -> str:
    if isinstance(value, dt.datetime):
        return "datetime"
    if isinstance(value, dt.date):
        return "date"
    return "numeric" if isinstance(value, decimal.Decimal) else "string"


def parse_predicate(text: str) -> Predicate:
    """Parse ``text``.

    Raises:
        UsageError: the text is not a predicate of the language above (one clear line).
    """
    return Predicate(text, _Parser(text).parse())
