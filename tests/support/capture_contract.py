"""The capture contract every source dialect must meet, run once per dialect.

A dialect's test module subclasses :class:`CaptureContract` (as ``Test...``)
and provides two fixtures:

- ``env``: a :class:`CaptureEnv` for a fresh, empty database;
- ``method``: parametrized over the registered methods the dialect supports,
  so a new method is covered without touching these tests.

The DML scenario (``STEPS``) runs against every target the method captures:
the application table (changelog trigger, origin ``T``) and the updatable view
(origin ``V``). Rows are seeded before capture is enabled, so the view has
rows to update and delete; each step touches its own seed rows, so its
expected changelog rows do not depend on the other steps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from gluon.capture import changelog
from gluon.capture import objects as capture_objects
from gluon.capture.objects import SourceObjectRef
from gluon.errors import SourceError, UnsupportedError, UsageError
from gluon.methods.base import CREATION_ORDER, DML, OBJECT_TYPES, ExtractionMethod, SourceObject
from gluon.naming import TableRef
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect

D = Decimal
Row = tuple[Any, ...]
"""(gl_op, gl_origin, id, name, amount, noted)"""

COLUMNS = "id, name, amount, noted"

SEED: dict[int, tuple[str | None, Decimal | None, dt.date | None]] = {
    1: ("a", D("1.50"), dt.date(2024, 1, 1)),
    2: ("b", D("2.00"), dt.date(2024, 1, 2)),
    3: ("c", D("3.00"), None),
    4: ("d", D("4.00"), dt.date(2024, 1, 4)),
    5: ("e", D("5.00"), dt.date(2024, 1, 5)),
    6: (None, D("6.00"), dt.date(2024, 1, 6)),
    7: ("g", D("7.25"), dt.date(2024, 1, 7)),
    8: ("h", D("8.00"), dt.date(2024, 1, 8)),
    9: (None, D("9.00"), dt.date(2024, 1, 9)),
    10: ("j", D("10.00"), dt.date(2024, 1, 10)),
    11: (None, D("11.00"), dt.date(2024, 1, 11)),
    12: ("l", D("12.00"), dt.date(2024, 1, 12)),
    13: ("m", D("13.00"), dt.date(2024, 1, 13)),
}


def seeded(key: int, **changes: Any) -> tuple[Any, ...]:
    """Seed row ``key`` as (id, name, amount, noted), with ``changes`` applied."""
    name, amount, noted = SEED[key]
    values = {"id": key, "name": name, "amount": amount, "noted": noted, **changes}
    return (values["id"], values["name"], values["amount"], values["noted"])


def deleted(key: int) -> tuple[Any, ...]:
    """What a ``D`` row holds: the key only."""
    return (key, None, None, None)


@dataclass(frozen=True)
class Step:
    """One transaction of DML and the changelog rows it must produce.

    ``expected`` pairs each row with the operation that produced it, so a
    method that does not capture that operation expects no such row.
    """

    name: str
    statements: tuple[str, ...]
    expected: tuple[tuple[DML, str, tuple[Any, ...]], ...] = ()
    ordered: bool = True
    """False: the rows of a multi-row statement come in the database's scan order."""
    rollback: bool = False
    needs_unique_key: bool = False
    table_only: bool = False

    @property
    def operations(self) -> set[DML]:
        """What the statements do (an upsert counts as an insert)."""
        return {DML(statement.split()[0].upper()) for statement in self.statements}


