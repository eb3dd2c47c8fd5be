"""One location per base table for its whole life (issue 28, deliverable 1).

Readers outside gluon (deltalake's ``DeltaTable``, Polars) open the base table's first
path and must read the compacted state after every compaction method, on a partitioned
and an unpartitioned table with a composite key; a partition-wise run killed half-way
must show them the state before it, never a mixture. Retained versions survive vacuum and
are read back; an installation whose base an older gluon moved to ``..._cNN`` keeps
working and comes back to its first path at the next full compaction. Real SQLite, Sail
and Delta tables.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import RunCli, lake_rows, run_offload_process

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.naming import TableRef, lake_names
from gluon.repo import Repository

TABLE = "main.pairs"
KEY = "MAIN.PAIRS"
Row = tuple[str, str, str]
PARTITIONED = ("--partition-columns=k1", "--partition-granularity=10")
METHODS = {
    "IN_PLACE": (),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}


def _canonical(rows: list[dict[str, object]]) -> list[Row]:
    return sorted(tuple(str(row[name]) for name in ("k1", "k2", "val")) for row in rows)  # type: ignore[misc]


class Pairs:
    """A SQLite table keyed on (k1, k2) whose changes move keys between partitions."""

    def __init__(self, path: Path) -> None:
        self.url = f"sqlite:///{path}"
        self.engine = sa.create_engine(self.url)
        with self.engine.begin() as db:
            db.execute(
                sa.text(
                    "CREATE TABLE pairs (k1 INTEGER NOT NULL, k2 VARCHAR(10) NOT NULL, "
                    "val VARCHAR(20), PRIMARY KEY (k1, k2))"
                )
            )
            db.execute(
                sa.text("INSERT INTO pairs VALUES (:k1, :k2, 'v0')"),
                [{"k1": k1, "k2": k2} for k1 in range(1, 40, 3) for k2 in ("a", "b")],
            )

    def change(self, round_number: int) -> None:
        """Updates, deletes, a key moved to another partition, inserts."""
        value = f"r{round_number}"
        with self.engine.begin() as db:
            db.execute(
                sa.text("UPDATE pairs SET val = :v WHERE k2 = 'a' AND k1 < 20"), {"v": value}
            )
            db.execute(sa.text("DELETE FROM pairs WHERE k1 = (SELECT MIN(k1) FROM pairs)"))
            db.execute(
                sa.text(
                    "UPDATE pairs SET k1 = k1 + 21 WHERE k2 = 'b' "
                    "AND k1 = (SELECT MAX(k1) FROM pairs WHERE k1 < 20)"
                )
            )
            db.execute(
                sa.text("INSERT INTO pairs VALUES (:k1, :v, :v)"),
                [{"k1": 5 + round_number * 11, "v": value}],
            )

    def rows(self) -> list[Row]:
        with self.engine.connect() as db:
            found = db.execute(sa.text("SELECT k1, k2, val FROM pairs")).mappings()
            return _canonical([dict(row) for row in found])


def _cli(run_cli: RunCli, *args: str) -> str:
    result = run_cli("offload", "-t", TABLE, "-x", *args)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def _compact(run_cli: RunCli, *flags: str) -> str:
    return _cli(run_cli, "--incremental-run-compaction", "--incremental-wait-time=0", *flags)


def _enable(run_cli: RunCli, pairs: Pairs, *flags: str, method: str = "CHANGELOG") -> str:
    """Offload and enable; return the base table's first path."""
    _cli(
        run_cli,
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *flags,
    )
    record = Repository(load_settings().repo_url).get_table(KEY)
    assert record is not None
    return record.base_path


def _outside_readers(path: str) -> dict[str, list[Row]]:
    """The base table as engines that are not gluon read it, by path."""
    import polars

    return {
        "deltalake": _canonical(DeltaTable(path).to_pyarrow_table().to_pylist()),
        "polars": _canonical(polars.read_delta(path).to_dicts()),
    }


def _view_rows() -> list[Row]:
    return _canonical(lake_rows("SELECT k1, k2, val FROM main.pairs"))


