"""A sales table whose older rows live only in the lake, and a model of what patching does.

``SalesTable`` drives ``<schema>.sales`` (id, sold_on, region, amount) in a real
PostgreSQL or SQLite source with incremental update enabled by the real CLI.
``dropped_from_source`` models "offloaded, then dropped from the source": the
rows leave the application table and the lake keeps them. For methods with a
changelog trigger (UPDATABLE_CHANGELOG) the trigger must not see that delete:
on PostgreSQL it is disabled around the delete (``ALTER TABLE ... DISABLE
TRIGGER``, what a DBA dropping a partition would see); SQLite cannot disable a
trigger, so gluon's own templates drop it and create it again around the
delete.

``PatchModel`` holds what each place must show: the application table, the
staged lake rows, the lake now and the lake after the next extraction.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from typer.testing import Result

from gluon import source as sources
from gluon.capture import objects as source_objects
from gluon.config import load_settings
from gluon.extract.feeds import capture_objects
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.repo import Repository
from support.incremental import lake_rows

CENT = decimal.Decimal("0.01")
Row = tuple[int, dt.date, str | None, decimal.Decimal | None]
RunCli = Callable[..., Result]
REGIONS = ["EMEA", "APAC", "AMER", None]
FIRST_DAY = dt.date(2017, 1, 1)
MONTHS = [
    (dt.date(2017, m, 1), dt.date(2017, m + 1, 1) - dt.timedelta(days=1)) for m in (1, 2, 3, 4)
]


def canonical(values: Iterable[Any]) -> Row:
    """(id, sold_on, region, amount) as comparable values, whatever the driver returned."""
    key, sold_on, region, amount = values
    if isinstance(sold_on, str):
        sold_on = dt.date.fromisoformat(sold_on[:10])
    elif isinstance(sold_on, dt.datetime):
        sold_on = sold_on.date()
    if amount is not None:
        exact = decimal.Decimal(repr(amount) if isinstance(amount, float) else amount)
        amount = exact.quantize(CENT)
    return (int(key), sold_on, region, amount)


def by_key(rows: Iterable[Row]) -> dict[int, Row]:
    found: dict[int, Row] = {}
    for row in rows:
        assert row[0] not in found, f"key {row[0]} shows twice"
        found[row[0]] = row
    return found


@dataclass
class SalesTable:
    dialect: str
    url: str
    schema: str
    method: str = ""
    objects: dict[SourceObject, str] = field(default_factory=dict)

    @property
    def engine(self) -> sa.Engine:
        return sa.create_engine(self.url)

    @property
    def table(self) -> str:
        return f"{self.schema}.sales"

    @property
    def view(self) -> str:
        return self.objects[SourceObject.UPDATABLE_VIEW]

    @property
    def staging(self) -> str:
        return self.objects[SourceObject.LAKE_ROWS_TABLE]

    @property
    def log(self) -> str:
        return self.objects[SourceObject.CHANGELOG_TABLE]

    # -- setting up -------------------------------------------------------------------------

    def create(self, rows: Iterable[Row]) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.text(
                    f"CREATE TABLE {self.table} (id INTEGER PRIMARY KEY, sold_on DATE NOT NULL, "
                    "region VARCHAR(10), amount NUMERIC(12,2))"
                )
            )
        self.insert(self.table, rows)

    def enable(self, run_cli: RunCli, method: str) -> None:
        result = run_cli(
            "offload",
            "-t",
            self.table,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
        )
        assert result.exit_code == 0, result.stderr
        self.method = method
        state = Repository(load_settings().repo_url).incremental.get_state(self.table.upper())
        assert state is not None
        self.objects = {
            SourceObject(item.kind): f"{item.schema}.{item.name}" for item in state.source_objects
        }

    # -- statements -------------------------------------------------------------------------

    def run(self, statement: str, params: dict[str, Any] | None = None) -> int:
        with self.engine.begin() as db:
            return db.execute(sa.text(statement), params or {}).rowcount

    def insert(self, target: str, rows: Iterable[Row]) -> None:
        values = [
            {
                "id": key,
                "sold_on": sold_on.isoformat(),
                "region": region,
                "amount": None if amount is None else str(amount),
            }
            for key, sold_on, region, amount in rows
        ]
        if values:
            with self.engine.begin() as db:
                db.execute(
                    sa.text(
                        f"INSERT INTO {target} (id, sold_on, region, amount) "
                        "VALUES (:id, :sold_on, :region, :amount)"
                    ),
                    values,
                )

    def rows(self, target: str) -> dict[int, Row]:
        with self.engine.connect() as db:
            result = db.execute(sa.text(f"SELECT id, sold_on, region, amount FROM {target}"))
            return by_key(canonical(row) for row in result)

    def lake(self) -> dict[int, Row]:
        rows = lake_rows(f"SELECT id, sold_on, region, amount FROM {self.schema.lower()}.sales")
        return by_key(canonical(row.values()) for row in rows)

    def changes(self) -> list[tuple[str, str, int]]:
        """The changelog as (gl_op, gl_origin, id), in gl_seq order."""
        with self.engine.connect() as db:
            result = db.execute(
                sa.text(f"SELECT gl_op, gl_origin, id FROM {self.log} ORDER BY gl_seq")
            )
            return [(op.strip(), origin.strip(), int(key)) for op, origin, key in result]

    def dropped_from_source(self, keys: Iterable[int]) -> None:
        """Delete ``keys`` from the application table without any trigger recording it."""
        keys = sorted(keys)
        if not keys:
            return
        delete = f"DELETE FROM {self.table} WHERE id IN ({', '.join(map(str, keys))})"
        method = registered_methods()[self.method]
        if not method.has_object(SourceObject.CHANGELOG_TRIGGER):
            self.run(delete)
            return
        trigger = self.objects[SourceObject.CHANGELOG_TRIGGER].split(".")[1]
        if self.dialect == "postgresql":
            with self.engine.begin() as db:
                db.execute(sa.text(f"ALTER TABLE {self.table} DISABLE TRIGGER {trigger}"))
                db.execute(sa.text(delete))
                db.execute(sa.text(f"ALTER TABLE {self.table} ENABLE TRIGGER {trigger}"))
            return
        settings = load_settings()
        state = Repository(settings.repo_url).incremental.get_state(self.table.upper())
        assert state is not None
        objects = capture_objects(state)
        source = sources.connect(self.url)
        found = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TRIGGER)
        source.execute_script("drop_changelog_trigger", object=found)
        self.run(delete)
        spec = source.describe_table(TableRef(self.schema, "sales"))
        source_objects.create_source_objects(source, spec, method, objects, state.key_columns)
        source.engine.dispose()

    # -- the CLI ----------------------------------------------------------------------------

    def stage(self, run_cli: RunCli, predicate: str) -> Result:
        result = run_cli(
            "offload", "-t", self.table, "-x", f"--incremental-stage-lake-rows={predicate}"
        )
        assert result.exit_code == 0, result.stderr
        return result

    def extract(self, run_cli: RunCli) -> Result:
        result = run_cli("offload", "-t", self.table, "-x", "--incremental-run-extraction")
        assert result.exit_code == 0, result.stderr
        return result


def sales_rows(rng: random.Random, count: int, first_key: int = 1) -> list[Row]:
    """``count`` rows spread over January to April 2017; amounts are whole numbers."""
    rows = []
    for key in range(first_key, first_key + count):
        sold_on = FIRST_DAY + dt.timedelta(days=rng.randrange(120))
        amount = None if rng.random() < 0.1 else decimal.Decimal(rng.randint(1, 999)).quantize(CENT)
        rows.append((key, sold_on, rng.choice(REGIONS), amount))
    return rows


@dataclass
class PatchModel:
    """What the application table, the staged rows and the lake must hold."""

    app: dict[int, Row]
    lake_now: dict[int, Row]
    staged: dict[int, Row] = field(default_factory=dict)
    lake_next: dict[int, Row] = field(default_factory=dict)
    pending: set[int] = field(default_factory=set)
    """Keys with table-trigger changes not yet extracted."""

    def __post_init__(self) -> None:
        self.lake_next = dict(self.lake_now)

    def view(self) -> dict[int, Row]:
        """The updatable view: application rows, then staged rows with other keys."""
        shown = {key: row for key, row in self.staged.items() if key not in self.app}
        shown.update(self.app)
        return shown

    def stage(self, matches: Callable[[Row], bool]) -> None:
        self.staged = {
            key: row
            for key, row in self.lake_now.items()
            if matches(row) and key not in self.app and key not in self.pending
        }

    def extracted(self) -> None:
        self.lake_now = dict(self.lake_next)
        self.pending.clear()

    # -- changes through the view -----------------------------------------------------------

    def patched(self, old: Row, new: Row) -> None:
        """An UPDATE through the view of the row ``old`` (as the view showed it)."""
        if old == new:
            return
        staged = old[0] not in self.app
        self.lake_next.pop(old[0], None)
        self.lake_next[new[0]] = new
        if staged:
            self.staged.pop(old[0], None)
            self.staged[new[0]] = new

    def deleted(self, old: Row) -> None:
        self.lake_next.pop(old[0], None)
        if old[0] not in self.app:
            self.staged.pop(old[0], None)

    def inserted(self, new: Row) -> None:
        self.lake_next[new[0]] = new
        if new[0] not in self.app:
            self.staged[new[0]] = new

    # -- changes to the application table ---------------------------------------------------

    def table_changed(self, old: Row | None, new: Row | None, *, captured: bool) -> None:
        if old is not None:
            self.app.pop(old[0])
        if new is not None:
            self.app[new[0]] = new
        if not captured:
            return
        if old is not None and (new is None or new[0] != old[0]):
            self.lake_next.pop(old[0], None)
            self.pending.add(old[0])
        if new is not None:
            self.lake_next[new[0]] = new
            self.pending.add(new[0])
