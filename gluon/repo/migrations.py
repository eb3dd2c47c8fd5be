"""Repository migrations: the frozen Alembic revisions in ``gluon/repo/revisions``.

``migrate`` brings a repository to the newest revision on first use; it needs no
``alembic.ini``. Alembic records the revision in ``gluon_alembic_version`` (not the default
``alembic_version``: a shared database may hold another application's migrations).

Repositories made before Alembic record numbered migrations 1-9 in ``gluon_schema_version``;
revisions 0001-0009 are those migrations, so such a repository is stamped with the revision
of its highest number and upgraded from there. That table is left in place, unused.

To change the schema: change ``gluon.repo.models`` and add a revision in
``revisions/versions/`` that spells out the change (never importing the models), and set
``HEAD`` to it; ``tests/integration/test_repository_migrations.py`` fails while the two
disagree, ``tests/unit/test_startup_names.py`` while ``HEAD`` is not the newest revision.

Every command opens the repository, and importing Alembic costs more than the rest of a
no-op extraction (issue 14): the revision is read with a plain query and Alembic is
imported only when there is something to migrate.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from gluon.errors import RepositoryError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

SCRIPT_DIRECTORY = Path(__file__).parent / "revisions"
VERSION_TABLE = "gluon_alembic_version"
HEAD = "0029"
"""The newest revision in ``revisions/versions`` (``head()`` reads it from the scripts)."""

version_table = sa.Table(
    VERSION_TABLE, sa.MetaData(), sa.Column("version_num", sa.String(32), primary_key=True)
)
"""Where Alembic records the revision (its own layout: one row, the current revision)."""

legacy_schema_version = sa.Table(
    "gluon_schema_version",
    sa.MetaData(),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("description", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.DateTime, nullable=False),
)
"""Where repositories made before Alembic recorded their numbered migrations."""

LEGACY_REVISIONS = {number: f"{number:04d}" for number in range(1, 10)}
"""The revision that equals each numbered migration."""


@functools.cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory  # only to migrate: see the module docstring

    return ScriptDirectory(str(SCRIPT_DIRECTORY))


def head() -> str:
    """The newest revision this release knows."""
    revision = _script().get_current_head()
    if revision is None:  # pragma: no cover - the package ships its revisions
        raise RepositoryError(f"no repository revisions in {SCRIPT_DIRECTORY}")
    return revision


def current_revision(connection: sa.Connection) -> str | None:
    """The repository's Alembic revision (None before the first ``migrate``).

    Raises:
        RepositoryError: the version table holds more than one revision (Alembic's branches,
            which gluon never makes).
    """
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    revisions = connection.execute(sa.select(version_table.c.version_num)).scalars().all()
    if len(revisions) > 1:
        raise RepositoryError(
            f"the repository records {len(revisions)} revisions in {VERSION_TABLE} "
            f"({', '.join(revisions)}): restore it from a backup"
        )
    return revisions[0] if revisions else None


def legacy_version(connection: sa.Connection) -> int:
    """The highest numbered migration a pre-Alembic repository applied (0 if none)."""
    if not sa.inspect(connection).has_table(legacy_schema_version.name):
        return 0
    value = connection.execute(sa.select(sa.func.max(legacy_schema_version.c.version))).scalar()
    return int(value or 0)


def is_repository(connection: sa.Connection) -> bool:
    """Whether the database holds a gluon repository (of this or an earlier release)."""
    return current_revision(connection) is not None or legacy_version(connection) > 0


def _config(connection: sa.Connection) -> Config:
    from alembic.config import Config  # only to migrate: see the module docstring

    config = Config()
    # Config values go through configparser interpolation: a "%" in the path must be doubled.
    config.set_main_option("script_location", str(SCRIPT_DIRECTORY).replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


def migrate(engine: sa.Engine) -> str:
    """Apply every pending revision; return the resulting (newest) revision.

    Raises:
        RepositoryError: the repository was made by a newer release (an unknown revision or
            numbered migration).
    """
    with engine.connect() as connection:
        revision = current_revision(connection)
        if revision == HEAD:
            return HEAD
        # Something to migrate (or a newer repository to refuse): now Alembic is needed.
        from alembic import command
        from alembic.util import CommandError

        newest = head()
        if revision is None:
            legacy = legacy_version(connection)
            connection.commit()
            if legacy:
                if legacy not in LEGACY_REVISIONS:
                    raise RepositoryError(_newer(f"records migration {legacy}"))
                command.stamp(_config(connection), LEGACY_REVISIONS[legacy])
                connection.commit()
        else:
            connection.commit()
        try:
            command.upgrade(_config(connection), "head")
        except CommandError as exc:
            raise RepositoryError(_newer(f"has the unknown revision {revision} ({exc})")) from None
        connection.commit()
    return newest


def _newer(what: str) -> str:
    return f"the repository {what}: it was made by a newer gluon release; upgrade gluon to use it"
