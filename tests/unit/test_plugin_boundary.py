"""Plugins that callers never special-case (issue 27): outside ``gluon/methods/``,
``gluon/extract/feeds/`` and ``gluon/source/`` no module names a method, a feed, a source dialect
class or a dialect.

What differs between trigger capture, ORA_ROWSCN and log-based capture is a declared fact or
a hook of the method (``gluon/methods/base.py``), its feed (``gluon/extract/feeds/base.py``) or the
dialect (``gluon/source/base.py``); a caller asks those, never which plugin it has. An AST
scan of every other module of gluon/ finds:

- an import of a plugin module (any module of the three packages but their interface);
- a plugin class by name (``PgLogicalFeed``, ``PostgreSQLSource``, ``ChangelogMethod``);
- a change reader (``ChangeReader.X``: one per feed) or a capture object kind that only one
  method declares (``SourceObject.REPLICATION_SLOT``);
- a string that is a method's or dialect's name, or the value of such a reader or kind
  (``source.name == "oracle"``, ``state.method == "PG_LOGICAL"``);
- a method's name in the text of a message (``"PG_LOGICAL needs ..."``).

The import-linter contract "Only the plugin packages import a method, feed or dialect
module" (pyproject.toml) says the first rule for the modules there today.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from gluon.extract.feeds import FEEDS
from gluon.methods import registered_methods
from gluon.methods.base import ChangeReader, SourceObject
from gluon.source import DIALECT_MODULES, dialect_class

GLUON = Path(__file__).resolve().parents[2] / "gluon"
PLUGIN_PACKAGES = ("methods", "extract/feeds", "source")

INTERFACE = frozenset(
    {
        "gluon.methods",
        "gluon.methods.base",
        "gluon.extract.feeds",
        "gluon.extract.feeds.base",
        "gluon.extract.feeds.unfit",
        "gluon.source",
        "gluon.source.base",
        "gluon.source.arrow",
    }
)
"""The modules of the plugin packages any module may import: the registries, the protocols
and what every plugin shares (set-aside search, Arrow conversion)."""

ALLOWED: dict[tuple[str, str], str] = {
    ("repo/__init__.py", "sqlite"): "the repository's own database (GLUON_REPO_URL), "
    "SQLite or PostgreSQL through SQLAlchemy: not a source dialect",
    ("repo/common.py", "sqlite"): "the repository's upsert, SQLAlchemy's per-backend insert",
    ("repo/common.py", "postgresql"): "the repository's upsert, SQLAlchemy's per-backend insert",
    **{
        ("config.py", backend): "the repository backends GLUON_REPO_URL may name "
        "(REPOSITORY_BACKENDS): not source dialects"
        for backend in ("sqlite", "postgresql", "oracle")
    },
}
"""(module under gluon/, what it names) -> why that is no special case of a plugin."""

HELP_KEYWORD = "help"
"""An option's help text may say which methods the option is for: it documents, it decides
nothing (typer's ``help=``)."""


@dataclass(frozen=True)
class Names:
    """What a module outside the plugin packages must not name."""

    methods: frozenset[str]
    dialects: frozenset[str]
    classes: frozenset[str]
    members: frozenset[tuple[str, str]]
    """(enum, member) pairs: every ChangeReader, the SourceObject kinds of one method."""
    values: frozenset[str]
    """The values of those members."""

    @property
    def strings(self) -> frozenset[str]:
        return self.methods | self.dialects | self.values


@cache
def plugin_names() -> Names:
    """Read from the registries, so a new method, feed or dialect is covered unchanged."""
    methods = registered_methods()
    dialects = {name: dialect_class(name) for name in DIALECT_MODULES}
    declared_by: dict[SourceObject, int] = {}
    for method in methods.values():
        for kind in method.source_objects:
            declared_by[kind] = declared_by.get(kind, 0) + 1
    single = [kind for kind, count in declared_by.items() if count == 1]
    members = {("ChangeReader", reader.name) for reader in ChangeReader}
    members |= {("SourceObject", kind.name) for kind in single}
    return Names(
        methods=frozenset(methods),
        dialects=frozenset(dialects),
        classes=frozenset(
            cls.__name__ for cls in [*methods.values(), *dialects.values(), *FEEDS.values()]
        ),
        members=frozenset(members),
        values=frozenset({reader.value for reader in ChangeReader} | {k.value for k in single}),
    )


def _docstrings(tree: ast.AST) -> set[int]:
    """Docstrings of modules, classes, functions and attributes (prose, not code)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                found.add(id(statement.value))
    return found


def _help_texts(tree: ast.AST) -> set[int]:
    """String nodes inside ``help=...`` keyword arguments."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg == HELP_KEYWORD
        for inner in ast.walk(node.value)
    }


