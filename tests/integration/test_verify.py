"""``gluon verify``: the lake and the source broken on purpose, and verify finds exactly
the keys broken (real PostgreSQL and SQLite sources, Sail, Delta tables tampered with
through deltalake, both merge modes)."""

from __future__ import annotations

import datetime as dt
import json
import random
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
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.locking import PausedCommand
from support.patching import SalesTable, sales_rows
from support.shape_matrix import SourceDb, sqlite_url
from support.shapes import pg_type_shape, rounds_for, sqlite_type_shape
from support.terminal import Terminal
from typer.testing import Result

from gluon.config import load_settings
from gluon.methods.base import SourceObject
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.service.lag import table_lag
from gluon.status.changelog_counter import ChangelogCounter

MODES = ["--incremental-merge-mode=DEFERRED", "--incremental-merge-mode=IMMEDIATE"]


def _verify(
    run_cli: Callable[..., Result], source: Source, table: str | None = None
) -> tuple[int, dict[str, object]]:
    result = run_cli("gluon", "verify", "-t", table or source.table, "--json")
    assert result.exit_code in (0, 1), result.stderr
    [verdict] = json.loads(result.stdout)
    return result.exit_code, verdict


def _log_says(text: str) -> bool:
    """Whether a gluon verify log file (of this test's home) holds ``text``."""
    return any(text in path.read_text() for path in load_settings().log_dir.glob("gluon_verify*"))


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


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_verify_reports_no_difference_while_a_writer_and_extractions_run(
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
    stop = threading.Event()
    rounds = 0
    extractions: list[int] = []

    def extract_repeatedly() -> None:  # a cron line's extractions, in processes of their own
        while not stop.is_set():
            ran = run_offload_process("-t", source.table, "-x", "--incremental-run-extraction")
            extractions.append(ran.returncode)

    def write() -> None:
        nonlocal rounds
        while not stop.is_set():
            workload.round(3)
            rounds += 1
            stop.wait(0.02)  # an application's pace, not a tight loop

    threads = [threading.Thread(target=write), threading.Thread(target=extract_repeatedly)]
    for thread in threads:
        thread.start()
    try:
        verdicts = [_verify(run_cli, source) for _ in range(2)]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert rounds > 0, "the writer never ran during verify"
    assert extractions and set(extractions) <= {0, 3}, extractions  # 3: verify's own held it
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
        refused = run_cli("gluon", "verify", "-t", source.table, "--lock-wait", "0")
        waited: list[Result] = []
        waiting = threading.Thread(
            target=lambda: waited.append(
                run_cli("gluon", "verify", "-t", source.table, "--lock-wait", "120")
            )
        )
        waiting.start()
        held.wait_until(lambda: _log_says("is locked: trying again"), "verify waits")
    waiting.join()
    assert held.returncode == 0, held.stderr
    assert refused.exit_code == 3, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    [after] = waited  # the extraction ended, the lock was free, the verify went on
    assert after.exit_code == 0, after.stdout + after.stderr


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


def test_verify_shows_a_bar_only_at_a_terminal_and_logs_one_line_per_level_with_v(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=10)
    assert run_cli("offload", "-t", source.table, "-x").exit_code == 0
    quiet = run_cli("gluon", "verify", "-t", source.table)
    assert quiet.exit_code == 0, quiet.stderr
    assert quiet.stderr == ""  # stderr is no terminal here: no bar, no escape codes
    assert quiet.stdout.count("\n") == 1
    loud = run_cli("gluon", "verify", "-t", source.table, "-v")
    assert loud.exit_code == 0, loud.stderr
    table = source.table.upper()
    assert f"{table}: level 1: " in loud.stderr
    assert "buckets compared, 0 differ" in loud.stderr
    assert _log_says(f"{table}: level 1: ")
    with Terminal.gluon(["verify", "-t", source.table]) as terminal:
        terminal.expect(f"verifying {table}")  # the bar, at a terminal
        terminal.expect(f"{table}: equal, 10 rows compared")
        assert terminal.exit_code() == 0


def test_verify_all_goes_on_past_a_locked_table_and_reports_it(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--all verifies every table even when one is held by an extraction; exit codes by
    precedence: 1 differences > 3 locked > 0 equal."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=5)
    enable(run_cli, source, "CHANGELOG")
    with source.engine.begin() as db:
        db.execute(sa.text("CREATE TABLE other (id INTEGER PRIMARY KEY, name TEXT)"))
        db.execute(sa.text("INSERT INTO other VALUES (1, 'a'), (2, 'b'), (3, 'c')"))
    offloaded = run_cli("offload", "-t", "main.other", "-x")
    assert offloaded.exit_code == 0, offloaded.stderr
    extraction = ("-t", source.table, "-x", "--incremental-run-extraction")
    with PausedCommand(tmp_path, "extract.before_repository_update", *extraction) as held:
        held.wait_for_lock("MAIN.ITEMS", "extraction")
        locked = run_cli("gluon", "verify", "--all", "--lock-wait", "0")
        assert locked.exit_code == 3, locked.stdout + locked.stderr
        lines = locked.stdout.strip().splitlines()
        assert lines[1:] == ["MAIN.OTHER: equal, 3 rows compared"], lines
        assert lines[0].startswith("MAIN.ITEMS: not verified: "), lines
        with source.engine.begin() as db:
            db.execute(sa.text("UPDATE other SET name = 'changed' WHERE id = 2"))
        differing = run_cli("gluon", "verify", "--all", "--json", "--lock-wait", "0")
        assert differing.exit_code == 1, differing.stdout + differing.stderr
        items, other = json.loads(differing.stdout)
        assert (items["table"], items["equal"], items["locked"] is not None) == (
            "MAIN.ITEMS",
            False,
            True,
        )
        assert (other["table"], other["different_values"], other["locked"]) == (
            "MAIN.OTHER",
            [[2]],
            None,
        )
    assert held.returncode == 0, held.stderr
    assert run_cli("gluon", "verify", "--all").exit_code == 1  # other still differs


@pytest.mark.parametrize("method", ["UPDATABLE", "UPDATABLE_CHANGELOG", "UPDATABLE_INSERT"])
def test_rows_only_the_lake_holds_through_an_updatable_method_are_lake_only_not_errors(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    """A row added through the updatable view and a row gone from the source are lake-only
    (exit 0); a value changed by hand in the Delta table is still a difference."""
    sales = SalesTable("sqlite", sqlite_url(tmp_path), "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", sales.url)
    sales.create(sales_rows(random.Random(SEED), 6))
    sales.enable(run_cli, method)
    sales.insert(sales.view, sales_rows(random.Random(SEED), 1, first_key=100))
    sales.dropped_from_source([3])
    sales.extract(run_cli)
    code, verdict = _verify(run_cli, Source("sqlite", sales.url, "main"), sales.table)
    assert code == 0, verdict
    assert (verdict["lake_only"], verdict["extra_in_lake"]) == ([[100], [3]], [])
    text = run_cli("gluon", "verify", "-t", sales.table)
    assert text.stdout.strip() == (
        "MAIN.SALES: equal, 7 rows compared; 2 rows only in the lake, as the method "
        "UPDATABLE* allows (keys 100, 3)".replace("UPDATABLE*", method)
    )
    record = Repository(load_settings().repo_url).get_table("MAIN.SALES")
    assert record is not None
    DeltaTable(record.base_path).update(updates={"region": "'tampered'"}, predicate="id = 2")
    code, verdict = _verify(run_cli, Source("sqlite", sales.url, "main"), sales.table)
    assert (code, verdict["different_values"], verdict["lake_only"]) == (1, [[2]], [[100], [3]])


def test_a_row_only_the_lake_holds_is_an_error_for_a_method_without_patching(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sales = SalesTable("sqlite", sqlite_url(tmp_path), "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", sales.url)
    sales.create(sales_rows(random.Random(SEED), 6))
    sales.enable(run_cli, "CHANGELOG")
    sales.dropped_from_source([3])
    code, verdict = _verify(run_cli, Source("sqlite", sales.url, "main"), sales.table)
    assert (code, verdict["extra_in_lake"], verdict["lake_only"]) == (1, [[3]], [])


def _rewrite_lake_row(path: str, key: int, change: Callable[[pa.Table], pa.Table]) -> None:
    """Replace the base table's row ``key`` by ``change(row)`` (delete, then append)."""
    rows = DeltaTable(path).to_pyarrow_table()
    row = change(rows.filter(pc.equal(rows["id"], key)))
    DeltaTable(path).delete(f"id = {key}")
    write_deltalake(path, row, mode="append")


def _set(row: pa.Table, name: str, value: object) -> pa.Table:
    index = row.schema.get_field_index(name)
    return row.set_column(index, name, pa.array([value], row[name].type))


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_verify_finds_subtle_tampering_an_empty_string_a_shifted_zone_a_duplicate_key(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """A NULL turned into '' (id 2), a timestamp shifted by a zone's hour (id 4), a key
    appended twice (id 6), in the base table: exactly those keys differ; --repair fixes them."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=8)
    with source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {source.table} SET name = NULL WHERE id = 2"))
        db.execute(
            sa.text(f"UPDATE {source.table} SET updated = '2026-03-29 01:30:00' WHERE id = 4")
        )
    enable(run_cli, source, "CHANGELOG", mode)
    assert _verify(run_cli, source)[0] == 0
    path = _base_path(source)
    _rewrite_lake_row(path, 2, lambda row: _set(row, "name", ""))
    shifted = dt.datetime(2026, 3, 29, 2, 30)
    _rewrite_lake_row(path, 4, lambda row: _set(row, "updated", shifted))
    rows = DeltaTable(path).to_pyarrow_table()
    write_deltalake(path, rows.filter(pc.equal(rows["id"], 6)), mode="append")
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["different_values"]) == (1, [[2], [4], [6]]), verdict
    assert (verdict["missing_in_lake"], verdict["extra_in_lake"]) == ([], [])
    repaired = run_cli("gluon", "verify", "-t", source.table, "--repair")
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_a_partial_offloads_excluded_rows_are_not_differences_but_a_copy_of_one_in_the_lake_is(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=10)
    offloaded = run_cli(
        "offload", "-t", source.table, "-x", "--offload-predicate=column(id) <= numeric(4)"
    )
    assert offloaded.exit_code == 0, offloaded.stderr
    with source.engine.begin() as db:  # rows the lake does not hold change freely
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'later' WHERE id > 4"))
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["rows_compared"]) == (0, 4)
    with source.engine.connect() as db:
        excluded = (
            db.execute(sa.text(f"SELECT * FROM {source.table} WHERE id = 7")).mappings().one()
        )
    path = _base_path(source)
    rows = DeltaTable(path).to_pyarrow_table()
    copy = rows.filter(pc.equal(rows["id"], 1))
    write_deltalake(path, _set(_set(copy, "id", 7), "name", excluded["name"]), mode="append")
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["extra_in_lake"]) == (1, [[7]]), verdict


@pytest.mark.parametrize("mode", MODES, ids=["deferred", "immediate"])
def test_a_table_whose_source_gained_a_column_is_verified_on_the_columns_the_lake_has(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(rows=6)
    enable(run_cli, source, "CHANGELOG", mode)
    with source.engine.begin() as db:
        db.execute(sa.text(f"ALTER TABLE {source.table} ADD COLUMN extra VARCHAR(10)"))
        db.execute(sa.text(f"UPDATE {source.table} SET extra = 'x', name = 'new' WHERE id = 2"))
    code, verdict = _verify(run_cli, source)  # its extraction ships the change to id 2
    assert (code, verdict["rows_compared"], verdict["looks"]) == (0, 6, 1), verdict
    _rewrite_lake_row(_base_path(source), 2, lambda row: _set(row, "name", "old"))
    code, verdict = _verify(run_cli, source)
    if mode.endswith("IMMEDIATE"):  # the base holds the latest state
        assert (code, verdict["different_values"]) == (1, [[2]]), verdict
    else:  # the view shows id 2 from the shipped change, over the base
        assert code == 0, verdict


def test_a_change_appended_twice_to_the_delta_table_is_found_and_repaired(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DEFERRED: the delta table gets a copy of a shipped change with other values (the
    same key and gl_seq, as a double write would leave it)."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=6)
    enable(run_cli, source, "CHANGELOG")
    with source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'changed' WHERE id = 5"))
    extract(run_cli, source)
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    changes = DeltaTable(state.delta_path).to_pyarrow_table()
    copy = changes.filter(pc.equal(changes["id"], 5))
    assert copy.num_rows == 1
    write_deltalake(state.delta_path, _set(copy, "name", "doubled"), mode="append")
    code, verdict = _verify(run_cli, source)
    assert (code, verdict["different_values"]) == (1, [[5]]), verdict
    repaired = run_cli("gluon", "verify", "-t", source.table, "--repair")
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