@pytest.mark.parametrize("partitioning", [PARTITIONED, ()], ids=["partitioned", "unpartitioned"])
def test_a_reader_holding_the_first_path_reads_every_compaction(
    partitioning: tuple[str, ...],
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pairs = Pairs(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", pairs.url)
    first_path = _enable(run_cli, pairs, *partitioning)
    # In place after a full one too: it replaces partitions whose files the publish named.
    methods = ["IN_PLACE", "FULL", "IN_PLACE", "PARTITION_WISE_FULL", "FULL"]
    for round_number, method in enumerate(methods, 1):
        pairs.change(round_number)
        _cli(run_cli, "--incremental-run-extraction")
        _compact(run_cli, *METHODS[method])
        expected = pairs.rows()
        for reader, rows in _outside_readers(first_path).items():
            assert rows == expected, f"{reader} after {method}"
        assert _view_rows() == expected, f"the view after {method}"
        record = Repository(load_settings().repo_url).get_table(KEY)
        assert record is not None and record.base_path == first_path, method
    # Nothing beside the base folder: no ..._cNN, and the stages' own logs are gone.
    base = Path(first_path)
    assert sorted(p.name for p in base.parent.iterdir() if p.name.startswith("pairs_data")) == [
        "pairs_data"
    ]
    assert not list(base.glob("gluon_compacted_r*/_delta_log"))


def test_a_partition_wise_run_killed_half_way_shows_outside_readers_the_state_before_it(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = Pairs(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", pairs.url)
    first_path = _enable(run_cli, pairs, *PARTITIONED)
    before = pairs.rows()
    pairs.change(1)
    _cli(run_cli, "--incremental-run-extraction")
    flags = (
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-partition-wise-full-compaction",
    )
    for point in ("compact.after_partition", "compact.before_publish"):
        died = run_offload_process("-t", TABLE, "-x", *flags, env={"GLUON_FAULT": point})
        assert died.returncode == FAULT_EXIT_CODE, (point, died.stderr)
        # Some partitions are merged in the stage: the base and its readers see none of them.
        assert _outside_readers(first_path)["deltalake"] == before, point
        assert _view_rows() == pairs.rows(), point
    died = run_offload_process(
        "-t", TABLE, "-x", *flags, env={"GLUON_FAULT": "compact.after_publish"}
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    # Published, the views not yet switched: outside readers see the compacted state, and the
    # view, still merging the compacted changes over it, the same rows.
    assert _outside_readers(first_path)["deltalake"] == pairs.rows()
    assert _view_rows() == pairs.rows()
    finished = run_offload_process("-t", TABLE, "-x", *flags)
    assert finished.returncode == 0, finished.stderr
    assert _outside_readers(first_path)["polars"] == pairs.rows()
    assert _view_rows() == pairs.rows()


def test_a_retained_version_survives_vacuum_and_reads_back(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = Pairs(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", pairs.url)
    first_path = _enable(run_cli, pairs, *PARTITIONED)
    before = pairs.rows()
    pairs.change(1)
    _cli(run_cli, "--incremental-run-extraction")
    _compact(
        run_cli,
        "--incremental-full-compaction",
        "--incremental-retain-obsolete-objects",
        "--incremental-vacuum-retention-hours=0",
    )
    repo = Repository(load_settings().repo_url)
    (kept,) = [item for item in repo.compaction.retained(KEY) if item.delta_version is not None]
    assert kept.location == first_path and kept.kind == "base table version"
    # Vacuum with no retention ran after the publish: the retained version's files are kept.
    assert (
        _canonical(
            DeltaTable(first_path, version=kept.delta_version).to_pyarrow_table().to_pylist()
        )
        == before
    )
    queried = run_cli("gluon", "query", "--json", f"SELECT k1, k2, val FROM {kept.name}")
    assert queried.exit_code == 0, queried.stderr
    assert _canonical(json.loads(queried.stdout)) == before
    status = run_cli("display_incremental_status", "-t", TABLE)
    assert (
        f"base table version {kept.name} at {first_path} version {kept.delta_version}"
        in status.stdout
    )

    # Without retaining, the same vacuum removes the files only the replaced version used.
    pre = DeltaTable(first_path).version()
    pairs.change(2)
    _cli(run_cli, "--incremental-run-extraction")
    _compact(run_cli, "--incremental-full-compaction", "--incremental-vacuum-retention-hours=0")
    with pytest.raises(Exception):  # noqa: B017 - deltalake reports missing files as several types
        DeltaTable(first_path, version=pre).to_pyarrow_table()
    assert (
        _canonical(
            DeltaTable(first_path, version=kept.delta_version).to_pyarrow_table().to_pylist()
        )
        == before
    )


def test_a_base_an_older_gluon_moved_keeps_working_and_comes_back_to_its_first_path(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = Pairs(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", pairs.url)
    first_path = _enable(run_cli, pairs, *PARTITIONED)
    # The state an older gluon's full compaction (run 7) left: the base at ..._data_c7, recorded.
    settings = load_settings()
    repo = Repository(settings.repo_url)
    moved = lake_names(TableRef.parse(TABLE)).compacted_base_path(settings.lake_root, 7)
    shutil.move(first_path, moved)
    state = repo.incremental.get_state(KEY)
    assert state is not None
    repo.switch_generation(
        KEY,
        base_path=moved,
        view_generation=state.view_generation,
        view_min_partition=state.view_min_partition,
    )
    pairs.change(1)
    _cli(run_cli, "--incremental-run-extraction")
    assert _view_rows() == pairs.rows()
    _compact(run_cli)  # in place: the base stays where it is
    assert _view_rows() == pairs.rows()
    assert _outside_readers(moved)["deltalake"] == pairs.rows()

    pairs.change(2)
    _cli(run_cli, "--incremental-run-extraction")
    _compact(run_cli, "--incremental-full-compaction")
    record = repo.get_table(KEY)
    assert record is not None and record.base_path == first_path
    assert not Path(moved).exists()
    assert _outside_readers(first_path)["polars"] == pairs.rows()
    assert _view_rows() == pairs.rows()


def test_an_insert_only_view_killed_between_publish_and_switch_shows_each_row_once(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The publish is the moment the compacted inserts are in the base: a session that opens
    after it reads the views as switched, though the repository's switch has not run (a
    ``UNION ALL`` view would otherwise show those inserts twice)."""
    pairs = Pairs(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", pairs.url)
    first_path = _enable(run_cli, pairs, *PARTITIONED, method="CHANGELOG_INSERT")
    with pairs.engine.begin() as db:
        db.execute(sa.text("INSERT INTO pairs VALUES (100, 'x', 'new'), (7, 'z', 'new')"))
    _cli(run_cli, "--incremental-run-extraction")
    assert _view_rows() == pairs.rows()
    flags = (
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-full-compaction",
    )
    died = run_offload_process(
        "-t", TABLE, "-x", *flags, env={"GLUON_FAULT": "compact.after_publish"}
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    assert _outside_readers(first_path)["deltalake"] == pairs.rows()
    assert _view_rows() == pairs.rows(), "the compacted inserts shown twice"
    finished = run_offload_process("-t", TABLE, "-x", *flags)
    assert finished.returncode == 0, finished.stderr
    assert _view_rows() == pairs.rows()
