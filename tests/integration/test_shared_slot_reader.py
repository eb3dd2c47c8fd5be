"""One table's changes read from its database's shared slot batch after batch
(gluon.extract.feeds.shared_reader, issue 33 item 1): two tables of one database, each
extraction in any order ships exactly the changes its offload snapshot misses, on a
composite keyword-named key changed by an UPDATE and on NULLs and TOASTed values; a kill
-9 at each new fault point loses and doubles nothing.

The lake is played in memory (strict: an INSERT of a key the lake holds, or an UPDATE/DELETE
of one it lacks, fails) with the extraction's already-shipped check (a change numbered at
or below the highest one the lake holds is left out); a killed extraction runs in a child
process that writes each batch to a file (its "Delta commit") before marking it done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.extract import shared_pass
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.faults import FAULT_EXIT_CODE
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.schema import TableSpec
from gluon.source import connect, publication
from gluon.source.base import SourceDialect

TABLES = {
    # a composite key of keyword names, one part changed by UPDATEs
    "orders": (
        'CREATE TABLE public.orders ("select" INTEGER, "order" TEXT, v TEXT, '
        'PRIMARY KEY ("select", "order"))',
        "INSERT INTO public.orders SELECT g % 5, 'o' || g, 'v' || g FROM generate_series(1, 30) g",
    ),
    # NULLs and large (TOASTed) values an UPDATE of another column leaves out of the WAL
    "docs": (
        "CREATE TABLE public.docs (id INTEGER PRIMARY KEY, n INTEGER, body TEXT)",
        "ALTER TABLE public.docs ALTER COLUMN body SET STORAGE EXTERNAL; "
        "ALTER TABLE public.docs REPLICA IDENTITY FULL; "
        "INSERT INTO public.docs SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE g END, "
        "CASE WHEN g % 4 = 0 THEN NULL ELSE repeat(md5(g::text), 400) END "
        "FROM generate_series(1, 30) g",
    ),
}


@dataclass
class World:
    url: str
    repo_url: str
    source: SourceDialect
    repo: Repository
    lakes: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = field(default_factory=dict)
    shipped: dict[str, int] = field(default_factory=dict)
    """The highest gl_seq each lake holds (the extraction's already-shipped check)."""


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Iterator[World]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        for create, fill in TABLES.values():
            db.execute(sa.text(create))
            for statement in fill.split("; "):
                db.execute(sa.text(statement))
    engine.dispose()
    repo_url = f"sqlite:///{tmp_path / 'repo.db'}"
    source = connect(pg_url)
    repo = Repository(repo_url, create=True)
    world = World(pg_url, repo_url, source, repo)
    yield world
    for table in TABLES:
        if repo.slot_positions.get(f"public.{table}") is not None:
            shared_slot.leave(source, repo, f"public.{table}", "public", table)
    source.engine.dispose()


def _run(world: World, *statements: str) -> None:
    with world.source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _keys(world: World, table: str) -> tuple[str, ...]:
    return _spec(world, table).primary_key


def _spec(world: World, table: str) -> TableSpec:
    return world.source.describe_table(TableRef("public", table))


def _source_rows(world: World, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    keys = _keys(world, table)
    batches = world.source.read_batches(_spec(world, table), batch_rows=10_000)
    rows = [row for batch in batches for row in batch.to_pylist()]
    return {tuple(row[key] for key in keys): row for row in rows}


def _join(world: World, table: str) -> None:
    """Join ``table`` and copy it under the snapshot (the offload of an enable)."""
    with shared_slot.joining(world.source, world.repo, f"public.{table}", 1, "public", table):
        world.lakes[table] = _source_rows(world, table)
    world.shipped[table] = 0


def _reader(world: World, table: str) -> SharedSlotReader:
    spec = _spec(world, table)
    return SharedSlotReader(world.source, world.repo, f"public.{table}", spec, spec.primary_key)


def _apply(world: World, table: str, changes: list[dict[str, Any]]) -> int:
    """Apply a batch to the lake, leaving out what it holds already; how many were new."""
    lake, keys = world.lakes[table], _keys(world, table)
    fresh = [change for change in changes if change["gl_seq"] > world.shipped[table]]
    for change in sorted(fresh, key=lambda change: change["gl_seq"]):
        op = change.pop("gl_op")
        world.shipped[table] = change.pop("gl_seq")
        key = tuple(change[name] for name in keys)
        assert (key in lake) == (op != "I"), f"{table} {op} {key}: doubled or lost"
        if op == "D":
            del lake[key]
        else:
            lake[key] = change
    return len(fresh)


def _extract(world: World, table: str, limit: int = 7, *, rereads: bool = False) -> int:
    """One extraction of ``table`` in batches of about ``limit``; changes read. Unless
    ``rereads`` (after a kill), every change read is new to the lake."""
    reader, read = _reader(world, table), 0
    while True:
        batch = reader.read(limit)
        if batch.num_rows == 0:
            return read
        read += batch.num_rows
        fresh = _apply(world, table, batch.to_pylist())
        assert rereads or fresh == batch.num_rows, f"{table}: a change read twice"
        reader.done()


def _writer(world: World, round_: int) -> None:
    _run(
        world,
        f'UPDATE public.orders SET "select" = "select" + 10, v = \'k{round_}\' '
        f'WHERE "select" = {round_ % 5}',
        f"INSERT INTO public.orders VALUES (100 + {round_}, 'new', NULL)",
        f"DELETE FROM public.orders WHERE \"order\" = 'o{round_ + 1}'",
    )
    _run(
        world,
        f"UPDATE public.docs SET n = NULL WHERE id % 5 = {round_ % 5}",
        f"UPDATE public.docs SET n = {round_}, body = NULL WHERE id = {round_ + 2}",
        f"INSERT INTO public.docs VALUES (200 + {round_}, NULL, repeat('x', 9000))",
        f"DELETE FROM public.docs WHERE id = {round_ + 20}",
    )


def test_two_tables_extracted_in_any_order_match_the_source(world: World) -> None:
    _join(world, "orders")
    _writer(world, 0)  # between the joins: orders' to ship, in docs' copy
    _join(world, "docs")
    order = ["orders", "docs", "docs", "orders", "orders", "docs"]
    for round_, table in enumerate(order, start=1):
        _writer(world, round_)
        _extract(world, table, limit=3 + round_)
    for table in TABLES:
        _extract(world, table)
        assert world.lakes[table] == _source_rows(world, table), table
        assert _extract(world, table) == 0  # nothing ships twice
    shared = shared_slot.shared_slot(world.source, world.repo)
    positions = [shared_slot.position_of(world.repo, f"public.{table}") for table in TABLES]
    confirmed = publication.slot_state(world.source, shared).confirmed
    assert confirmed == min(position.position for position in positions if position)


def test_an_extraction_that_moves_no_position_leaves_the_slot_unadvanced(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Advancing a slot decodes its WAL again from its restart point (0.2-1.4 s after a
    1M-change burst): an extraction whose confirm would not move the slot skips it."""
    _join(world, "orders")
    _join(world, "docs")
    advances: list[int] = []
    advance = publication.confirm

    def counted(source: SourceDialect, shared: Any, lsn: int, *args: Any) -> None:
        advances.append(lsn)
        advance(source, shared, lsn, *args)

    monkeypatch.setattr(publication, "confirm", counted)
    _writer(world, 1)
    assert _extract(world, "orders") > 0 and _extract(world, "docs") > 0
    shared = shared_slot.shared_slot(world.source, world.repo)
    confirmed = publication.slot_state(world.source, shared).confirmed
    advances.clear()
    assert _extract(world, "orders") == 0 and _extract(world, "docs") == 0
    assert advances == [], "an extraction with nothing to ship advanced the slot"
    _writer(world, 2)
    assert _extract(world, "docs") > 0  # orders, behind it, holds the slot where it is
    assert advances == []
    assert publication.slot_state(world.source, shared).confirmed == confirmed
    assert _extract(world, "orders") > 0
    assert len(advances) == 1
    now = publication.slot_state(world.source, shared).confirmed
    assert confirmed is not None and now is not None and now > confirmed


def test_a_table_that_left_stops_and_the_other_goes_on(world: World) -> None:
    _join(world, "orders")
    _join(world, "docs")
    _writer(world, 1)
    shared_slot.leave(world.source, world.repo, "public.docs", "public", "docs")
    _writer(world, 2)
    _extract(world, "orders")
    assert world.lakes["orders"] == _source_rows(world, "orders")
    with pytest.raises(Exception, match="no position in its database's shared slot"):
        _reader(world, "docs").read(10)


CHILD = """
import json, sys
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.source import connect
url, repo_url, table, out = sys.argv[1:]
source, repo = connect(url), Repository(repo_url)
spec = source.describe_table(TableRef("public", table))
reader = SharedSlotReader(source, repo, "public." + table, spec, spec.primary_key)
while True:
    batch = reader.read(4)
    if batch.num_rows == 0:
        break
    with open(out, "a") as committed:  # the batch's Delta commit
        committed.write(json.dumps(batch.to_pylist(), default=str) + "\\n")
    reader.done()
"""


@pytest.mark.parametrize(
    "point", ["extract.before_shared_position", "extract.after_shared_position"]
)
def test_an_extraction_killed_at_each_point_ships_each_change_once(
    world: World, point: str, tmp_path: Path
) -> None:
    _join(world, "orders")
    _join(world, "docs")
    _writer(world, 1)
    _writer(world, 2)
    committed = tmp_path / "committed.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, world.url, world.repo_url, "orders", str(committed)],
        env={**os.environ, "GLUON_FAULT": point},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == FAULT_EXIT_CODE, done.stderr[-2000:]
    lines = committed.read_text().splitlines()
    assert len(lines) == 1  # died at the first batch's mark, after its commit
    spec_types = {field.name: field.type for field in _spec(world, "orders").arrow_schema}
    batch = json.loads(lines[0])
    assert set(spec_types) <= set(batch[0])
    assert _apply(world, "orders", batch) == len(batch)
    _writer(world, 3)
    _extract(world, "docs")  # the other table goes on meanwhile
    _extract(world, "orders", rereads=True)  # the killed batch again: the check leaves it out
    for table in TABLES:
        assert world.lakes[table] == _source_rows(world, table), table
        assert _extract(world, table) == 0


def test_arrow_types_are_the_tables(world: World) -> None:
    _join(world, "docs")
    _writer(world, 1)
    batch = _reader(world, "docs").read(100)
    spec = _spec(world, "docs")
    assert batch.schema.field("n").type == pa.int32()
    assert [f.name for f in batch.schema][: len(spec.columns)] == [c.name for c in spec.columns]


def test_status_counts_the_backlog_or_says_why_not(world: World) -> None:
    assert "no position in shared slot" in str(_reader(world, "orders").backlog(1000))
    _join(world, "orders")
    _join(world, "docs")
    _run(world, "UPDATE public.orders SET v = 'x' WHERE \"select\" = 1")  # 6 rows
    _run(world, "UPDATE public.docs SET n = 1 WHERE id < 4")
    counted = _reader(world, "orders").backlog(100_000)
    assert (counted.pending, counted.unknown_reason) == (6, None)
    assert counted.unconfirmed_bytes and counted.unconfirmed_bytes > 0
    too_many = _reader(world, "orders").backlog(3)
    assert too_many.pending is None
    assert too_many.unknown_reason and "not counted" in too_many.unknown_reason
    assert _reader(world, "orders").backlog(100_000).pending == 6  # status confirmed nothing
    _extract(world, "orders")
    assert _reader(world, "orders").backlog(100_000).pending == 0
    assert _reader(world, "docs").backlog(100_000).pending == 3
    world.repo.slot_positions.release("public.docs", "left out: offload it again")
    assert _reader(world, "docs").backlog(100_000).unknown_reason == "left out: offload it again"
    world.repo.slot_positions.hold(
        "public.docs", 1, shared_slot.shared_slot(world.source, world.repo).slot
    )
    assert "joining" in str(_reader(world, "docs").backlog(100_000).unknown_reason)


def test_members_extracted_in_one_pass_decode_the_slot_once(world: World) -> None:
    """The service's pass (``shared_pass.one_decoding``): the first member decodes the slot,
    the next replays that decoding, from its own position and up to the first's horizon."""
    _join(world, "orders")
    _join(world, "docs")
    _writer(world, 1)
    _extract(world, "orders")  # the two members now stand at different positions
    _writer(world, 2)
    with shared_pass.one_decoding() as decodings:
        _extract(world, "docs", limit=5)
        _writer(world, 3)  # after the pass's horizon: the next pass ships it
        _extract(world, "orders", limit=4)
    assert (decodings.opened, decodings.replayed) == (1, 1)
    assert world.lakes["docs"] != _source_rows(world, "docs")  # round 3 waits
    for table in TABLES:
        _extract(world, table)
        assert world.lakes[table] == _source_rows(world, table), table
        assert _extract(world, table) == 0


def test_a_pass_too_long_to_keep_decodes_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _join(world, "orders")
    _join(world, "docs")
    _writer(world, 1)
    monkeypatch.setattr(shared_pass, "KEPT_MESSAGES", 3)
    with shared_pass.one_decoding() as decodings:
        _extract(world, "orders")
        _extract(world, "docs")
    assert (decodings.opened, decodings.replayed) == (2, 0)
    for table in TABLES:
        assert world.lakes[table] == _source_rows(world, table), table


PASS_CHILD = """
import json, sys
from gluon.extract import shared_pass
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.source import connect
url, repo_url, out = sys.argv[1:]
source, repo = connect(url), Repository(repo_url)
with shared_pass.one_decoding():
    for table in ("orders", "docs"):
        spec = source.describe_table(TableRef("public", table))
        reader = SharedSlotReader(source, repo, "public." + table, spec, spec.primary_key)
        while True:
            batch = reader.read(4)
            if batch.num_rows == 0:
                break
            with open(out, "a") as committed:  # the batch's Delta commit
                committed.write(table + "\\t" + json.dumps(batch.to_pylist(), default=str) + "\\n")
            reader.done()
"""


@pytest.mark.parametrize(
    ("point", "killed_in"),
    [
        ("extract.before_shared_position@2", "orders"),  # its second batch committed
        ("extract.after_shared_position@4", "docs"),  # its first batch marked done
        ("extract.before_shared_position@5", "docs"),  # its second batch committed
    ],
)
def test_a_pass_killed_in_either_member_ships_each_change_once(
    world: World, point: str, killed_in: str, tmp_path: Path
) -> None:
    """Killed in the first member's run, or in the second's (which replays the first's
    decoding): each change reaches the lake once, after the runs that follow."""
    _join(world, "orders")
    _join(world, "docs")
    _writer(world, 1)
    _writer(world, 2)
    committed = tmp_path / "committed.tsv"
    done = subprocess.run(
        [sys.executable, "-c", PASS_CHILD, world.url, world.repo_url, str(committed)],
        env={**os.environ, "GLUON_FAULT": point},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == FAULT_EXIT_CODE, done.stderr[-2000:]
    tables = []
    for line in committed.read_text().splitlines():
        table, batch = line.split("\t")
        tables.append(table)
        changes = json.loads(batch)
        assert _apply(world, table, changes) == len(changes)
    assert tables[-1] == killed_in  # docs: the member that replays the first's decoding
    _writer(world, 3)
    for table in TABLES:
        _extract(world, table, rereads=True)
        assert world.lakes[table] == _source_rows(world, table), table
        assert _extract(world, table) == 0
