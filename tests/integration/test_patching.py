"""Patching rows that exist only in the lake, through the updatable view (docs/patching.md).

Real PostgreSQL and SQLite sources, the real CLI, embedded Sail and Delta. A
table is offloaded FULL with an UPDATABLE method, then some of its rows are
dropped from the source without the capture seeing it (see
``support.patching``), so they exist only in the lake. They are staged with
``--incremental-stage-lake-rows``, patched with plain DML on the updatable
view, extracted, and the lake's user view is compared with the expected state
row for row. The application table never changes through the view.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import SEED, postgres_source
from support.patching import (
    CENT,
    MONTHS,
    PatchModel,
    Row,
    SalesTable,
    sales_rows,
)
from typer.testing import Result

from gluon import source as sources
from gluon.capture import objects as capture_objects
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject, ViewKind
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec

RunCli = Callable[..., Result]

PATCH_METHODS = sorted(
    name
    for name, method in registered_methods().items()
    if method.has_object(SourceObject.LAKE_ROWS_TABLE)
)
MERGING = [name for name in PATCH_METHODS if registered_methods()[name].view_kind is ViewKind.MERGE]
JANUARY = "column(SOLD_ON) >= date(2017-01-01) and column(SOLD_ON) <= date(2017-01-31)"
FEBRUARY = "column(sold_on) >= date(2017-02-01) and column(sold_on) < date(2017-03-01)"


@pytest.fixture(params=["sqlite", "postgresql"])
def sales(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> SalesTable:
    if request.param == "sqlite":
        table = SalesTable("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    else:
        source = postgres_source(request.getfixturevalue("pg_url"))
        table = SalesTable("postgresql", source.url, source.schema)
    monkeypatch.setenv("GLUON_SOURCE_URL", table.url)
    return table


def in_month(row: Row, month: int) -> bool:
    first, last = MONTHS[month - 1]
    return first <= row[1] <= last


def times(amount: decimal.Decimal | None, factor: str) -> decimal.Decimal | None:
    return None if amount is None else (amount * decimal.Decimal(factor)).quantize(CENT)


def offloaded(
    sales: SalesTable, run_cli: RunCli, method: str, *, drop_months: tuple[int, ...]
) -> PatchModel:
    """The sales table offloaded with ``method``; the rows of ``drop_months`` then dropped."""
    rows = sales_rows(random.Random(SEED), 60)
    sales.create(rows)
    sales.enable(run_cli, method)
    everything = {row[0]: row for row in rows}
    model = PatchModel(app=dict(everything), lake_now=dict(everything))
    dropped = [key for key, row in everything.items() if any(in_month(row, m) for m in drop_months)]
    assert dropped, "the seed put no rows in the months to drop"
    sales.dropped_from_source(dropped)
    for key in dropped:
        model.table_changed(everything[key], None, captured=False)
    assert sales.rows(sales.table) == model.app
    assert sales.lake() == model.lake_now
    assert sales.changes() == []
    return model


def assert_matches(sales: SalesTable, model: PatchModel, where: str) -> None:
    assert sales.rows(sales.table) == model.app, f"{where}: the application table changed"
    assert sales.rows(sales.staging) == model.staged, f"{where}: staged rows"
    assert sales.rows(sales.view) == model.view(), f"{where}: the updatable view"


# -- the spec's Example 3: raise a month of lake-only sales by 10% ----------------------------


@pytest.mark.parametrize("method", MERGING)
def test_example_3_patch_a_month_that_is_only_in_the_lake(
    sales: SalesTable, run_cli: RunCli, method: str
) -> None:
    model = offloaded(sales, run_cli, method, drop_months=(1, 2))
    assert sales.rows(sales.view) == model.app  # nothing staged yet: the lake rows are invisible

    result = sales.stage(run_cli, JANUARY)
    model.stage(lambda row: in_month(row, 1))
    assert model.staged
    assert f"staged {len(model.staged)} of {len(model.staged)} matching lake rows" in result.stdout
    assert_matches(sales, model, "after staging January")

    # Example 3, written for gluon: UPDATE the view, the trigger records full row images.
    first, last = MONTHS[0]
    view = model.view()
    sales.run(
        f"UPDATE {sales.view} SET amount = amount * 1.1 WHERE sold_on BETWEEN :first AND :last",
        {"first": first.isoformat(), "last": last.isoformat()},
    )
    for row in sorted(view.values()):
        if in_month(row, 1):
            model.patched(row, (*row[:3], times(row[3], "1.1")))
    # A NULL amount stays NULL: that update changes nothing and is not recorded.
    expected = [
        ("U", "V", key)
        for key, row in sorted(view.items())
        if in_month(row, 1) and row[3] is not None
    ]
    assert sorted(sales.changes()) == expected
    assert_matches(sales, model, "after Example 3")

    # Patches compose before an extraction: a second raise of one row starts from the first.
    twice = next(row for row in sorted(model.staged.values()) if row[3] is not None)
    sales.run(f"UPDATE {sales.view} SET amount = amount * 1.1 WHERE id = :id", {"id": twice[0]})
    model.patched(twice, (*twice[:3], times(twice[3], "1.1")))
    assert model.lake_next[twice[0]][3] == times(model.lake_now[twice[0]][3], "1.21")

    # A key change is a delete plus an insert; a delete removes the staged copy too.
    moved, gone = sorted(model.staged.values())[-2:]
    sales.run(f"UPDATE {sales.view} SET id = 1000 WHERE id = :id", {"id": moved[0]})
    model.patched(moved, (1000, *moved[1:]))
    sales.run(f"DELETE FROM {sales.view} WHERE id = :id", {"id": gone[0]})
    model.deleted(gone)
    assert sales.changes()[-3:] == [("D", "V", moved[0]), ("I", "V", 1000), ("D", "V", gone[0])]
    assert_matches(sales, model, "after more patches")

    if method == "UPDATABLE_CHANGELOG":
        # The table trigger still captures the application's own changes, apart from patches.
        row = next(iter(sorted(model.app.values())))
        sales.run(f"UPDATE {sales.table} SET region = 'TABLE' WHERE id = :id", {"id": row[0]})
        model.table_changed(row, (row[0], row[1], "TABLE", row[3]), captured=True)
        assert sales.changes()[-1] == ("U", "T", row[0])
        assert {origin for _, origin, _ in sales.changes()[:-1]} == {"V"}

    extracted = sales.extract(run_cli)
    model.extracted()
    assert sales.lake() == model.lake_now, "the lake does not show the patches"
    assert sales.changes() == []
    assert (
        f"Extracted {len(expected) + 4 + (method == 'UPDATABLE_CHANGELOG')} changes"
        in extracted.stdout
    )

    # Staged rows stay, holding what was shipped; the next extraction ships nothing again.
    assert_matches(sales, model, "after the extraction")
    assert "Extracted 0 changes" in sales.extract(run_cli).stdout
    assert sales.lake() == model.lake_now

    # Unstaging empties the lake-rows table only.
    result = sales.stage(run_cli, "none")
    assert f"removed {len(model.staged)} staged lake rows" in result.stdout
    model.staged = {}
    assert_matches(sales, model, "after unstaging")
    assert sales.lake() == model.lake_now


# -- the spec's Example 4: insert missing rows ------------------------------------------------


@pytest.mark.parametrize("method", PATCH_METHODS)
def test_example_4_insert_missing_rows(sales: SalesTable, run_cli: RunCli, method: str) -> None:
    model = offloaded(sales, run_cli, method, drop_months=(2,))
    sales.stage(run_cli, FEBRUARY)
    model.stage(lambda row: in_month(row, 2))
    assert_matches(sales, model, "after staging February")

    # Add individual rows.
    missing = [
        (500, dt.date(2017, 2, 14), "EMEA", decimal.Decimal("12.50")),
        (501, dt.date(2017, 2, 15), None, None),
    ]
    sales.insert(sales.view, missing)
    # Add the results of a query.
    sales.run(
        f"CREATE TABLE {sales.schema}.late_sales "
        "(id INTEGER, sold_on DATE, region VARCHAR(10), amount NUMERIC(12,2))"
    )
    late = [
        (600 + day, dt.date(2017, 2, day), "APAC", decimal.Decimal(day * 3).quantize(CENT))
        for day in (3, 9, 27)
    ]
    sales.insert(f"{sales.schema}.late_sales", late)
    sales.run(
        f"INSERT INTO {sales.view} (id, sold_on, region, amount) "
        f"SELECT id, sold_on, region, amount FROM {sales.schema}.late_sales"
    )
    for row in [*missing, *late]:
        model.inserted(row)
    assert sorted(sales.changes()) == sorted(("I", "V", row[0]) for row in [*missing, *late])
    assert_matches(sales, model, "after Example 4")

    # A key the view already shows: the insert-only method refuses it (the lake would show the
    # key twice); the merging methods take it as the new image of that row.
    staged_row = next(iter(sorted(model.staged.values())))
    app_row = next(iter(sorted(model.app.values())))
    for existing in (staged_row, app_row):
        again = (existing[0], existing[1], "AGAIN", existing[3])
        if registered_methods()[method].view_kind is ViewKind.UNION_ALL:
            with pytest.raises(sa.exc.DBAPIError, match="already shows a row with this key"):
                sales.insert(sales.view, [again])
        else:
            sales.insert(sales.view, [again])
            model.inserted(again)
    assert_matches(sales, model, "after inserting known keys")

    sales.extract(run_cli)
    model.extracted()
    assert sales.lake() == model.lake_now
    assert_matches(sales, model, "after the extraction")


# -- random patching rounds -------------------------------------------------------------------


@pytest.mark.parametrize("method", PATCH_METHODS)
def test_random_stage_patch_extract_rounds(sales: SalesTable, run_cli: RunCli, method: str) -> None:
    seed = SEED + PATCH_METHODS.index(method) + (100 if sales.dialect == "postgresql" else 0)
    rng = random.Random(seed)
    model = offloaded(sales, run_cli, method, drop_months=(1,))
    rounds = RandomRounds(sales, model, rng, method)
    try:
        for number in range(4):
            where = f"{method} seed={seed} round={number}"
            rounds.drop_some()
            rounds.change_the_table()
            rounds.stage(run_cli)
            assert_matches(sales, model, f"{where}: after staging")
            for _ in range(10):
                rounds.patch()
                assert sales.rows(sales.table) == model.app, f"{where}: a patch reached the table"
            assert_matches(sales, model, f"{where}: after patching")
            sales.extract(run_cli)
            model.extracted()
            assert sales.lake() == model.lake_now, f"{where}: the lake differs from the model"
            assert sales.changes() == [], where
    except BaseException as exc:
        exc.add_note(f"replay with GLUON_TEST_SEED={SEED} ({sales.dialect}, {method}, seed {seed})")
        raise


class RandomRounds:
    """Random staging, patches through the view and application changes, with the model."""

    def __init__(
        self, sales: SalesTable, model: PatchModel, rng: random.Random, method: str
    ) -> None:
        self.sales = sales
        self.model = model
        self.rng = rng
        declared = registered_methods()[method]
        self.inserts_only = declared.view_kind is ViewKind.UNION_ALL
        self.trigger = declared.has_object(SourceObject.CHANGELOG_TRIGGER)
        self.next_key = 2000

    def key(self) -> int:
        self.next_key += 1
        return self.next_key

    def drop_some(self) -> None:
        """Older application rows leave the source (offloaded, then dropped)."""
        keys = [key for key in sorted(self.model.app) if self.rng.random() < 0.1]
        self.sales.dropped_from_source(keys)
        for key in keys:
            self.model.table_changed(self.model.app[key], None, captured=False)

    def change_the_table(self) -> None:
        """The application changes its own rows (captured only with a table trigger)."""
        for _ in range(3):
            row = self.rng.choice(sorted(self.model.app.values()))
            new = (row[0], row[1], self.rng.choice(["EMEA", "APAC", None]), row[3])
            self.sales.run(
                f"UPDATE {self.sales.table} SET region = :region WHERE id = :id",
                {"region": new[2], "id": row[0]},
            )
            self.model.table_changed(row, new, captured=self.trigger)
        new = (self.key(), dt.date(2017, 4, 30), "APP", decimal.Decimal("1.00"))
        self.sales.insert(self.sales.table, [new])
        self.model.table_changed(None, new, captured=self.trigger)

    def stage(self, run_cli: RunCli) -> None:
        month = self.rng.randint(1, 4)
        first, last = MONTHS[month - 1]
        choices: list[tuple[str, Callable[[Row], bool]]] = [
            (
                f"column(SOLD_ON) >= date({first}) and column(SOLD_ON) <= date({last})",
                lambda row: first <= row[1] <= last,
            ),
            (
                'column(REGION) = string("EMEA") or column(REGION) is null',
                lambda row: row[2] in ("EMEA", None),
            ),
            (
                "(column(AMOUNT) > numeric(400.5) and column(AMOUNT) is not null) "
                f"or column(SOLD_ON) < date({MONTHS[1][0]})",
                lambda row: (
                    (row[3] is not None and row[3] > decimal.Decimal("400.5"))
                    or row[1] < MONTHS[1][0]
                ),
            ),
        ]
        predicate, matches = self.rng.choice(choices)
        self.sales.stage(run_cli, predicate)
        self.model.stage(matches)

    def patch(self) -> None:
        """One random DML statement on the updatable view."""
        view = self.model.view()
        # Under UPDATABLE_CHANGELOG application rows change through the table, never the view.
        targets = sorted(
            row for key, row in view.items() if not self.trigger or key not in self.model.app
        )
        action = (
            "insert"
            if self.inserts_only or not targets
            else self.rng.choice(["bump", "bump", "region", "month", "rekey", "delete", "insert"])
        )
        view_name = self.sales.view
        if action == "insert":
            new = (
                self.key(),
                dt.date(2017, 1, 1) + dt.timedelta(days=self.rng.randrange(120)),
                self.rng.choice(["EMEA", None]),
                decimal.Decimal(self.rng.randint(1, 500)).quantize(CENT),
            )
            self.sales.insert(view_name, [new])
            self.model.inserted(new)
            return
        row = self.rng.choice(targets)
        if action == "bump":
            self.sales.run(
                f"UPDATE {view_name} SET amount = amount + 1.25 WHERE id = :id", {"id": row[0]}
            )
            self.model.patched(
                row, (*row[:3], None if row[3] is None else row[3] + decimal.Decimal("1.25"))
            )
        elif action == "region":
            self.sales.run(
                f"UPDATE {view_name} SET region = 'PATCH' WHERE id = :id", {"id": row[0]}
            )
            self.model.patched(row, (row[0], row[1], "PATCH", row[3]))
        elif action == "rekey":
            new_key = self.key()
            self.sales.run(
                f"UPDATE {view_name} SET id = :new WHERE id = :id", {"new": new_key, "id": row[0]}
            )
            self.model.patched(row, (new_key, *row[1:]))
        elif action == "delete":
            self.sales.run(f"DELETE FROM {view_name} WHERE id = :id", {"id": row[0]})
            self.model.deleted(row)
        else:  # double the amounts of one month's rows (those the view may change)
            first, last = MONTHS[self.rng.randint(0, 3)]
            chosen = [r for r in targets if first <= r[1] <= last]
            if not chosen:
                return
            keys = ", ".join(str(r[0]) for r in chosen)
            self.sales.run(
                f"UPDATE {view_name} SET amount = amount * 2 "
                f"WHERE sold_on BETWEEN :first AND :last AND id IN ({keys})",
                {"first": first.isoformat(), "last": last.isoformat()},
            )
            for r in chosen:
                self.model.patched(r, (*r[:3], None if r[3] is None else r[3] * 2))


# -- refusals ---------------------------------------------------------------------------------

BAD_PREDICATES = [
    ("column(SOLD_ON) >= 2017-01-01", "cannot read '2017-01-01'"),
    ("column(AMOUNT) = numeric(ten)", "'ten' is not a number"),
    ('column(AMOUNT) > string("x")', "cannot be compared with a string(...) value"),
    ("column(SOLD_ON) = numeric(5)", "column sold_on holds date values"),
    ("column(NOPE) = numeric(1)", "no column nope"),
    ("SOLD_ON = date(2017-01-01); DROP TABLE sales", "cannot read"),
    ('column(REGION) = string("EMEA") and', "expected column(NAME)"),
    ("(column(AMOUNT) > numeric(1)", "expected ')'"),
    ("column(SOLD_ON) = date(2017-13-01)", "bad date value"),
    ("", "empty"),
]


def snapshot(sales: SalesTable) -> tuple[object, ...]:
    return (
        sales.rows(sales.table),
        sales.rows(sales.staging),
        sales.rows(sales.view),
        sales.changes(),
    )


def assert_one_error(result: Result, exit_code: int, fragment: str) -> None:
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("offload: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert result.exit_code == exit_code, lines[0]


def test_malformed_predicates_change_nothing(sales: SalesTable, run_cli: RunCli) -> None:
    model = offloaded(sales, run_cli, "UPDATABLE", drop_months=(1,))
    sales.stage(run_cli, JANUARY)
    model.stage(lambda row: in_month(row, 1))
    before, lake = snapshot(sales), sales.lake()
    for predicate, fragment in BAD_PREDICATES:
        for execute in (["-x"], []):
            result = run_cli(
                "offload", "-t", sales.table, *execute, f"--incremental-stage-lake-rows={predicate}"
            )
            assert_one_error(result, 2, fragment)
            assert "--incremental-stage-lake-rows" in result.stderr
            assert snapshot(sales) == before, predicate
    assert sales.lake() == lake
    assert_matches(sales, model, "after the refusals")


def test_refusals_and_the_plan(sales: SalesTable, run_cli: RunCli) -> None:
    model = offloaded(sales, run_cli, "UPDATABLE", drop_months=(1,))

    plan = run_cli("offload", "-t", sales.table, f"--incremental-stage-lake-rows={JANUARY}")
    assert plan.exit_code == 0, plan.stderr
    assert "nothing was changed" in plan.stdout and sales.staging in plan.stdout
    assert sales.rows(sales.staging) == {}

    combined = run_cli(
        "offload",
        "-t",
        sales.table,
        "-x",
        "--incremental-run-extraction",
        f"--incremental-stage-lake-rows={JANUARY}",
    )
    assert_one_error(combined, 2, "--incremental-stage-lake-rows")

    # Patches that wait in the changelog: staging again would hide them, so it is refused.
    sales.stage(run_cli, JANUARY)
    model.stage(lambda row: in_month(row, 1))
    row = next(iter(sorted(model.staged.values())))
    sales.run(f"UPDATE {sales.view} SET region = 'WAIT' WHERE id = :id", {"id": row[0]})
    model.patched(row, (row[0], row[1], "WAIT", row[3]))
    before = snapshot(sales)
    waiting = run_cli(
        "offload", "-t", sales.table, "-x", f"--incremental-stage-lake-rows={FEBRUARY}"
    )
    assert_one_error(waiting, 1, "--incremental-run-extraction first")
    assert snapshot(sales) == before
    sales.extract(run_cli)
    model.extracted()
    sales.stage(run_cli, FEBRUARY)
    model.stage(lambda row: in_month(row, 2))
    assert_matches(sales, model, "after staging February")


def test_changelog_methods_have_no_lake_rows_to_stage(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    sales = SalesTable("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", sales.url)
    sales.create(sales_rows(random.Random(SEED), 5))
    assert run_cli("offload", "-t", sales.table, "-x").exit_code == 0  # creates the repository
    result = run_cli("offload", "-t", sales.table, "-x", f"--incremental-stage-lake-rows={JANUARY}")
    assert_one_error(result, 1, "not enabled")
    sales.enable(run_cli, "CHANGELOG")
    result = run_cli("offload", "-t", sales.table, "-x", f"--incremental-stage-lake-rows={JANUARY}")
    assert_one_error(result, 1, "UPDATABLE, UPDATABLE_CHANGELOG, UPDATABLE_INSERT")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///:memory:",
        "postgresql+psycopg://gluon@localhost/source",
        "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1",
    ],
)
def test_a_table_enabled_before_staging_keeps_its_plain_view(url: str) -> None:
    """Recorded objects without a lake-rows table: the view shows the application table only."""
    source = sources.connect(url)  # no connection is made
    method = registered_methods()["UPDATABLE"]
    spec = TableSpec(
        "APP", "SALES", (Column("ID", "INTEGER", "bigint", nullable=False),), primary_key=("ID",)
    )
    objects = capture_objects.named_source_objects(source, TableRef("APP", "SALES"), method)
    old = [item for item in objects if item.kind is not SourceObject.LAKE_ROWS_TABLE]
    view = next(item for item in objects if item.kind is SourceObject.UPDATABLE_VIEW)
    lake_rows = next(item for item in objects if item.kind is SourceObject.LAKE_ROWS_TABLE)
    for planned, staged in ((objects, True), (old, False)):
        context = capture_objects.script_context(source, spec, method, planned, ("ID",))
        for template in ("create_updatable_view", "create_updatable_trigger"):
            text = source.render(template, object=view, **context)
            assert (lake_rows.name in text) is staged, f"{template} ({source.name})"
