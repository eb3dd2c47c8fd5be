"""A user's statement (``gluon query``, ``gluon shell``): the form every engine takes, and
what the engine's errors about it name.

Sail 0.7 refuses Spark's ``DESCRIBE name`` (it wants ``DESCRIBE TABLE name``), and reports
an unknown column as ``attribute ObjectName([Identifier("bogus")]) is missing from the
schema``: these helpers let gluon send the form both engines take and say which column.
"""

from __future__ import annotations

import re

NAME_PART_PATTERN = r"`(?:[^`]|``)*`|\w+"
"""One part of a Spark SQL name: bare or back-quoted."""
NAME_CHAIN_PATTERN = rf"(?:{NAME_PART_PATTERN})(?:\s*\.\s*(?:{NAME_PART_PATTERN}))*"
"""A dotted Spark SQL name (``a.b``, ``a . `b c```)."""
_DESCRIBE = re.compile(
    r"^(?P<lead>\s*)DESC(?:RIBE)?\s+(?:(?P<detail>EXTENDED|FORMATTED)\s+)?"
    r"(?!(?:TABLE|FUNCTION|CATALOG|DATABASE|SCHEMA|NAMESPACE|QUERY|EXTENDED|FORMATTED|"
    r"SELECT|WITH|VALUES|FROM|MAP|REDUCE)\b|\()",
    re.IGNORECASE,
)
_MISSING_COLUMN = re.compile(r"attribute ObjectName\(\[(?P<parts>[^\]]*)\]\) is missing")
_IDENTIFIER = re.compile(r'Identifier\("((?:[^"\\]|\\.)*)"\)')
_RELATION = re.compile(rf"\b(?:FROM|JOIN)\s+(?P<name>{NAME_CHAIN_PATTERN})", re.IGNORECASE)


def engine_form(statement: str) -> str:
    """``statement``, with ``DESC[RIBE] [EXTENDED|FORMATTED] name`` written ``DESCRIBE TABLE
    [EXTENDED] name`` (Spark reads both the same; Sail only the second, and FORMATTED is
    Spark's synonym of EXTENDED)."""
    found = _DESCRIBE.match(statement)
    if found is None:
        return statement
    detail = " EXTENDED" if found.group("detail") else ""
    return f"{found.group('lead')}DESCRIBE TABLE{detail} {statement[found.end() :]}"


def missing_column(message: str) -> str | None:
    """The column an engine error says is not in the schema (``p.bogus``), or None."""
    found = _MISSING_COLUMN.search(message)
    if found is None:
        return None
    parts = _IDENTIFIER.findall(found.group("parts"))
    return ".".join(parts) if parts else None


def relations(statement: str) -> list[str]:
    """The names ``statement`` reads from (after ``FROM`` and ``JOIN``), in order, once."""
    names: list[str] = []
    for found in _RELATION.finditer(statement):
        name = re.sub(r"\s+", "", found.group("name"))
        if name not in names:
            names.append(name)
    return names