STEPS: tuple[Step, ...] = (
    Step(
        "insert two rows",
        (
            f"INSERT INTO {{target}} ({COLUMNS}) VALUES "
            "(100, 'x', 0.10, '2024-02-01'), (101, NULL, NULL, NULL)",
        ),
        (
            (DML.INSERT, "I", (100, "x", D("0.10"), dt.date(2024, 2, 1))),
            (DML.INSERT, "I", (101, None, None, None)),
        ),
    ),
    Step(
        "update keeping the key",
        ("UPDATE {target} SET name = 'a2', amount = 1.75 WHERE id = 1",),
        ((DML.UPDATE, "U", seeded(1, name="a2", amount=D("1.75"))),),
    ),
    Step(
        "update that changes nothing",
        ("UPDATE {target} SET name = name, amount = amount WHERE id IN (2, 3)",),
    ),
    Step("update to the same value", ("UPDATE {target} SET amount = 2.00 WHERE id = 2",)),
    Step("update NULL to NULL", ("UPDATE {target} SET name = NULL WHERE id = 11",)),
    Step(
        "update NULL to a value",
        ("UPDATE {target} SET name = 'i' WHERE id = 9",),
        ((DML.UPDATE, "U", seeded(9, name="i")),),
    ),
    Step(
        "update a value to NULL",
        ("UPDATE {target} SET amount = NULL WHERE id = 10",),
        ((DML.UPDATE, "U", seeded(10, amount=None)),),
    ),
    Step(
        "update three rows",
        ("UPDATE {target} SET amount = amount + 0.5 WHERE id IN (4, 5, 6)",),
        (
            (DML.UPDATE, "U", seeded(4, amount=D("4.50"))),
            (DML.UPDATE, "U", seeded(5, amount=D("5.50"))),
            (DML.UPDATE, "U", seeded(6, amount=D("6.50"))),
        ),
        ordered=False,
    ),
    Step(
        "update that changes the key",
        ("UPDATE {target} SET id = 70 WHERE id = 7",),
        ((DML.UPDATE, "D", deleted(7)), (DML.UPDATE, "I", seeded(7, id=70))),
    ),
    Step(
        "delete one row",
        ("DELETE FROM {target} WHERE id = 8",),
        ((DML.DELETE, "D", deleted(8)),),
    ),
    Step(
        "delete two rows",
        ("DELETE FROM {target} WHERE id IN (12, 13)",),
        ((DML.DELETE, "D", deleted(12)), (DML.DELETE, "D", deleted(13))),
        ordered=False,
    ),
    Step(
        "upsert: one update, one insert",
        (
            "INSERT INTO {target} (id, name) VALUES (2, 'b2'), (102, 'y') "
            "ON CONFLICT (id) DO UPDATE SET name = excluded.name",
        ),
        (
            (DML.UPDATE, "U", seeded(2, name="b2")),
            (DML.INSERT, "I", (102, "y", None, None)),
        ),
        ordered=False,
        needs_unique_key=True,
        table_only=True,
    ),
    Step(
        "upsert that changes nothing",
        (
            "INSERT INTO {target} (id, name) VALUES (3, 'c') "
            "ON CONFLICT (id) DO UPDATE SET name = excluded.name",
        ),
        needs_unique_key=True,
        table_only=True,
    ),
    Step(
        "rolled back",
        (
            f"INSERT INTO {{target}} ({COLUMNS}) VALUES (103, 'z', 1, NULL)",
            "UPDATE {target} SET name = 'gone' WHERE id = 3",
            "DELETE FROM {target} WHERE id = 5",
        ),
        rollback=True,
    ),
)


@dataclass
class CaptureEnv:
    """What a dialect's test module provides to the contract."""

    source: SourceDialect
    schema: str
    """The application schema, as ``-t`` takes it."""
    create_table: Callable[[str, bool], None]
    """Create table ``name`` (id, name, amount, noted); the bool asks for a primary key on id."""
    snapshot: Callable[[], Any]
    """The database's catalog (every user object with its definition), comparable with ==."""
    names: dict[SourceObject, tuple[str, str]]
    """Expected (schema, name) of each object for table ``orders``."""
    extra: dict[str, Any] = field(default_factory=dict)

    def run(self, *statements: str, rollback: bool = False) -> None:
        with self.source.engine.connect() as connection:
            transaction = connection.begin()
            try:
                for statement in statements:
                    connection.execute(sa.text(statement))
            except BaseException:
                transaction.rollback()
                raise
            if rollback:
                transaction.rollback()
            else:
                transaction.commit()

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        with self.source.engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(statement))]

    def seed(self, table: str) -> None:
        values = ", ".join(
            f"({key}, {_literal(name)}, {_literal(amount)}, {_literal(noted)})"
            for key, (name, amount, noted) in SEED.items()
        )
        self.run(f"INSERT INTO {self.schema}.{table} ({COLUMNS}) VALUES {values}")

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        return self.query(f"SELECT {COLUMNS} FROM {table} ORDER BY id")


def _literal(value: Any) -> str:
    return "NULL" if value is None else f"'{value}'"


