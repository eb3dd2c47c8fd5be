"""A table joining and leaving its database's shared slot with its repository position
(gluon.extract.feeds.shared_slot, issue 33 item 1): the hold keeps the slot for what the joining
table's snapshot misses, and a kill -9 at each new fault point loses and doubles nothing.

The lake is played as in test_database_slot (strict: an INSERT of a key the lake holds, or
an UPDATE/DELETE of one it lacks, fails), the repository is a real SQLite one, and killed
steps run in a child process that dies at ``GLUON_FAULT`` (``os._exit``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.capture.objects import change_fields
from gluon.extract.feeds import shared_slot
from gluon.faults import FAULT_EXIT_CODE
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.schema import TableSpec
from gluon.source import connect, pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.logical_values import changes_as_arrow


@dataclass
class World:
    url: str
    repo_url: str
    source: SourceDialect
    repo: Repository


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Iterator[World]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        for statement in (
            "CREATE TABLE public.a (id INTEGER PRIMARY KEY, v TEXT)",
            "CREATE TABLE public.b (id INTEGER PRIMARY KEY, v TEXT)",
            "INSERT INTO public.a SELECT g, 'a' || g FROM generate_series(1, 20) g",
            "INSERT INTO public.b SELECT g, 'b' || g FROM generate_series(1, 20) g",
        ):
            db.execute(sa.text(statement))
    engine.dispose()
    repo_url = f"sqlite:///{tmp_path / 'repo.db'}"
    source = connect(pg_url)
    repo = Repository(repo_url, create=True)
    yield World(pg_url, repo_url, source, repo)
    publication.drop_database_slot(source, shared_slot.shared_slot(source, repo))
    source.engine.dispose()


def _run(world: World, *statements: str) -> None:
    with world.source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _spec(world: World, table: str) -> TableSpec:
    return world.source.describe_table(TableRef("public", table))


def _read(world: World, spec: TableSpec) -> dict[int, dict[str, Any]]:
    batches = world.source.read_batches(spec, batch_rows=10_000)
    return {row["id"]: row for batch in batches for row in batch.to_pylist()}


def _join(world: World, table: str) -> dict[int, dict[str, Any]]:
    """Join ``table`` and copy it under the snapshot (the offload of an enable)."""
    with shared_slot.joining(world.source, world.repo, f"public.{table}", 1, "public", table):
        return _read(world, _spec(world, table))


def _extract(world: World, table: str, lake: dict[int, dict[str, Any]]) -> int:
    """Ship ``table``'s changes from its recorded position into ``lake`` (strictly), record
    the position, confirm the slot; how many changes shipped."""
    key = f"public.{table}"
    start = shared_slot.position_of(world.repo, key)
    assert start is not None, f"{key} has no position"
    shared = shared_slot.shared_slot(world.source, world.repo)
    upto = publication.wal_flush_position(world.source)
    chunks = publication.stream_database_slot(world.source, shared, upto)
    relations: dict[int, pgoutput.Relation] = {}
    transactions = list(pgoutput.transactions([m for c in chunks for m in c], relations))
    spec = _spec(world, table)
    leaves = publication.table_leaves(world.source, "public", table)
    names = [column.name for column in spec.columns]
    shipped, after = shared_shipping.table_changes(
        transactions, relations, leaves, start, names, spec.primary_key
    )
    rows: list[list[str | None]] = []
    for transaction in shipped:
        first = transaction.commit_lsn << 20
        pairs = zip(transaction.ops, transaction.rows, strict=True)
        rows += [[*row, str(first + at), op] for at, (op, row) in enumerate(pairs)]
    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    changes = changes_as_arrow(rows, spec, schema).sort_by("gl_seq").to_pylist()
    for change in changes:
        op = change.pop("gl_op")
        change.pop("gl_seq")
        assert (change["id"] in lake) == (op != "I"), f"{op} {change['id']}: doubled or lost"
        if op == "D":
            del lake[change["id"]]
        else:
            lake[change["id"]] = change
    shared_slot.save_position(world.repo, key, after.past(upto))
    shared_slot.confirm_slot(world.source, world.repo, None)
    return len(changes)


def test_a_joining_table_holds_the_slot_for_what_its_snapshot_misses(world: World) -> None:
    """A transaction committed after b's snapshot, while b is still joining, is b's to ship:
    a's extraction meanwhile must not confirm the slot past it."""
    lake_a = _join(world, "a")
    with shared_slot.joining(world.source, world.repo, "public.b", 1, "public", "b"):
        lake_b = _read(world, _spec(world, "b"))
        _run(world, "UPDATE public.b SET v = 'after the snapshot' WHERE id = 1")
        _run(world, "UPDATE public.a SET v = 'moves a' WHERE id = 1")
        assert _extract(world, "a", lake_a) == 1
        confirmed = publication.slot_state(
            world.source, shared_slot.shared_slot(world.source, world.repo)
        ).confirmed
    assert _extract(world, "b", lake_b) == 1
    assert lake_b == _read(world, _spec(world, "b"))
    assert lake_a == _read(world, _spec(world, "a"))
    assert confirmed is not None


