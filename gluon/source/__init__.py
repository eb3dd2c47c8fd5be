"""Source databases, one module per dialect (sqlglot's pattern).

Adding a dialect:
1. a module ``gluon/source/<name>.py`` with a ``SourceDialect`` subclass whose
   ``name`` is SQLAlchemy's backend name; set the class attributes
   (``max_identifier_length``, ``has_schemas``, ``name_case``) and implement
   ``describe_table`` with the dialect's type table;
2. templates under ``templates/<name>/`` (``ping``, ``count_rows``,
   ``select_rows``, ``cast_to_text`` and the dictionary queries; anything not
   dialect-specific falls back to ``templates/default/``), and for capture
   (``gluon.capture``): ``create_<kind>``/``drop_<kind>`` scripts for every
   ``SourceObject`` kind the dialect needs (statements separated by
   ``statement_separator`` lines; list the others in
   ``implicit_source_objects``), ``object_exists`` and, with schemas,
   ``count_schema_objects``; override ``begin_script`` if the driver does not
   open a transaction before DDL;
3. add the module name to ``DIALECT_MODULES`` below and a test file (for
   capture: subclass ``tests/support/capture_contract.CaptureContract``).

A dialect can also come from a package outside gluon, with no edit here: it declares an
entry point in the group ``gluon.dialects`` (name: the SQLAlchemy backend name; value:
``package.module:ClassName``) and ships its templates in a folder it names in
``template_folders``. Subclassing a dialect (``class MySource(PostgreSQLSource)``) reuses
that dialect's templates and overrides only what differs; SQLAlchemy must know the backend
name too (its own ``sqlalchemy.dialects`` entry points). Callers never name a dialect:
what differs is a class attribute or a hook of ``SourceDialect``.
"""

from __future__ import annotations

import difflib
import importlib
from importlib.metadata import entry_points

import sqlalchemy as sa

from gluon.config import Settings, SourceTimeouts, parse_database_url
from gluon.errors import ConfigError, UnsupportedError
from gluon.reuse import keeping, kept
from gluon.source.base import SourceDialect, registered_dialects

DIALECT_MODULES: dict[str, str] = {
    "sqlite": "gluon.source.sqlite",
    "postgresql": "gluon.source.postgresql",
    "oracle": "gluon.source.oracle",
}


DIALECTS_ENTRY_POINTS = "gluon.dialects"
"""Entry point group of dialects from packages outside gluon (see the module docstring)."""


def dialect_names() -> list[str]:
    """Every dialect gluon can connect to: its own and those of installed packages."""
    plugins = {entry.name for entry in entry_points(group=DIALECTS_ENTRY_POINTS)}
    return sorted(set(DIALECT_MODULES) | plugins)


def dialect_class(name: str) -> type[SourceDialect]:
    """The dialect class registered under ``name``, importing its module on demand (gluon's
    own, else an installed package's entry point in :data:`DIALECTS_ENTRY_POINTS`).

    Raises:
        UnsupportedError: no such dialect (the closest name is suggested).
        ConfigError: the package declaring it failed to load, or declares something else.
    """
    module = DIALECT_MODULES.get(name)
    if module is not None:
        importlib.import_module(module)
        return registered_dialects()[name]
    plugin = next(iter(entry_points(group=DIALECTS_ENTRY_POINTS, name=name)), None)
    if plugin is None:
        known = dialect_names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UnsupportedError(
            f"source dialect {name!r} is not supported{hint}; use {', '.join(known)}"
        )
    try:
        loaded = plugin.load()
    except Exception as exc:  # the plugin's own import failed: say which package to fix
        raise ConfigError(
            f"source dialect {name} is declared by an installed package that failed to load "
            f"({type(exc).__name__}: {exc}): reinstall or remove that package"
        ) from None
    found = registered_dialects().get(name)
    if found is None:
        raise ConfigError(
            f"entry point {name} = {plugin.value} ({DIALECTS_ENTRY_POINTS}) gives {loaded!r}, "
            f"not a SourceDialect named {name!r}"
        )
    return found


def connect_configured(settings: Settings) -> SourceDialect:
    """The source database ``settings`` name, with the configured timeouts.

    Raises:
        ConfigError: no source URL is configured.
    """
    return connect(settings.require_source_url(), settings.source_timeouts)


def connect(url: str, timeouts: SourceTimeouts | None = None) -> SourceDialect:
    """A dialect object over a new engine for ``url`` (no connection is made yet).

    Every connection the engine opens is bounded by ``timeouts`` (connecting, each
    statement, lock waits; the defaults when None), so a hung source fails the command
    instead of holding it, and its locks, forever.

    Raises:
        ConfigError: the URL is malformed or its driver is missing.
    """
    bounds = timeouts or SourceTimeouts()
    # In the service: one source per worker thread, reused by its runs (gluon.reuse).
    return kept(
        ("source", url, bounds), lambda: _connect(url, bounds), per_thread=True, close=_close
    )


def _connect(url: str, bounds: SourceTimeouts) -> SourceDialect:
    parsed = parse_database_url(url, "GLUON_SOURCE_URL")
    try:
        cls = dialect_class(parsed.get_backend_name())
    except UnsupportedError as exc:  # a setting to correct: a usage error (exit 2)
        raise ConfigError(f"GLUON_SOURCE_URL: {exc}") from None
    options = cls.engine_options()
    if keeping():  # one worker's (the service): a nested statement's connection is not kept
        options = {"pool_size": 1, **options}
    connect_args = {**options.get("connect_args", {}), **cls.timeout_connect_args(parsed, bounds)}
    try:
        engine = sa.create_engine(parsed, **{**options, "connect_args": connect_args})
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise ConfigError(f"GLUON_SOURCE_URL cannot be used: {exc}") from None
    source = cls(engine)
    source.install_timeouts(bounds)
    return source


def _close(source: SourceDialect) -> None:
    source.engine.dispose()


__all__ = ["DIALECTS_ENTRY_POINTS", "SourceDialect", "connect", "dialect_class", "dialect_names"]