@dataclass
class Enabled:
    """A table with capture enabled."""

    env: CaptureEnv
    spec: TableSpec
    method: type[ExtractionMethod]
    objects: list[SourceObjectRef]

    def find(self, kind: SourceObject) -> SourceObjectRef | None:
        return next((item for item in self.objects if item.kind is kind), None)

    @property
    def table(self) -> str:
        return f"{self.spec.schema}.{self.spec.name}"

    @property
    def log(self) -> str:
        log = self.find(SourceObject.CHANGELOG_TABLE)
        assert log is not None
        return f"{log.schema}.{log.name}"

    @property
    def view(self) -> str:
        view = self.find(SourceObject.UPDATABLE_VIEW)
        assert view is not None
        return f"{view.schema}.{view.name}"

    def targets(self) -> list[tuple[str, str]]:
        """(target, origin) for every path the method captures; the view first."""
        found = []
        if self.method.has_object(SourceObject.UPDATABLE_TRIGGER):
            found.append((self.view, "V"))
        if self.method.has_object(SourceObject.CHANGELOG_TRIGGER):
            found.append((self.table, "T"))
        return found

    def changes(self) -> list[Row]:
        """Every changelog row as (gl_op, gl_origin, id, name, amount, noted), in gl_seq order."""
        table = changelog.read_changes(self.env.source, self.spec, self.objects, limit=None)
        origins = dict(self.env.query(f"SELECT gl_seq, gl_origin FROM {self.log}"))
        return [
            (
                row["gl_op"],
                origins[row["gl_seq"]],
                row["id"],
                row["name"],
                row["amount"],
                row["noted"],
            )
            for row in table.to_pylist()
        ]

    def seqs(self) -> list[int]:
        table = changelog.read_changes(self.env.source, self.spec, self.objects, limit=None)
        return [int(seq) for seq in table.column("gl_seq").to_pylist()]


def enable(
    env: CaptureEnv,
    method: type[ExtractionMethod],
    *,
    table: str = "orders",
    primary_key: bool = True,
    keys: tuple[str, ...] = ("id",),
    seed: bool = True,
) -> Enabled:
    env.create_table(table, primary_key)
    if seed:
        env.seed(table)
    ref = TableRef(env.schema, table)
    spec = env.source.describe_table(ref)
    objects = capture_objects.plan_source_objects(env.source, ref, method)
    capture_objects.create_source_objects(env.source, spec, method, objects, keys)
    return Enabled(env, spec, method, objects)


def _expected(step: Step, method: type[ExtractionMethod], origin: str) -> list[Row]:
    """The rows ``step`` adds: captured operations in full; uncaptured table DML by old key.

    A method that reports uncaptured DML (CHANGELOG_INSERT) records an update as one
    ``U`` row and a delete as one ``D`` row, each holding the old key only.
    """
    rows: list[Row] = []
    for dml, op, values in step.expected:
        if dml in method.captured_dml:
            rows.append((op, origin, *values))
        elif origin == "T" and dml in method.uncaptured_dml_reported() and op != "I":
            rows.append(("U" if dml is DML.UPDATE else "D", origin, *deleted(values[0])))
    return rows


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row[2], row[0]))