def _imported_modules(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.module is None or node.level:
        return
    yield node.module
    for alias in node.names:
        yield f"{node.module}.{alias.name}"


def _is_plugin_module(name: str) -> bool:
    package, _, leaf = name.rpartition(".")
    folder = package.removeprefix("gluon.").replace(".", "/")
    if not package.startswith("gluon.") or folder not in PLUGIN_PACKAGES:
        return False  # ``from gluon.x.y import Name``: the module is gluon.x.y
    path = GLUON / folder / leaf
    exists = path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    return exists and name not in INTERFACE


def findings(source: str, names: Names) -> list[tuple[int, str]]:
    """``(line, what)`` for each place ``source`` names a plugin."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    helps = _help_texts(tree)
    word = re.compile(r"\b(" + "|".join(sorted(names.methods, key=len, reverse=True)) + r")\b")
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += [
                (node.lineno, f"imports plugin module {module}")
                for module in dict.fromkeys(_imported_modules(node))
                if _is_plugin_module(module)
            ]
            found += [
                (node.lineno, f"imports plugin class {alias.name}")
                for alias in node.names
                if alias.name in names.classes
            ]
        elif isinstance(node, ast.Name) and node.id in names.classes:
            found.append((node.lineno, f"names plugin class {node.id}"))
        elif isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if node.attr in names.classes:
                found.append((node.lineno, f"names plugin class {node.attr}"))
            elif owner is not None and (owner, node.attr) in names.members:
                found.append((node.lineno, f"names {owner}.{node.attr}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in prose or id(node) in helps:
                continue
            if node.value in names.strings:
                found.append((node.lineno, f"compares or keys by {node.value!r}"))
            elif match := word.search(node.value):
                found.append((node.lineno, f"names method {match.group(1)} in {node.value!r}"))
    return sorted(found)


def _modules() -> list[Path]:
    return [
        path
        for path in sorted(GLUON.rglob("*.py"))
        if not any(
            path.relative_to(GLUON).as_posix().startswith(f"{package}/")
            for package in PLUGIN_PACKAGES
        )
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(GLUON)))
def test_no_module_outside_the_plugin_packages_names_a_plugin(path: Path) -> None:
    relative = path.relative_to(GLUON).as_posix()
    found = [
        f"gluon/{relative}:{line}: {what}"
        for line, what in findings(path.read_text(encoding="utf-8"), plugin_names())
        if not any(relative == module and repr(value) in what for module, value in ALLOWED)
    ]
    assert not found, (
        "a caller special-cases a plugin: declare the difference on the method, feed or "
        "dialect (a class attribute or a hook) and ask that instead:\n" + "\n".join(found)
    )


def test_every_allowed_exception_is_still_needed() -> None:
    names = plugin_names()
    for (module, value), reason in ALLOWED.items():
        found = findings((GLUON / module).read_text(encoding="utf-8"), names)
        assert any(repr(value) in what for _, what in found), f"{module} {value}: {reason}"


def test_the_scan_finds_each_way_of_naming_a_plugin() -> None:
    source = '''"""PG_LOGICAL in a docstring is prose; so is "oracle"."""
from gluon.extract.feeds import PgLogicalFeed
from gluon.source import logical
import gluon.methods.pg_logical
from gluon.methods.base import ChangeReader, SourceObject
from gluon.source.base import SourceDialect

def f(source, method, item):
    if source.name == "oracle":
        pass
    if method.change_reader is ChangeReader.ORA_ROWSCN:
        pass
    if item.kind is SourceObject.REPLICATION_SLOT or item.kind == "replication_slot":
        pass
    if isinstance(source, PostgreSQLSource):
        pass
    if item.kind is SourceObject.CHANGELOG_TABLE:  # shared by several methods: allowed
        pass
    raise ValueError(f"PG_LOGICAL needs {source}")

option = Option(help="PG_LOGICAL only: an option's help may say so")
'''
    assert findings(source, plugin_names()) == [
        (2, "imports plugin class PgLogicalFeed"),
        (3, "imports plugin module gluon.source.logical"),
        (4, "imports plugin module gluon.methods.pg_logical"),
        (9, "compares or keys by 'oracle'"),
        (11, "names ChangeReader.ORA_ROWSCN"),
        (13, "compares or keys by 'replication_slot'"),
        (13, "names SourceObject.REPLICATION_SLOT"),
        (15, "names plugin class PostgreSQLSource"),
        (19, "names method PG_LOGICAL in 'PG_LOGICAL needs '"),
    ]


def test_the_names_come_from_the_registries() -> None:
    names = plugin_names()
    assert {"CHANGELOG", "ORA_ROWSCN", "PG_LOGICAL"} <= names.methods
    assert {"sqlite", "postgresql", "oracle"} <= names.dialects
    assert {"PgLogicalFeed", "PostgreSQLSource", "OracleSource", "ChangelogMethod"} <= (
        names.classes
    )
    assert ("SourceObject", "REPLICATION_SLOT") in names.members
    assert ("SourceObject", "CHANGELOG_TABLE") not in names.members  # several methods have one
