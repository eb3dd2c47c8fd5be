"""Small helpers every repository module shares."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any, Generic, TypeVar

import sqlalchemy as sa


def now() -> dt.datetime:
    """The repository's clock: every timestamp it records is naive UTC."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


RecordT = TypeVar("RecordT")

KEY = "table_key"
"""The column an upserted table is keyed by (its primary key or a unique constraint)."""


def upsert(engine: sa.Engine, table: sa.Table, key: str, values: dict[str, Any]) -> None:
    """Insert ``values``, or replace the row whose ``table_key`` is ``key``.

    Two nodes sharing the repository that save the same new key at once both succeed (the
    later one wins) instead of one failing on the unique key: one native statement where
    the dialect has one, else :func:`insert_or_update`.
    """
    row = {**values, KEY: key}
    statement = upsert_statement(engine.dialect, table, row)
    if statement is None:
        insert_or_update(engine, table, key, row)
        return
    with engine.begin() as connection:
        connection.execute(statement)


UPSERT_ATTEMPTS = 5
"""Insert/update rounds before giving up: each round fails only when another node deleted
the row between our failed insert and our update."""


def insert_or_update(engine: sa.Engine, table: sa.Table, key: str, row: dict[str, Any]) -> None:
    """Insert ``row``; when the unique key refuses it, update the row that holds ``key``.

    For a dialect without an atomic upsert: Oracle's ``MERGE`` is not one (two sessions
    both take WHEN NOT MATCHED and one gets ORA-00001), and update-then-insert loses the
    same race. An insert waits for a concurrent uncommitted insert of the key and fails
    once it commits: the update then finds the row.

    Raises:
        sqlalchemy.exc.IntegrityError: the row breaks another constraint.
    """
    refused: sa.exc.IntegrityError | None = None
    for _ in range(UPSERT_ATTEMPTS):
        try:
            with engine.begin() as connection:
                connection.execute(table.insert().values(**row))
            return
        except sa.exc.IntegrityError as exc:
            refused = exc
        with engine.begin() as connection:
            updated = connection.execute(table.update().where(table.c[KEY] == key).values(**row))
            if updated.rowcount:
                return
    assert refused is not None
    raise refused


def upsert_statement(
    dialect: sa.Dialect, table: sa.Table, row: dict[str, Any]
) -> sa.Executable | None:
    """The native upsert of ``row`` into ``table`` keyed by ``table_key`` on ``dialect``:
    ``INSERT ... ON CONFLICT DO UPDATE`` (SQLite, PostgreSQL); None for a dialect without an
    atomic one (Oracle: see :func:`insert_or_update`)."""
    changed = [name for name in row if name != KEY]
    if dialect.name in ("sqlite", "postgresql"):
        # Imported here: the PostgreSQL dialect module is a start-up cost for a SQLite repository.
        from sqlalchemy.dialects import postgresql, sqlite

        insert = (sqlite.insert if dialect.name == "sqlite" else postgresql.insert)(table)
        insert = insert.values(**row)
        return insert.on_conflict_do_update(
            index_elements=[table.c[KEY]],
            set_={name: insert.excluded[name] for name in changed},
        )
    return None


# --- mapped records ----------------------------------------------------------------------
# A repository record is a frozen dataclass whose fields are the columns of its table, by
# name. One RecordMapping reads rows into records and records into rows; a field whose
# column has another name or stores another type (JSON text) says so with a Converted.
# (SQLAlchemy's ORM mapping would need mutable, non-slotted classes and sessions; these
# records are frozen values read and written with Core statements.)


@dataclass(frozen=True, slots=True)
class Converted:
    """How one record field is stored: in ``column``, as ``dump(value)``, read by ``load``."""

    column: str
    load: Callable[[Any], Any] = lambda value: value
    dump: Callable[[Any], Any] = lambda value: value


class RecordMapping(Generic[RecordT]):
    """Builds ``record`` dataclasses from rows by field name, and rows from records."""

    def __init__(self, record: type[RecordT], **converted: Converted) -> None:
        # RecordT is any dataclass; typing cannot say "a dataclass type" without typeshed.
        names = [field.name for field in fields(record)]  # type: ignore[arg-type]
        unknown = set(converted) - set(names)
        if unknown:
            raise ValueError(f"not fields of {record.__name__}: {sorted(unknown)}")
        self.record = record
        self.converted = {name: converted.get(name, Converted(name)) for name in names}

    def from_row(self, row: Mapping[Any, Any]) -> RecordT:
        """The record of ``row`` (a row mapping; columns no field names are ignored)."""
        return self.record(
            **{name: how.load(row[how.column]) for name, how in self.converted.items()}
        )

    def to_row(self, record: RecordT) -> dict[str, Any]:
        """The column values of ``record``."""
        return self.values(**{name: getattr(record, name) for name in self.converted})

    def values(self, **field_values: Any) -> dict[str, Any]:
        """The column values of some record fields, by field name (to update only those)."""
        return {
            self.converted[name].column: self.converted[name].dump(value)
            for name, value in field_values.items()
        }


def json_text(column: str, load: Callable[[Any], Any] = lambda value: value) -> Converted:
    """A field stored as JSON text in ``column``; ``load`` turns the decoded JSON into it."""
    return Converted(column, load=lambda text: load(json.loads(text)), dump=_to_json)


def json_tuple(column: str, of: Callable[..., Any] | None = None) -> Converted:
    """A tuple field stored as a JSON list in ``column``; with ``of`` (a dataclass), each
    element is stored as a JSON object of its fields and read back with ``of(**element)``."""

    def load(items: list[Any]) -> tuple[Any, ...]:
        return tuple(items) if of is None else tuple(of(**element) for element in items)

    return json_text(column, load)


def _to_json(value: Any) -> str:
    if isinstance(value, tuple | list):
        value = [
            asdict(item) if is_dataclass(item) and not isinstance(item, type) else item
            for item in value
        ]
    return json.dumps(value)
