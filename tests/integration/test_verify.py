"""``gluon verify``: the lake and the source broken on purpose, and verify finds exactly
the keys broken (real PostgreSQL and SQLite sources, Sail, Delta tables tampered with
through deltalake, both merge modes)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from deltalake import DeltaTable, write_deltalake
from support.incremental import (
    SEED,
    Source,
    enable,
    extract,
    postgres_source,
    sqlite_source,
    workload_for,
)
from support.locking import PausedCommand
from support.shape_matrix import SourceDb, sqlite_url
from support.shapes import pg_type_shape, rounds_for, sqlite_type_shape
from typer.testing import Result

from gluon.config import load_settings
from gluon.methods.base import SourceObject
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.service.lag import table_lag
from gluon.status.incremental_status import ChangelogCounter

MODES = ["--incremental-merge-mode=DEFERRED", "--incremental-merge-mode=IMMEDIATE"]


def _verify(run_cli: Callable[..., Result], source: Source) -> tuple[int, dict[str, object]]:
    result = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert result.exit_code in (0, 1), result.stderr
    [verdict] = json.loads(result.stdout)
    return result.exit_code, verdict


def _base_path(source: Source) -> str:
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    return record.base_path


def _changelog(source: Source) -> str:
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    table = next(o for o in state.source_objects if o.kind == SourceObject.CHANGELOG_TABLE.value)
    return f"{table.schema}.{table.name}"


def _tamper_lake(path: str) -> None:
    """Delete id 3, change id 5's name, add id 999 (a copy of id 6) in the base table."""
    table = DeltaTable(path)
    table.delete("id = 3")
    table.update(updates={"name": "'tampered'"}, predicate="id = 5")
    rows = DeltaTable(path).to_pyarrow_table()
    copy = rows.filter(pc.equal(rows["id"], 6))
    copy = copy.set_column(
        copy.schema.get_field_index("id"), "id", pa.array([999], copy["id"].type)
    )
    write_deltalake(path, copy, mode="append")


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_verify_finds_exactly_the_keys_broken_in_the_lake_and_the_source(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(rows=12)
    enable(run_cli, source, "CHANGELOG", mode)
    extract(run_cli, source)
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["equal"], verdict["rows_compared"]) == (0, True, 12)
    paced = run_cli("gluon", "verify", "-t", source.table, "--max-rows-per-second", "1000")
    assert (paced.exit_code, paced.stdout.strip()) == (
        0,
        f"{source.table.upper()}: equal, 12 rows compared",
    )
    refused = run_cli("gluon", "verify", "-t", source.table, "--max-rows-per-second", "0")
    assert refused.exit_code == 2

    _tamper_lake(_base_path(source))
    with source.engine.begin() as db:  # a change whose changelog row is lost
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'lost' WHERE id = 7"))
        db.execute(sa.text(f"DELETE FROM {_changelog(source)}"))
    code, verdict = _verify(run_cli, source)
    assert code == 1
    assert verdict["missing_in_lake"] == [[3]]
    assert verdict["extra_in_lake"] == [[999]]
    assert verdict["different_values"] == [[5], [7]]

    text = run_cli("gluon", "verify", "-t", source.table)
    assert text.exit_code == 1
    assert text.stdout.strip() == (
        f"{source.table.upper()}: 4 differences in 12 rows compared: 1 missing in the lake "
        "(keys 3); 1 extra in the lake (keys 999); 2 different values (keys 5, 7)"
    )
    status = run_cli("display_incremental_status", "-t", source.table)
    assert status.exit_code == 0, status.stderr
    [verified] = [line for line in status.stdout.splitlines() if line.startswith("Verified: ")]
    assert verified.endswith(
        ", 4 differences (1 missing in the lake, 1 extra in the lake, 2 different values; "
        f"run gluon verify -t {source.table.upper()})"
    )
    repo = Repository(load_settings().repo_url)
    record = repo.get_table(source.table.upper())
    assert record is not None
    lag = table_lag(repo, record, ChangelogCounter(source.url), now())  # the service's gauges
    assert (lag.verify_differences, lag.seconds_since_verify is not None) == (4, True)

    repaired = run_cli("gluon", "verify", "-t", source.table, "--repair")
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    assert repaired.stdout.strip().splitlines()[1:] == [
        f"{source.table.upper()}: re-shipped 4 keys through the capture; verifying again",
        f"{source.table.upper()}: equal, 12 rows compared",
    ]
    assert _verify(run_cli, source)[0] == 0

    unknown = run_cli("gluon", "verify", "-t", f"{source.schema}.nothing")
    assert unknown.exit_code == 2
    assert unknown.stderr.strip().splitlines() == [
        f"gluon: error: {source.schema.upper()}.NOTHING is not offloaded: offload it first, "
        "or check the name"
    ]