class CaptureContract:
    """Capture behaviour shared by every dialect; see the module docstring."""

    # -- planning ------------------------------------------------------------------------------

    def test_plan_names_the_declared_objects(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.create_table("orders", True)
        planned = capture_objects.plan_source_objects(
            env.source, TableRef(env.schema, "ORDERS"), method
        )
        kinds = [
            kind
            for kind in CREATION_ORDER
            if method.has_object(kind) and kind not in env.source.implicit_source_objects
        ]
        schemas = sorted({env.names[kind][0] for kind in kinds}) if env.source.has_schemas else []
        expected = [
            SourceObjectRef(SourceObject.HYBRID_SCHEMA, schema, schema, "SCHEMA")
            for schema in schemas
        ] + [SourceObjectRef(kind, *env.names[kind], OBJECT_TYPES[kind]) for kind in kinds]
        assert planned == expected
        assert env.snapshot() == env.snapshot()  # planning creates nothing

    # -- the DML scenario ----------------------------------------------------------------------

    @pytest.mark.parametrize("keyed", ["primary key", "key columns"])
    def test_changelog_rows(
        self, env: CaptureEnv, method: type[ExtractionMethod], keyed: str
    ) -> None:
        primary_key = keyed == "primary key"
        enabled = enable(
            env, method, primary_key=primary_key, keys=("id",) if primary_key else ("ID",)
        )
        before = env.rows(enabled.table)
        for target, origin in enabled.targets():
            for step in STEPS:
                if (step.needs_unique_key and not primary_key) or (
                    step.table_only and origin == "V"
                ):
                    continue
                seen = len(enabled.changes())
                statements = [sql.format(target=target) for sql in step.statements]
                refused = origin == "V" and not step.operations <= method.captured_dml
                if refused and not step.rollback:
                    with pytest.raises(sa.exc.DBAPIError, match="not captured"):
                        env.run(*statements)
                else:
                    try:
                        env.run(*statements, rollback=step.rollback)
                    except sa.exc.DBAPIError:
                        assert refused, f"{step.name} on {target} failed"
                added = enabled.changes()[seen:]
                wanted = _expected(step, method, origin)
                if step.ordered:
                    assert added == wanted, f"{step.name} on {target}"
                else:
                    assert _sorted(added) == _sorted(wanted), f"{step.name} on {target}"
            if origin == "V":
                assert env.rows(enabled.table) == before, "DML on the view reached the table"
        assert changelog.count_changes(env.source, enabled.objects) == len(enabled.changes())

    def test_view_shows_the_application_table(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        enabled = enable(env, method)
        if method.has_object(SourceObject.UPDATABLE_VIEW):
            assert env.rows(enabled.view) == env.rows(enabled.table)
        else:
            assert enabled.find(SourceObject.UPDATABLE_VIEW) is None

    # -- reading and deleting changes ------------------------------------------------------------

    def test_read_changes(self, env: CaptureEnv, method: type[ExtractionMethod]) -> None:
        enabled = enable(env, method, seed=False)
        target = enabled.targets()[0][0]
        env.run(f"INSERT INTO {target} ({COLUMNS}) VALUES (1, 'a', 1.5, '2024-01-01')")
        env.run(f"INSERT INTO {target} ({COLUMNS}) VALUES (2, NULL, NULL, NULL)")
        env.run(f"INSERT INTO {target} ({COLUMNS}) VALUES (3, 'c', 3, '2024-01-03')")
        every = changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=None)
        assert every.schema.names == ["id", "name", "amount", "noted", "gl_seq", "gl_op"]
        assert every.schema == enabled.spec.arrow_schema.append(
            capture_objects.change_fields()[0]
        ).append(capture_objects.change_fields()[1])
        assert str(every.schema.field("amount").type) == "decimal128(12, 2)"
        assert str(every.schema.field("noted").type) == "date32[day]"
        rows = every.to_pylist()
        assert [(row["id"], row["gl_op"]) for row in rows] == [(1, "I"), (2, "I"), (3, "I")]
        assert rows[0]["amount"] == D("1.50") and rows[0]["noted"] == dt.date(2024, 1, 1)
        seqs = [row["gl_seq"] for row in rows]
        assert seqs == sorted(set(seqs))
        limited = changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=2)
        assert limited.to_pylist() == rows[:2]
        more = changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=10)
        assert more.to_pylist() == rows
        assert (
            changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=0).num_rows == 0
        )
        assert changelog.count_changes(env.source, enabled.objects) == 3

    def test_delete_exactly_the_rows_read(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        enabled = enable(env, method, seed=False)
        target = enabled.targets()[0][0]
        env.run(*(f"INSERT INTO {target} (id, name) VALUES ({key}, 'r')" for key in (1, 2, 3)))
        read = enabled.seqs()
        env.run(f"INSERT INTO {target} (id, name) VALUES (4, 'after the read')")
        later = [seq for seq in enabled.seqs() if seq not in read]
        assert len(later) == 1 and later[0] > max(read)
        assert changelog.delete_changes(env.source, enabled.objects, read[1:]) == 2
        assert enabled.seqs() == [read[0], *later]
        assert changelog.delete_changes(env.source, enabled.objects, read) == 1  # only one was left
        assert changelog.delete_changes(env.source, enabled.objects, read) == 0
        assert changelog.delete_changes(env.source, enabled.objects, []) == 0
        assert enabled.seqs() == later

    def test_delete_many_rows_in_chunks(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        enabled = enable(env, method, seed=False)
        target = enabled.targets()[0][0]
        count = changelog.RUNS_PER_DELETE * 6 + 34
        with env.source.engine.begin() as connection:
            connection.execute(
                sa.text(f"INSERT INTO {target} (id, name) VALUES (:id, :name)"),
                [{"id": key, "name": f"n{key}"} for key in range(count)],
            )
        assert changelog.count_changes(env.source, enabled.objects) == count
        seqs = enabled.seqs()
        # Every third value is not shipped: more runs than one statement takes, each run two
        # values; a run must not reach over the value between it and the next.
        kept = seqs[2::3]
        shipped = sorted(set(seqs) - set(kept))
        assert changelog.delete_changes(env.source, enabled.objects, shipped) == len(shipped)
        assert enabled.seqs() == kept
        assert changelog.delete_changes(env.source, enabled.objects, kept[:-1]) == len(kept) - 1
        assert enabled.seqs() == kept[-1:]

    # -- enable / disable ------------------------------------------------------------------------

    def test_enable_disable_round_trip(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.create_table("orders", True)
        before = env.snapshot()
        ref = TableRef(env.schema, "orders")
        spec = env.source.describe_table(ref)
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        assert all(_exists(env.source, item) for item in objects)
        assert env.snapshot() != before or not objects
        env.run(f"INSERT INTO {env.schema}.orders (id, name) VALUES (1, 'pending')")
        capture_objects.drop_source_objects(env.source, objects)
        assert not any(_exists(env.source, item) for item in objects)
        assert env.snapshot() == before
        capture_objects.drop_source_objects(env.source, objects)  # idempotent
        assert env.snapshot() == before

    def test_create_twice_gives_the_same_objects(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        enabled = enable(env, method)
        env.run(f"INSERT INTO {enabled.targets()[0][0]} (id, name) VALUES (50, 'kept')")
        once = env.snapshot()
        capture_objects.create_source_objects(
            env.source, enabled.spec, method, enabled.objects, ("id",)
        )
        assert env.snapshot() == once
        assert [row[2] for row in enabled.changes()] == [50], "a re-run must keep the changelog"

    @pytest.mark.parametrize("done", ["first object", "all but the last"])
    def test_create_completes_a_run_that_died_halfway(
        self, env: CaptureEnv, method: type[ExtractionMethod], done: str
    ) -> None:
        env.create_table("orders", True)
        ref = TableRef(env.schema, "orders")
        spec = env.source.describe_table(ref)
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        clean = env.snapshot()
        capture_objects.drop_source_objects(env.source, objects)
        crashed = objects[:1] if done == "first object" else objects[:-1]
        capture_objects.create_source_objects(env.source, spec, method, crashed, ("id",))
        capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        assert env.snapshot() == clean
        enabled = Enabled(env, spec, method, objects)
        env.run(f"INSERT INTO {enabled.targets()[0][0]} (id, name) VALUES (1, 'captured')")
        assert [row[:3] for row in enabled.changes()] == [("I", enabled.targets()[0][1], 1)]

    # -- refusals --------------------------------------------------------------------------------

    def test_refuses_missing_or_unknown_key_columns(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.create_table("orders", False)
        ref = TableRef(env.schema, "orders")
        spec = env.source.describe_table(ref)
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        before = env.snapshot()
        with pytest.raises(UsageError, match="--incremental-key-columns"):
            capture_objects.create_source_objects(env.source, spec, method, objects, ())
        with pytest.raises(UsageError, match="NOPE"):
            capture_objects.create_source_objects(env.source, spec, method, objects, ("id", "NOPE"))
        assert env.snapshot() == before

    def test_refuses_columns_named_like_changelog_columns(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.run(f"CREATE TABLE {env.schema}.clash (id INTEGER PRIMARY KEY, gl_op CHAR(1))")
        ref = TableRef(env.schema, "clash")
        spec = env.source.describe_table(ref)
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        with pytest.raises(UnsupportedError, match="gl_op"):
            capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))

    def test_a_failing_statement_is_one_clear_line(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.create_table("orders", True)
        ref = TableRef(env.schema, "orders")
        spec = env.source.describe_table(ref)
        broken = replace(spec.columns[0], source_type="INTEGER)")  # a type the database rejects
        spec = replace(spec, columns=(broken, *spec.columns[1:]))
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        with pytest.raises(SourceError) as raised:
            capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(f"{env.source.name} script create_changelog_table failed: ")


def _exists(source: SourceDialect, item: SourceObjectRef) -> bool:
    return capture_objects.object_exists(source, item)


def snapshot_rows(source: SourceDialect, statement: str) -> list[tuple[Any, ...]]:
    with source.engine.connect() as connection:
        return sorted(tuple(row) for row in connection.execute(sa.text(statement)))
