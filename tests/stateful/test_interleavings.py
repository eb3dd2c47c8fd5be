"""Named interleavings of the lifecycle machine, replayed step by step (no randomness).

Each is a sequence the random machine can draw but rarely does in a bounded
run: the overlaps issue 11 reports, and kills half-way through a step. They
use the same model and checks as ``test_lifecycle.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.lifecycle import PLAIN
from test_lifecycle import lifecycle_machine

UPDATE_FIRST_ROWS = [("table", "update", pick, "beta", "1.50") for pick in range(3)]
INSERTS = [("table", "insert", 0, "alpha", "0.00")] * 3


@pytest.fixture
def machine_for(stateful_tmp: Path, request: pytest.FixtureRequest) -> Callable[[str, str], Any]:
    """``machine_for(dialect, method)``: a lifecycle machine to drive by hand."""

    def make(dialect: str, method: str) -> Any:
        if dialect == "sqlite":

            def make_url() -> str:
                return f"sqlite:///{stateful_tmp / uuid.uuid4().hex[:8]}.db"

        else:
            server = request.getfixturevalue("pg_server")

            def make_url() -> str:
                return str(server.create_database(f"interleaving_{uuid.uuid4().hex[:12]}"))

        return lifecycle_machine(dialect, method, make_url)()

    return make


@pytest.fixture
def sqlite_machine(machine_for: Callable[[str, str], Any]) -> Callable[[str], Any]:
    return lambda method: machine_for("sqlite", method)


def _finish(machine: Any) -> None:
    machine.lake_equals_model()
    machine.teardown()


def test_increment_during_a_compaction_loses_no_rows(sqlite_machine: Callable[[str], Any]) -> None:
    """Issue 11.1: a partial-offload increment while a compaction waits for its acknowledgement."""
    m = sqlite_machine("CHANGELOG")
    m.offload_and_enable(shape=PLAIN, partitioned=False, nullable_key=False, partial=True)
    m.extract(dml=UPDATE_FIRST_ROWS)
    m.compact(dml=[], method="FULL", retain=False)  # stops at the acknowledgement step
    m.extract(dml=[])
    # The new base is written; the run dies before switching the views to it.
    m.compact_killed(dml=[], method="FULL", retain=False, point="compact.after_compact", nth=1)
    m.offload_increment(dml=[])
    m.lake_equals_model()
    m.compact(dml=[], method="FULL", retain=False)  # the user runs it again
    _finish(m)


def test_disable_and_enable_with_an_unfinished_compaction(
    sqlite_machine: Callable[[str], Any],
) -> None:
    """Issue 11.2: a compaction killed after switch_views, disable, enable, new changes."""
    m = sqlite_machine("CHANGELOG")
    m.offload_and_enable(shape=PLAIN, partitioned=True, nullable_key=False, partial=False)
    m.extract(dml=UPDATE_FIRST_ROWS)
    m.compact(dml=[], method="IN_PLACE", retain=False)
    m.extract(dml=[])
    assert m.killed("compact.after_switch_views", 1, *m.compaction) is None
    m.lake_equals_model()
    m.disable(dml=[])  # refusing (an unfinished compaction) is right; going ahead must lose nothing
    m.lake_equals_model()
    if not m.enabled:
        m.enable(dml=[])
    m.extract(dml=INSERTS)
    m.compact(dml=[], method="IN_PLACE", retain=False)
    m.extract(dml=[])
    m.compact(dml=[], method="IN_PLACE", retain=False)
    _finish(m)


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_compaction_killed_between_its_first_repository_writes(
    sqlite_machine: Callable[[str], Any], nth: int
) -> None:
    """Found by the model test: a kill between the run's first writes (the partitions it
    compacts, then where they start) left a run that every resume failed on (KeyError)."""
    m = sqlite_machine("CHANGELOG")
    m.offload_and_enable(shape=PLAIN, partitioned=True, nullable_key=False, partial=False)
    m.extract(dml=UPDATE_FIRST_ROWS)
    m.compact_killed(
        dml=[], method="PARTITION_WISE_FULL", retain=False, point="repo.after_update_run", nth=nth
    )
    m.compact(dml=[], method="PARTITION_WISE_FULL", retain=False)
    m.extract(dml=[])
    m.compact(dml=[], method="PARTITION_WISE_FULL", retain=False)
    assert m.compaction is None
    _finish(m)


@pytest.mark.parametrize("method", ["IN_PLACE", "PARTITION_WISE_FULL"])
def test_compaction_killed_after_its_first_partition(
    sqlite_machine: Callable[[str], Any], method: str
) -> None:
    """A compaction step that stopped half-way (one of several partitions written) resumes."""
    m = sqlite_machine("CHANGELOG")
    m.offload_and_enable(shape=PLAIN, partitioned=True, nullable_key=True, partial=False)
    spread = [("table", "update", pick * 4, "gamma", "2.00") for pick in range(3)]
    m.extract(dml=[*spread, ("table", "insert null key", 0, "n", None)])
    m.compact(dml=[], method=method, retain=True)
    m.extract(dml=[])
    m.compact_killed(dml=[], method=method, retain=True, point="compact.after_partition", nth=1)
    m.compact(dml=[], method=method, retain=True)
    assert m.compaction is None
    _finish(m)


@pytest.mark.parametrize("method", ["IN_PLACE", "FULL"])
def test_a_null_key_is_one_key(machine_for: Callable[[str, str], Any], method: str) -> None:
    """A nullable key column the source keeps unique, NULL included (PostgreSQL's UNIQUE NULLS
    NOT DISTINCT: gluon refuses any other nullable key): the NULL-key row is updated,
    compacted, re-keyed and deleted."""
    m = machine_for("postgresql", "CHANGELOG")
    m.offload_and_enable(shape=PLAIN, partitioned=True, nullable_key=True, partial=False)
    null_row = ("table", "insert null key", 0, "null", "1.00")
    m.extract(dml=[null_row])
    m.compaction_cycle(dml=[], method=method, retain=False, during=[])
    # pick=0 is the NULL key (sorted last... so pick -1 modulo): update it by its position
    null_pick = len(m.source.app) - 1
    m.extract(dml=[("table", "update", null_pick, "changed", "2.00")])
    m.lake_equals_model()
    m.compaction_cycle(dml=[], method=method, retain=False, during=[])
    m.extract(dml=[("table", "delete", len(m.source.app) - 1, None, None)])
    m.lake_equals_model()
    m.compaction_cycle(dml=[null_row], method=method, retain=False, during=[])
    _finish(m)


def test_a_change_shipped_before_a_diversion_is_not_shipped_again(
    sqlite_machine: Callable[[str], Any],
) -> None:
    """An extraction killed between its Delta commit and the changelog delete; a compaction then
    diverts ingestion: the next extraction (into the new partition) must skip what the killed
    one committed to the old partition (an insert-only view would show it twice)."""
    m = sqlite_machine("CHANGELOG_INSERT")
    m.offload_and_enable(shape=PLAIN, partitioned=False, nullable_key=False, partial=False)
    m.run_dml(INSERTS)
    assert m.killed("extract.after_delta_commit", 1, "--incremental-run-extraction") is None
    m.source.lake = dict(m.source.pending)  # committed: the lake shows the inserts
    m.lake_equals_model()
    m.compact(dml=[], method="FULL", retain=False)  # requests control partition 1
    assert m.compaction is not None
    m.extract(dml=[])  # reads the same changes again, writes to partition 1
    m.lake_equals_model()
    m.compact(dml=[], method="FULL", retain=False)
    _finish(m)


# Kills in the order a resumed unpartitioned in-place compaction reaches them: the staging
# table written (not yet recorded), then written again and the base rewritten from it.
IN_PLACE_KILLS = (
    "compact.after_record_snapshot",
    "lake.after_write@1",
    "lake.after_write@2",
    "compact.after_compact",
    "compact.after_switch_views",
    "repo.after_retain@1",
    "compact.after_drop_obsolete",
)


@pytest.mark.parametrize(
    ("dialect", "method"), [("sqlite", "CHANGELOG_INSERT"), ("postgresql", "CHANGELOG")]
)
def test_unpartitioned_in_place_retaining_killed_again_and_again(
    machine_for: Callable[[str, str], Any], dialect: str, method: str
) -> None:
    """The kill matrix: an unpartitioned in-place compaction with retained objects, killed at
    one point after another (each run resumes the last), readers always see the model."""
    m = machine_for(dialect, method)
    m.offload_and_enable(shape=PLAIN, partitioned=False, nullable_key=True, partial=False)
    m.extract(dml=[*UPDATE_FIRST_ROWS, *INSERTS])
    m.compact(dml=[], method="IN_PLACE", retain=True)
    m.extract(dml=INSERTS)  # acknowledges; these land in the new control partition
    assert m.compaction is not None
    for kill in IN_PLACE_KILLS:
        point, _, nth = kill.partition("@")
        assert m.killed(point, int(nth or 1), *m.compaction) is None, f"not killed at {kill}"
        m.lake_equals_model()
    m.compact(dml=[], method="IN_PLACE", retain=True)
    assert m.compaction is None
    _finish(m)