def test_verify_reports_no_difference_while_a_writer_runs(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(rows=12)
    enable(run_cli, source, "CHANGELOG")
    stop = threading.Event()
    rounds = 0

    def write() -> None:
        nonlocal rounds
        while not stop.is_set():
            workload.round(3)
            rounds += 1
            stop.wait(0.02)  # an application's pace, not a tight loop

    writer = threading.Thread(target=write)
    writer.start()
    try:
        verdicts = [_verify(run_cli, source) for _ in range(2)]
    finally:
        stop.set()
        writer.join()
    assert rounds > 0, "the writer never ran during verify"
    assert [code for code, _ in verdicts] == [0, 0], verdicts


def test_verify_refuses_bad_input_in_one_line(
    offload_home: Path, run_cli: Callable[..., Result]
) -> None:
    neither = run_cli("gluon", "verify")
    assert neither.exit_code == 2
    assert neither.stderr.strip().splitlines() == [
        "gluon: error: name one table with -t SCHEMA.TABLE or every table with --all"
    ]
    both = run_cli("gluon", "verify", "-t", "app.items", "--all")
    assert both.exit_code == 2
    assert "name one table" in both.stderr


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_every_type_of_the_shape_matrix_compares_equal_when_it_is(
    dialect: str,
    mode: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NaN, infinities, zoned timestamps, bytes with zero bytes, JSON, any script: the edge
    values of the type shape, after an enable and a round of changes, are all equal."""
    shape = sqlite_type_shape() if dialect == "sqlite" else pg_type_shape()
    url = sqlite_url(tmp_path) if dialect == "sqlite" else request.getfixturevalue("pg_url")
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    db = SourceDb(dialect, url)
    db.run(shape.create())
    result = run_cli(
        "offload", "-t", shape.typed, "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG", f"--incremental-merge-mode={mode}",
        *shape.enable_flags,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    first = rounds_for(shape, "CHANGELOG")[0]
    for transaction in first.transactions(shape):
        db.run(transaction)
    verified = run_cli("gluon", "verify", "-t", shape.typed, "--json")
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    [verdict] = json.loads(verified.stdout)
    assert verdict["rows_compared"] > 0
    # Every type's canonical text hashes alike in both engines: only checksum rows moved,
    # no bucket was read whole (that would be a type the checksums write differently).
    assert verdict["bytes_moved"] < 1024, verdict["bytes_moved"]


def test_verify_exits_3_while_an_extraction_holds_the_table(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=5)
    enable(run_cli, source, "CHANGELOG")
    extraction = ("-t", source.table, "-x", "--incremental-run-extraction")
    with PausedCommand(tmp_path, "extract.before_repository_update", *extraction) as held:
        held.wait_for_lock("MAIN.ITEMS", "extraction")
        refused = run_cli("gluon", "verify", "-t", source.table)
    assert held.returncode == 0, held.stderr
    assert refused.exit_code == 3, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_repair_through_logical_decoding_fixes_the_keys_broken_in_the_lake(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """PG_LOGICAL has no changelog: --repair writes an update that changes nothing (the WAL
    carries it) and inserts and deletes a lake-only row in one transaction."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "PG_LOGICAL", SEED).create(rows=12)
    enable(run_cli, source, "PG_LOGICAL", mode)
    _tamper_lake(_base_path(source))
    code, verdict = _verify(run_cli, source)
    assert code == 1
    assert (verdict["missing_in_lake"], verdict["extra_in_lake"]) == ([[3]], [[999]])
    assert verdict["different_values"] == [[5]]
    repaired = run_cli("gluon", "verify", "-t", source.table, "--repair")
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    with source.engine.connect() as db:
        assert db.execute(sa.text(f"SELECT count(*) FROM {source.table}")).scalar() == 12


def test_a_partially_offloaded_table_is_compared_on_its_offloaded_part(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=10)
    offloaded = run_cli(
        "offload", "-t", source.table, "-x", "--offload-predicate=column(id) <= numeric(4)"
    )
    assert offloaded.exit_code == 0, offloaded.stderr
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["rows_compared"]) == (0, 4)
