"""gluon's own rule over what python-oracledb is sent, statement by statement.

sqlfluff's oracle parser accepts things Oracle refuses (a trigger without its final ``;``,
``SELECT 1 FROM DUAL;``, ``CREATE TABLE ... /``). python-oracledb sends each statement as
one call, as it is:

- a PL/SQL unit (``CREATE [OR REPLACE] TRIGGER/PROCEDURE/FUNCTION/PACKAGE/TYPE``, an
  anonymous ``BEGIN``/``DECLARE`` block) ends with ``END;`` (or ``END name;``) and holds
  no DDL outside string literals: a second statement glued on (a forgotten separator)
  would be compiled into the unit;
- any other statement ends without ``;`` (ORA-00933 / ORA-00911) and without a ``/``
  (SQL*Plus's terminator, which the driver would send as text);
- no statement is empty or holds a line with only ``/`` (a separator the split missed);
- an ``INSTEAD OF`` trigger names a view (Oracle: ORA-25002 on a table).

Comments and string literals are masked first, in one scan with quoted names, which Oracle
lets hold ``'`` and ``--``: read as a literal or a comment, they hid the code after them.
"""

from __future__ import annotations

import re

_PLSQL_UNIT = re.compile(
    r"^(CREATE\s+(OR\s+REPLACE\s+)?(EDITIONABLE\s+|NONEDITIONABLE\s+)?"
    r"(TRIGGER|PROCEDURE|FUNCTION|PACKAGE|TYPE)\b|BEGIN\b|DECLARE\b)",
    re.IGNORECASE,
)
_FINAL_END = re.compile(r"\bEND(\s+[\w$#\"]+)?\s*;\s*$", re.IGNORECASE)
# One left-to-right scan, so that a quoted name holding ' or -- (both legal in Oracle) is
# read as a name, not as the start of a literal or a comment that would hide the code after.
_TOKEN = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?\*/)|(?P<name>\"(?:[^\"]|\"\")*\")|(?P<literal>'(?:[^']|'')*')",
    re.DOTALL,
)
_NAME = r'(?:"(?:[^"]|"")*"|[\w$#]+)'
# DDL cannot stand in PL/SQL (PLS-00103) except as EXECUTE IMMEDIATE text (a literal):
# one after the unit's first line is a second statement glued on (a forgotten separator).
_DDL = re.compile(
    r"^\s*(CREATE|ALTER|DROP|GRANT|REVOKE|TRUNCATE|COMMENT\s+ON)\b", re.IGNORECASE | re.MULTILINE
)
_INSTEAD_OF_TARGET = re.compile(
    rf"\bINSTEAD\s+OF\b.*?\bON\s+({_NAME}(?:\.{_NAME})?)", re.IGNORECASE | re.DOTALL
)


def _code(statement: str) -> str:
    """The statement without comments and string literals (they may hold anything); quoted
    names are kept as they are."""

    def masked(token: re.Match[str]) -> str:
        if token.group("comment") is not None:
            return " "
        return token.group(0) if token.group("name") is not None else "''"

    return _TOKEN.sub(masked, statement).strip()


def statement_problems(statement: str, views: frozenset[str] = frozenset()) -> list[str]:
    """Why python-oracledb would fail to run ``statement`` as one call (empty: nothing).

    Args:
        views: the names (as written in the statement, e.g. ``APP_H.ORDERS_UV``) of the
            views an ``INSTEAD OF`` trigger may name.
    """
    code = _code(statement)
    if not code:
        return ["an empty statement"]
    if any(line.strip() == "/" for line in code.splitlines()):
        return ["a line with only '/' inside a statement (a separator the split missed)"]
    if _PLSQL_UNIT.match(code):
        problems = []
        if not _FINAL_END.search(code):
            problems.append("a PL/SQL unit that does not end with END;")
        first_line_end = code.find("\n") if "\n" in code else len(code)
        if _DDL.search(code, first_line_end):
            problems.append("DDL inside a PL/SQL unit (two statements sent as one)")
        target = _INSTEAD_OF_TARGET.search(code)
        if target and target.group(1) not in views:
            problems.append(f"an INSTEAD OF trigger on {target.group(1)}, which is not a view")
        return problems
    if code.endswith(";"):
        return ["a SQL statement ending with ';' (ORA-00933/ORA-00911)"]
    if code.endswith("/"):
        return ["a SQL statement ending with '/' (SQL*Plus's terminator, not SQL)"]
    return []
