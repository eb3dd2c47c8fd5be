"""The shared slot's table positions in the repository (revision 0029,
gluon.repo.slot_positions) and the least position the slot may be confirmed to."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from gluon.repo import Repository
from gluon.repo.slot_positions import HELD
from gluon.source.shared_shipping import confirm_plan


def test_a_table_is_held_then_moves_and_leaves(tmp_path: Path) -> None:
    repo = Repository(f"sqlite:///{tmp_path / 'repo.db'}", create=True)
    store = repo.slot_positions
    store.hold("app.a", 1, "gluondb_app")
    store.hold("app.b", 2, "gluondb_app")
    store.hold("other.c", 3, "gluondb_other")
    held = store.get("app.a")
    assert held is not None and held.held and held.position == HELD
    store.save("app.a", 1 << 40, "100:105:101", 1 << 41)
    store.save("app.b", 1 << 42, None, None)
    a = store.get("app.a")
    assert a is not None and not a.held
    assert (a.position, a.offload_snapshot, a.snapshot_boundary) == (
        1 << 40,
        "100:105:101",
        1 << 41,
    )
    assert [p.table_key for p in store.of_slot("gluondb_app")] == ["app.a", "app.b"]
    store.release("app.a", "kept 2 GiB of WAL: offload it again")
    released = store.get("app.a")
    assert (
        released is not None and released.released_reason == "kept 2 GiB of WAL: offload it again"
    )
    store.hold("app.a", 4, "gluondb_app")  # enabled again: nothing of the old row stays
    again = store.get("app.a")
    assert again is not None and again.enablement_id == 4 and again.released_reason is None
    store.forget("app.b")
    assert store.get("app.b") is None
    assert [p.table_key for p in store.of_slot("gluondb_other")] == ["other.c"]


def test_an_older_repository_gains_the_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'repo.db'}"
    Repository(url, create=True)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE slot_positions"))
        connection.execute(sa.text("UPDATE gluon_alembic_version SET version_num = '0025'"))
    engine.dispose()
    Repository(url).slot_positions.hold("app.a", 1, "gluondb_app")
    assert Repository(url).slot_positions.get("app.a") is not None


def test_the_slot_is_confirmed_to_the_least_table_past_a_bound_none() -> None:
    plan = confirm_plan({"a": 5_000, "b": 9_000}, flushed=10_000, max_retained_wal=None)
    assert (plan.target, plan.released) == (5_000, {})
    # a lags 5,000 bytes, past a 4,000 bound: released, the slot moves on with b.
    plan = confirm_plan({"a": 5_000, "b": 9_000}, flushed=10_000, max_retained_wal=4_000)
    assert (plan.target, plan.released) == (9_000, {"a": 5_000})
    # A table being enabled (held at 0) is never released: the slot stays.
    plan = confirm_plan({"a": HELD, "b": 9_000}, flushed=10_000, max_retained_wal=1)
    assert (plan.target, plan.released) == (HELD, {"b": 1_000})
    assert confirm_plan({}, flushed=10_000, max_retained_wal=1).target is None


def test_the_table_whose_extraction_confirms_is_never_left_out() -> None:
    # a ships a large backlog: its own confirm keeps it while it catches up; b's does not.
    positions = {"a": 5_000, "b": 9_000}
    plan = confirm_plan(positions, flushed=10_000, max_retained_wal=4_000, shipping="a")
    assert (plan.target, plan.released) == (5_000, {})
    plan = confirm_plan(positions, flushed=10_000, max_retained_wal=4_000, shipping="b")
    assert (plan.target, plan.released) == (9_000, {"a": 5_000})
