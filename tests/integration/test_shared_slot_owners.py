"""Whose a table's place in a shared slot is (``--incremental-pg-logical-slot=database``):
each installation has its own slot and publication (``gluondb_<database>_<installation>``),
so a member is judged by this installation's publication alone. A member enabled again from
the same installation, and the same table in two installations' shared slots, both work; a
disable in one installation never touches the other's publication. The last member's disable,
killed at each point of its leave and run again, drops the slot and the publication.

Real PostgreSQL (wal_level=logical), Sail and Delta tables; a second installation is a
second OFFLOAD_HOME (its own repository) reading the same database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows, run_offload_process
from support.statements import configured_source, run_sql
from support.tables import ok
from typer.testing import Result

from gluon.faults import FAULT_EXIT_CODE

TABLE = "app.orders"
SETUP = (
    "CREATE SCHEMA IF NOT EXISTS app",
    "CREATE TABLE app.orders (id INTEGER PRIMARY KEY, v TEXT)",
    "INSERT INTO app.orders SELECT g, 'v' || g FROM generate_series(1, 5) g",
)
ENABLE = (
    "offload",
    "-t",
    TABLE,
    "-x",
    "--incremental-updates-enabled",
    "--incremental-extraction-method=PG_LOGICAL",
    "--incremental-pg-logical-slot=database",
)
DISABLE = ("offload", "-t", TABLE, "-x", "--incremental-updates-disabled")
EXTRACT = ("offload", "-t", TABLE, "-x", "--incremental-run-extraction")


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    return configured_source(pg_url, monkeypatch, *SETUP)


def _publications(engine: sa.Engine) -> dict[str, list[str]]:
    """Each gluondb_ publication with its tables."""
    with engine.connect() as db:
        rows = db.execute(
            sa.text(
                "SELECT p.pubname, t.tablename FROM pg_publication p "
                "LEFT JOIN pg_publication_tables t ON t.pubname = p.pubname "
                "WHERE p.pubname LIKE 'gluondb%' ORDER BY 1, 2"
            )
        )
        found: dict[str, list[str]] = {}
        for pubname, table in rows:
            found.setdefault(str(pubname), []).extend([] if table is None else [str(table)])
        return found


def _matches(engine: sa.Engine) -> None:
    with engine.connect() as db:
        source = sorted(tuple(row) for row in db.execute(sa.text(f"SELECT * FROM {TABLE}")))
    lake: list[tuple[Any, ...]] = sorted(
        tuple(row.values()) for row in lake_rows(f"SELECT * FROM {TABLE}")
    )
    assert lake == source


def test_a_member_enabled_again_from_the_same_installation_works(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    ok(run_cli(*ENABLE))
    again = run_cli(*ENABLE)  # a second enable of an enabled member: refused, nothing changed
    assert again.exit_code != 0, again.stdout
    assert again.stderr.strip().splitlines()[-1:] == [
        "offload: error: incremental update is already enabled for APP.ORDERS (PG_LOGICAL)"
    ], again.stderr
    assert list(_publications(engine).values()) == [["orders"]]
    ok(run_cli(*DISABLE))
    assert list(_publications(engine).values()) in ([], [[]])
    ok(run_cli(*ENABLE, "--reset-backend-table"))
    run_sql(
        engine, "INSERT INTO app.orders VALUES (10, 'after')", "DELETE FROM app.orders WHERE id = 1"
    )
    ok(run_cli(*EXTRACT))
    _matches(engine)


def test_two_installations_each_have_the_table_in_their_own_shared_slot(
    engine: sa.Engine,
    run_cli: Callable[..., Result],
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    ok(run_cli(*ENABLE))
    second_home = tmp_path / "second_home"
    second_home.mkdir()
    monkeypatch.setenv("OFFLOAD_HOME", str(second_home))
    ok(run_cli(*ENABLE))
    assert list(_publications(engine).values()) == [["orders"], ["orders"]]
    ok(run_cli(*DISABLE))  # the second installation's member only
    assert list(_publications(engine).values()) == [["orders"]]
    monkeypatch.setenv("OFFLOAD_HOME", str(offload_home))
    run_sql(engine, "UPDATE app.orders SET v = 'changed' WHERE id = 2")
    ok(run_cli(*EXTRACT))
    _matches(engine)


def _slots(engine: sa.Engine) -> list[str]:
    with engine.connect() as db:
        names = db.execute(
            sa.text("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'gluondb%'")
        ).scalars()
        return sorted(str(name) for name in names)


@pytest.mark.parametrize(
    "point",
    [
        "repo.after_forget_slot_position",
        "capture.after_unpublish_table",
        "capture.after_shared_slot_drop",
    ],
)
def test_the_last_member_disabled_drops_the_slot_even_after_a_kill(
    engine: sa.Engine, run_cli: Callable[..., Result], point: str
) -> None:
    """The last member's disable drops the shared slot and its publication; killed after
    the table left the publication, the disable run again still drops them (the table is
    no longer in the publication, but the repository records it as a member)."""
    ok(run_cli(*ENABLE))
    assert len(_slots(engine)) == 1
    died = run_offload_process(*DISABLE[1:], env={"GLUON_FAULT": point})
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    ok(run_cli(*DISABLE))
    assert _slots(engine) == []
    assert _publications(engine) == {}
    ok(run_cli(*ENABLE, "--reset-backend-table"))  # and the table can join again
    run_sql(engine, "UPDATE app.orders SET v = 'again' WHERE id = 3")
    ok(run_cli(*EXTRACT))
    _matches(engine)


def test_a_table_already_in_this_installations_publication_joins_it(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    """The publication's name is its mark: a table found in this installation's publication
    without being recorded (added by hand, or a repository restored from before its enable)
    is this installation's place for it, and the enable goes on (it was refused as a
    publication table that "is not gluon's", naming another name to pick)."""
    run_sql(engine, "CREATE TABLE app.other (id INTEGER PRIMARY KEY)")
    ok(run_cli("offload", "-t", "app.other", *ENABLE[3:]))
    (publication,) = _publications(engine)
    run_sql(engine, f"ALTER PUBLICATION {publication} ADD TABLE app.orders")
    ok(run_cli(*ENABLE))
    run_sql(engine, "UPDATE app.orders SET v = 'joined' WHERE id = 4")
    ok(run_cli(*EXTRACT))
    _matches(engine)


def test_a_members_place_dropped_from_the_publication_is_recreated_by_the_repair(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    """The repair says it re-created the table's place in the publication: it must be
    there after it, and changes must flow again (those made meanwhile need a resync)."""
    ok(run_cli(*ENABLE))
    (publication,) = _publications(engine)
    run_sql(engine, f"ALTER PUBLICATION {publication} DROP TABLE app.orders")
    repaired = ok(run_cli(*ENABLE, "--incremental-recreate-capture-objects"))
    assert "Re-created" in repaired.stdout, repaired.stdout
    assert _publications(engine) == {publication: ["orders"]}
    run_sql(engine, "UPDATE app.orders SET v = 'after the repair' WHERE id = 3")
    ok(run_cli(*EXTRACT))
    _matches(engine)
