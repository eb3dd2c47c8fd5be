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
"""

from __future__ import annotations

import difflib
import importlib

import sqlalchemy as sa

from gluon.config import Settings, SourceTimeouts, parse_database_url
from gluon.errors import ConfigError, UnsupportedError
from gluon.source.base import SourceDialect, registered_dialects

DIALECT_MODULES: dict[str, str] = {
    "sqlite": "gluon.source.sqlite",
    "postgresql": "gluon.source.postgresql",
    "oracle": "gluon.source.oracle",
}


def dialect_class(name: str) -> type[SourceDialect]:
    """The dialect class registered under ``name``, importing its module on demand.

    Raises:
        UnsupportedError: no such dialect (the closest name is suggested).
    """
    module = DIALECT_MODULES.get(name)
    if module is None:
        close = difflib.get_close_matches(name, DIALECT_MODULES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        supported = ", ".join(sorted(DIALECT_MODULES))
        raise UnsupportedError(f"source dialect {name!r} is not supported{hint}; use {supported}")
    importlib.import_module(module)
    return registered_dialects()[name]


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
    parsed = parse_database_url(url, "GLUON_SOURCE_URL")
    try:
        cls = dialect_class(parsed.get_backend_name())
    except UnsupportedError as exc:  # a setting to correct: a usage error (exit 2)
        raise ConfigError(f"GLUON_SOURCE_URL: {exc}") from None
    bounds = timeouts or SourceTimeouts()
    options = cls.engine_options()
    connect_args = {**options.get("connect_args", {}), **cls.timeout_connect_args(parsed, bounds)}
    try:
        engine = sa.create_engine(parsed, **{**options, "connect_args": connect_args})
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise ConfigError(f"GLUON_SOURCE_URL cannot be used: {exc}") from None
    source = cls(engine)
    source.install_timeouts(bounds)
    return source


__all__ = ["SourceDialect", "connect", "dialect_class"]
