"""The metadata repository: gluon's catalog of offloaded tables and their runs.

A SQLAlchemy URL (``GLUON_REPO_URL``); SQLite under ``$OFFLOAD_HOME/repo`` by
default, or a shared PostgreSQL/Oracle database for several nodes.
"""

from __future__ import annotations

import datetime as dt
import difflib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from gluon.config import parse_database_url
from gluon.errors import ConfigError, NotFoundError, RepositoryError, StateError
from gluon.faults import repository_write
from gluon.repo import migrations, models
from gluon.repo.common import RecordMapping, json_tuple, now, upsert
from gluon.repo.compaction import CompactionRepository
from gluon.repo.incremental import ENABLED, IncrementalRepository, IncrementalState
from gluon.repo.increments import IncrementRepository
from gluon.repo.locks import LockRepository
from gluon.repo.set_aside import SetAsideChanges
from gluon.repo.slot_positions import SlotPositions
from gluon.repo.verify_progress import VerifyProgressStore
from gluon.repo.verify_runs import VerifyRuns
from gluon.reuse import kept
from gluon.schema import Column, PartitionColumn, TableSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffloadedTable:
    """What the repository knows about one offloaded table."""

    table_key: str
    source_dialect: str
    source_schema: str
    source_table: str
    lake_schema: str
    lake_table: str
    base_table: str
    base_path: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    partitioning: tuple[PartitionColumn, ...]
    offload_type: str
    status: str
    row_count: int | None = None
    offloaded_at: dt.datetime | None = None

    @property
    def user_view(self) -> str:
        return f"{self.lake_schema}.{self.lake_table}"

    def spec(self) -> TableSpec:
        """The source table as it was when offloaded."""
        return TableSpec(
            schema=self.source_schema,
            name=self.source_table,
            columns=self.columns,
            primary_key=self.primary_key,
        )


def _engine(url: str, *, create: bool) -> sa.Engine:
    parsed = parse_database_url(url, "GLUON_REPO_URL")
    options: dict[str, Any] = {}
    damaged_file: Path | None = None
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            damaged_file = Path(parsed.database)
            _check_sqlite_file(damaged_file, create=create)
        options["connect_args"] = {"timeout": 60}
    try:
        engine = sa.create_engine(parsed, **options)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"GLUON_REPO_URL: its driver ({exc.name}) is not installed: use "
            "postgresql+psycopg://... or oracle+oracledb://... (installed with gluon), or "
            "install the driver in gluon's virtualenv"
        ) from None
    if damaged_file is not None:
        _refuse_damaged_sqlite(engine, damaged_file)
    return engine


_DAMAGED = ("database disk image is malformed", "file is not a database")


def _refuse_damaged_sqlite(engine: sa.Engine, path: Path) -> None:
    """A damaged repository file fails every statement in one line saying so, wherever the
    damage is read (opening it, or a later query touching a damaged page)."""

    @sa.event.listens_for(engine, "handle_error")
    def damaged(context: sa.engine.ExceptionContext) -> None:
        reason = str(context.original_exception)
        if any(text in reason for text in _DAMAGED):
            raise RepositoryError(
                f"the repository {path} is damaged ({reason}): restore "
                "it from a backup (sqlite3's .recover may save its records)"
            )


def _shown(url: str) -> str:
    """``url`` as messages show it: the password hidden."""
    return parse_database_url(url, "GLUON_REPO_URL").render_as_string(hide_password=True)


def _check_sqlite_file(path: Path, *, create: bool) -> None:
    """A repository file is created only on purpose; a lost or emptied one is an error.

    Raises:
        ConfigError: the file does not exist and this command does not create repositories.
        RepositoryError: the file exists but is empty (0 bytes).
    """
    if path.is_file() and path.stat().st_size == 0:
        raise RepositoryError(
            f"the repository {path} is an empty file (0 bytes): restore it from a backup, or "
            "delete it and run the first offload again to start a new repository"
        )
    if path.exists():
        return
    if not create:
        raise ConfigError(
            f"no gluon repository at {path}: check OFFLOAD_HOME (or GLUON_REPO_URL); the "
            "first offload of a table (offload -t SCHEMA.TABLE -x) creates a new one"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"GLUON_REPO_URL: cannot create {path}: {exc}") from None
    log.info("creating a new gluon repository at %s", path)


