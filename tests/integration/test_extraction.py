"""Extraction end to end: random DML, extractions, and the user view compared with the source.

Real PostgreSQL and SQLite sources, the real embedded Sail engine and Delta
tables. Every method each dialect supports is covered (the list comes from the
method registry). A failure names the seed, so it can be replayed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import (
    SEED,
    Source,
    assert_no_duplicate_sequences,
    attach_patch_view,
    enable,
    extract,
    lake_state,
    methods_for,
    postgres_source,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.locking import PausedCommand
from support.workload import Workload
from typer.testing import Result

from gluon import locks
from gluon import source as sources
from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.repo.rejects import RejectedChanges


def test_random_dml_then_extraction_matches(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    for index, method in enumerate(methods_for(source.dialect)):
        seed = SEED + index
        schema = f"{source.schema}" if source.dialect == "sqlite" else source.schema
        workload = workload_for(source, method, seed)
        workload.create()
        enable(run_cli, source, method)
        attach_patch_view(workload, source, method)
        assert lake_state(schema) == workload.expected, f"{method} seed={seed}: after enabling"
        for round_number in range(4):
            workload.round(12)
            extract(run_cli, source)
            assert lake_state(schema) == workload.expected, (
                f"{method} seed={seed} round={round_number}: the user view differs from the "
                "expected state"
            )
        assert_no_duplicate_sequences(source)
        _reset(run_cli, source, workload)


def _reset(run_cli: Callable[..., Result], source: Source, workload: Workload) -> None:
    """Forget the table so the next method starts from scratch (drop, re-create later)."""
    settings = load_settings()
    repo = Repository(settings.repo_url)
    key = f"{source.schema}.ITEMS".upper()
    state = repo.incremental.get_state(key)
    assert state is not None
    from gluon.capture import objects
    from gluon.extract.feeds import capture_objects

    dialect = sources.connect(source.url)
    objects.drop_source_objects(dialect, capture_objects(state))
    repo.incremental.delete_state(key)
    repo.delete_table(key)
    with workload.engine.begin() as db:
        db.execute(sa.text(f"DROP TABLE {workload.table}"))
    import shutil

    shutil.rmtree(Path(settings.lake_root), ignore_errors=True)


# -- concurrency ------------------------------------------------------------------------------


def test_extraction_while_dml_runs(
    pg_url: str, offload_home: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    with sa.create_engine(pg_url).begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
    source = Source("postgresql", pg_url, "app")
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(50)
    enable(run_cli, source, "CHANGELOG")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                workload.round(1)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(5):
            extract(run_cli, source)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    extract(run_cli, source)
    assert lake_state("app") == workload.source_rows() == workload.expected
    with workload.engine.connect() as db:
        assert db.execute(sa.text("SELECT COUNT(*) FROM app_h.items_log")).scalar() == 0
    assert_no_duplicate_sequences(source)


# -- crashes at every step --------------------------------------------------------------------

FAULT_POINTS = [
    "extract.before_delta_commit",
    "extract.after_delta_commit",
    "extract.before_changelog_delete",
    "extract.after_changelog_delete",
    "extract.before_repository_update",
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_killed_extraction_loses_and_duplicates_nothing(
    dialect: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if dialect == "sqlite":
        source = Source("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    else:
        url = request.getfixturevalue("pg_url")
        with sa.create_engine(url).begin() as db:
            db.execute(sa.text("CREATE SCHEMA app"))
        source = Source("postgresql", url, "app")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    table = f"{source.schema}.items"
    for point in FAULT_POINTS:
        workload.round(10)
        crashed = run_offload_process(
            "-t", table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
        )
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        extract(run_cli, source)
        assert lake_state(source.schema) == workload.expected, f"after a crash at {point}"
        assert_no_duplicate_sequences(source)


def test_rerun_after_a_crash_ships_the_rest_of_a_partly_shipped_batch(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch that holds changes an interrupted run committed and changes it did not: the
    engine leaves out the former within the append, and ships the latter once."""
    source = Source("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    table = f"{source.schema}.items"
    workload.round(10)
    crashed = run_offload_process(
        "-t",
        table,
        "-x",
        "--incremental-run-extraction",
        "--incremental-batch-size=3",
        env={"GLUON_FAULT": "extract.after_delta_commit"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    workload.round(10)
    with workload.engine.connect() as db:
        waiting = db.execute(sa.text("SELECT COUNT(*) FROM main.main_h_items_log")).scalar_one()
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected
    assert_no_duplicate_sequences(source)
    runs = Repository(load_settings().repo_url).incremental.extraction_runs("MAIN.ITEMS")
    assert (runs[0].rows_read, runs[0].rows_written) == (waiting, waiting - 3)


def test_second_extraction_of_a_table_exits_3(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = Source("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    workload.round(5)
    args = ("-t", "main.items", "-x", "--incremental-run-extraction")
    with PausedCommand(tmp_path, "extract.before_delta_commit", *args) as first:
        first.wait_for_lock("MAIN.ITEMS", locks.EXTRACTION)
        second = run_offload_process(*args)
    assert second.returncode == 3, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert f"MAIN.ITEMS is locked by a running extraction (pid {first.pid} on " in lines[0]
    assert first.returncode == 0, first.stderr
    assert lake_state("main") == workload.expected


def test_noop_extraction_starts_no_engine(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = Source("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create()
    enable(run_cli, source, "CHANGELOG")
    probe = (
        "import sys\n"
        "from gluon.cli.offload import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print('ENGINE', any(m in sys.modules for m in ('pyspark', 'pysail', 'deltalake')),"
        " 'CODE', code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "-t", "main.items", "-x", "--incremental-run-extraction"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    last = done.stdout.strip().splitlines()[-1].split()
    assert last[1] == "False", "a no-op extraction imported pyspark, pysail or deltalake"
    assert last[3] == "0", done.stderr
    assert "Extracted 0 changes" in done.stdout


def test_engine_checks_a_batch_for_shipped_changes_only_when_some_may_be_in_the_lake(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above the highest gl_seq the repository says was ever shipped, no change can be in
    the lake: the engine is not asked. A fresh enablement's first batch is proved by its
    empty delta table; a repository that knows no highest gl_seq (one from before the
    column) over a delta table holding changes proves nothing: the batch is checked (a
    crash re-run is covered by the tests above)."""
    source = Source("sqlite", f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    from gluon.lake.changes import shipped_by_run

    checked: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        checked.append(1)
        return shipped_by_run(*args, **kwargs)

    monkeypatch.setattr("gluon.extract.already_shipped.shipped_by_run", counting)
    args = ("-t", "main.items", "-x", "--incremental-run-extraction", "--incremental-batch-size=3")
    repo = Repository(load_settings().repo_url)
    for expected_checks, forget_shipped in ((0, False), (0, False), (1, True)):
        checked.clear()
        if forget_shipped:
            repo.incremental.update_state("MAIN.ITEMS", shipped_seq=None)
        workload.round(12)
        result = run_cli("offload", *args)
        assert result.exit_code == 0, result.stderr
        runs = Repository(load_settings().repo_url).incremental.extraction_runs("MAIN.ITEMS")
        assert (runs[0].rows_read or 0) > 6  # several batches
        assert len(checked) == expected_checks
        assert lake_state("main") == workload.expected


@pytest.mark.parametrize(
    ("dialect", "method"),
    [
        ("sqlite", "CHANGELOG"),
        ("sqlite", "CHANGELOG_INSERT"),
        ("postgresql", "PG_LOGICAL"),
    ],
)
def test_a_batch_of_one_change_killed_after_its_commit_is_not_shipped_again(
    dialect: str,
    method: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26, item 8: the re-run of a one-change batch whose Delta commit landed finds it
    in the lake (its gl_seq is the highest ever shipped: the boundary itself), so it neither
    appends it again nor, on an insert-only method, reports it as a rejected insert.

    The already-shipped fast path may skip the engine only for a batch whose lowest gl_seq
    is strictly above the recorded ``shipped_seq``: with ``>=`` this test fails on every
    method (the change twice in the delta table; a false rejected insert)."""
    source = (
        sqlite_source(tmp_path / "app.db")
        if dialect == "sqlite"
        else postgres_source(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, method, SEED)
    workload.create(5)
    enable(run_cli, source, method)
    with workload.engine.begin() as db:
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (100, 'one change')"))
    crashed = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        env={"GLUON_FAULT": "extract.after_delta_commit"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    extract(run_cli, source)
    assert_no_duplicate_sequences(source)
    assert lake_state(source.schema) == workload.source_rows()
    repo = Repository(load_settings().repo_url)
    assert RejectedChanges(repo.engine).summary(source.table.upper()).total == 0