def _die_in_child(world: World, point: str, code: str) -> None:
    script = (
        "from gluon.extract.feeds import shared_slot\n"
        "from gluon.repo import Repository\n"
        "from gluon.source import connect\n"
        f"source, repo = connect({world.url!r}), Repository({world.repo_url!r})\n"
        f"{code}\n"
    )
    env = {**os.environ, "GLUON_FAULT": point}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == FAULT_EXIT_CODE, done.stderr[-2000:]


JOIN = "with shared_slot.joining(source, repo, 'public.b', 1, 'public', 'b'):\n    pass"


@pytest.mark.parametrize(
    "point",
    [
        "repo.before_hold_slot_position",
        "repo.after_hold_slot_position",
        "capture.after_publish_table",
        "repo.before_save_slot_position",
        "repo.after_save_slot_position",
    ],
)
def test_a_join_killed_anywhere_and_run_again_ships_each_change_once(
    world: World, point: str
) -> None:
    lake_a = _join(world, "a")
    _run(world, "UPDATE public.b SET v = 'before the kill' WHERE id = 2")
    _die_in_child(world, point, JOIN)
    _run(
        world, "UPDATE public.b SET v = 'between' WHERE id = 3", "DELETE FROM public.b WHERE id = 4"
    )
    _run(world, "UPDATE public.a SET v = 'between' WHERE id = 3")
    if shared_slot.position_of(world.repo, "public.a") is not None:
        _extract(world, "a", lake_a)  # the other table goes on meanwhile
    lake_b = _join(world, "b")  # the enable run again: a new copy
    _run(
        world,
        "INSERT INTO public.b VALUES (100, 'after')",
        "UPDATE public.b SET v = 'x' WHERE id = 3",
    )
    _extract(world, "b", lake_b)
    _extract(world, "a", lake_a)
    assert lake_b == _read(world, _spec(world, "b"))
    assert lake_a == _read(world, _spec(world, "a"))
    assert _extract(world, "b", lake_b) == 0  # nothing ships twice


LEAVE = "shared_slot.leave(source, repo, 'public.b', 'public', 'b')"


@pytest.mark.parametrize(
    "point",
    [
        "repo.before_forget_slot_position",
        "repo.after_forget_slot_position",
        "capture.after_unpublish_table",
    ],
)
def test_a_leave_killed_anywhere_and_run_again_lets_the_others_go_on(
    world: World, point: str
) -> None:
    lake_a = _join(world, "a")
    _join(world, "b")
    _die_in_child(world, point, LEAVE)
    _run(world, "UPDATE public.a SET v = 'after b left' WHERE id = 5")
    _run(world, "UPDATE public.b SET v = 'not shipped' WHERE id = 5")
    shared_slot.leave(world.source, world.repo, "public.b", "public", "b")
    assert _extract(world, "a", lake_a) == 1
    assert lake_a == _read(world, _spec(world, "a"))
    a = shared_slot.position_of(world.repo, "public.a")
    assert a is not None  # b left the minimum: the slot follows a alone
    assert shared_slot.confirm_slot(world.source, world.repo, None).target == a.position
    shared = shared_slot.shared_slot(world.source, world.repo)
    assert list(publication.published_tables(world.source, shared)) == [("public", "a")]
    assert publication.slot_state(world.source, shared).plugin == "pgoutput"
    shared_slot.leave(world.source, world.repo, "public.a", "public", "a")
    state = publication.slot_state(world.source, shared)
    assert (state.has_publication, state.plugin) == (False, None)  # the last one dropped it


def test_a_stuck_table_is_released_with_its_reason_recorded(world: World) -> None:
    lake_a = _join(world, "a")
    _join(world, "b")
    for key in range(1, 21):
        _run(world, f"UPDATE public.a SET v = repeat('z', 2000) WHERE id = {key}")
        _run(world, f"UPDATE public.b SET v = 'stuck' WHERE id = {key}")
    _extract(world, "a", lake_a)  # b never ships: the slot stays at b's position
    stuck = shared_slot.position_of(world.repo, "public.b")
    assert stuck is not None
    plan = shared_slot.confirm_slot(world.source, world.repo, 1024)
    assert list(plan.released) == ["public.b"]
    row = world.repo.slot_positions.get("public.b")
    assert row is not None and row.released_reason is not None
    assert "-x --incremental-updates-disabled, then offload -t public.b -x --reset" in (
        row.released_reason
    )
    shared = shared_slot.shared_slot(world.source, world.repo)
    confirmed = publication.slot_state(world.source, shared).confirmed
    assert confirmed is not None and confirmed > stuck.position