def _open(url: str, *, create: bool) -> tuple[sa.Engine, str]:
    """The repository's engine and its revision (migrated to the newest)."""
    engine = _engine(url, create=create)
    try:
        if not create:
            with engine.connect() as connection:
                if not migrations.is_repository(connection):
                    raise ConfigError(
                        "the repository database (GLUON_REPO_URL) holds no gluon "
                        "repository: check the setting; the first offload of a table "
                        "(offload -t SCHEMA.TABLE -x) creates one"
                    )
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA journal_mode=WAL")
        return engine, migrations.migrate(engine)
    except sa.exc.DBAPIError as exc:
        raise RepositoryError(f"cannot open the repository ({_shown(url)}): {exc.orig}") from None


class Repository:
    """Reads and writes repository records; migrates the schema on first use.

    Only a command that creates repositories on purpose (the first offload) passes
    ``create=True``; every other command fails on a missing or empty repository
    instead of silently starting a new one (whose installation id would own nothing).
    """

    def __init__(self, url: str, *, create: bool = False) -> None:
        # In the service: opened (and its migrations checked) once, shared by every run.
        self.engine, self.revision = kept(
            ("repository", url),
            lambda: _open(url, create=create),
            per_thread=False,
            close=lambda opened: opened[0].dispose(),
        )
        self.incremental = IncrementalRepository(self.engine)
        self.compaction = CompactionRepository(self.engine)
        self.increments = IncrementRepository(self.engine)
        self.locks = LockRepository(self.engine)
        self.set_aside = SetAsideChanges(self.engine)
        self.slot_positions = SlotPositions(self.engine)
        self.verify_runs = VerifyRuns(self.engine)
        self.verify_progress = VerifyProgressStore(self.engine)

    @property
    def installation_id(self) -> str:
        """The random id that marks what this installation creates (migration 8)."""
        with self.engine.connect() as connection:
            value = connection.execute(sa.select(models.installation.c.installation_id)).scalar()
        if value is None:  # a repository whose row was deleted by hand
            raise RepositoryError(
                "the repository has no installation id (table installation is empty): restore "
                "the repository from a backup"
            )
        return str(value)

    @property
    def installation_created_at(self) -> dt.datetime:
        """When the installation id was created: objects made before it carry no marker."""
        with self.engine.connect() as connection:
            query = sa.select(models.installation.c.created_at)
            value: dt.datetime | None = connection.execute(query).scalar()
        if value is None:
            raise RepositoryError(
                "the repository has no installation id (table installation is empty): restore "
                "the repository from a backup"
            )
        return value.replace(tzinfo=None) if value.tzinfo else value

    # -- offloaded tables ------------------------------------------------------------------

    def get_table(self, table_key: str) -> OffloadedTable | None:
        """The record of ``table_key`` (``SCHEMA.TABLE``, upper case), if any."""
        table = models.offloaded_tables
        with self.engine.connect() as connection:
            row = (
                connection.execute(sa.select(table).where(table.c.table_key == table_key))
                .mappings()
                .first()
            )
        return RECORDS.from_row(row) if row else None

    def list_tables(self) -> list[OffloadedTable]:
        """Every offloaded table, in key order."""
        table = models.offloaded_tables
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(table).order_by(table.c.table_key)).mappings()
            return [RECORDS.from_row(row) for row in rows]

    def offloaded_table(self, table_key: str) -> OffloadedTable:
        """The record of ``table_key``, which must have been offloaded.

        Raises:
            NotFoundError: the repository has no record of it; the message names the
                offloaded tables with a close name (a misspelled ``-t`` is the usual cause).
        """
        record = self.get_table(table_key)
        if record is not None:
            return record
        raise NotFoundError(not_offloaded_message(table_key, self.table_keys()))

    def require_known(self, table_key: str) -> None:
        """Refuse a table the repository has no record of at all (neither offloaded nor in
        an incremental state: an enable that died before its offload leaves only a state).

        Raises:
            NotFoundError: as :meth:`offloaded_table`.
        """
        if self.get_table(table_key) is None and self.incremental.get_state(table_key) is None:
            raise NotFoundError(not_offloaded_message(table_key, self.table_keys()))

    def table_keys(self) -> list[str]:
        """The keys of every offloaded table, in order."""
        table = models.offloaded_tables
        with self.engine.connect() as connection:
            return list(
                connection.execute(sa.select(table.c.table_key).order_by(table.c.table_key))
                .scalars()
                .all()
            )

    def enabled_table(
        self, table_key: str, *, otherwise: str
    ) -> tuple[OffloadedTable, IncrementalState]:
        """The record and incremental state of a table whose incremental update is enabled.

        Raises:
            NotFoundError: the table is not offloaded (a misspelled name, most often).
            StateError: it is not enabled (``otherwise`` ends the message: what this means
                here).
        """
        record = self.get_table(table_key)
        state = self.incremental.get_state(table_key)
        if record is None and state is None:  # read once: extraction's no-op run is timed
            raise NotFoundError(not_offloaded_message(table_key, self.table_keys()))
        if record is None or state is None or state.status != ENABLED:
            raise StateError(f"incremental update is not enabled for {table_key}: {otherwise}")
        return record, state

    @repository_write("save_table")
    def save_table(self, record: OffloadedTable) -> None:
        """Insert or replace the record of ``record.table_key``."""
        upsert(self.engine, models.offloaded_tables, record.table_key, _to_row(record))

    @repository_write("update_columns")
    def update_columns(self, table_key: str, columns: tuple[Column, ...]) -> None:
        """Record the table's columns after a source schema change (nothing else changes)."""
        table = models.offloaded_tables
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.table_key == table_key)
                .values(
                    **RECORDS.values(columns=columns),
                    updated_at=now(),
                )
            )

    @repository_write("switch_generation")
    def switch_generation(
        self,
        table_key: str,
        *,
        base_path: str | None,
        view_generation: int,
        view_min_partition: int,
    ) -> None:
        """Move a table's views to a new generation in one transaction (compaction's switch)."""
        with self.engine.begin() as connection:
            if base_path is not None:
                tables = models.offloaded_tables
                connection.execute(
                    tables.update()
                    .where(tables.c.table_key == table_key)
                    .values(base_path=base_path, updated_at=now())
                )
            state = models.incremental_state
            connection.execute(
                state.update()
                .where(state.c.table_key == table_key)
                .values(
                    view_generation=view_generation,
                    view_min_partition=view_min_partition,
                    updated_at=now(),
                )
            )

    @repository_write("delete_table")
    def delete_table(self, table_key: str) -> None:
        table = models.offloaded_tables
        with self.engine.begin() as connection:
            connection.execute(table.delete().where(table.c.table_key == table_key))


RECORDS = RecordMapping(
    OffloadedTable,
    columns=json_tuple("columns_json", of=Column),
    primary_key=json_tuple("primary_key_json"),
    partitioning=json_tuple("partitioning_json", of=PartitionColumn),
)
"""Rows of ``offloaded_tables`` <-> :class:`OffloadedTable`."""


def _to_row(record: OffloadedTable) -> dict[str, Any]:
    return {**RECORDS.to_row(record), "updated_at": now()}


def not_offloaded_message(table_key: str, offloaded: list[str]) -> str:
    """Why ``table_key`` cannot be used: not offloaded, and which offloaded names are close."""
    close = difflib.get_close_matches(table_key, offloaded, n=3, cutoff=0.75)
    if close:
        return (
            f"{table_key} has not been offloaded (the repository has no record of it); "
            f"did you mean {' or '.join(close)}?"
        )
    return (
        f"{table_key} has not been offloaded (the repository has no record of it): "
        f"offload it first with: offload -t {table_key} -x"
    )


__all__ = ["OffloadedTable", "Repository", "RepositoryError"]
