"""The ORA_ROWSCN feed end to end, against a test double with ORA_ROWSCN semantics.

The double (``support.rowscn``) is SQLite with an SCN counter and a per-row SCN;
enable, offload, extraction and the merging view are gluon's own, with the real
Sail engine and Delta tables. The golden SQL of the real Oracle templates stays
in tests/oracle.
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, lake_rows
from support.rowscn import CHILD_MAIN, RowscnSQLite, create_table, current_scn, install

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

KEY = "MAIN.ITEMS"
TESTS_DIR = str(Path(__file__).resolve().parents[1])


@pytest.fixture
def engine(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    install(monkeypatch.setattr)
    monkeypatch.setattr(RowscnSQLite, "after_current_scn", None)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    create_table(
        engine,
        "items",
        "id INTEGER PRIMARY KEY, name TEXT, amount NUMERIC(10,2)",
        ["id", "name", "amount"],
    )
    with engine.begin() as db:
        for i in range(1, 11):
            db.execute(
                sa.text("INSERT INTO items (id, name, amount) VALUES (:i, :n, :a)"),
                {"i": i, "n": f"row {i}", "a": f"{i}.25"},
            )
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    return engine


def _enable(run_cli: RunCli) -> None:
    result = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=ORA_ROWSCN",
    )
    assert result.exit_code == 0, result.stderr


def _extract(run_cli: RunCli) -> int:
    """Run an extraction; return the rows it read."""
    result = run_cli("offload", "-t", "main.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    (run,) = Repository(load_settings().repo_url).incremental.extraction_runs(KEY, 1)
    assert run.status == "success"
    return int(run.rows_read or 0)


def _last_scn() -> int | None:
    state = Repository(load_settings().repo_url).incremental.get_state(KEY)
    assert state is not None
    return state.last_scn


def _source(engine: sa.Engine) -> list[tuple[int, str, Decimal]]:
    with engine.connect() as db:
        rows = db.execute(sa.text("SELECT id, name, amount FROM items"))
        return sorted((int(r[0]), str(r[1]), _cents(r[2])) for r in rows)


def _lake() -> list[tuple[int, str, Decimal]]:
    rows = lake_rows("SELECT id, name, amount FROM main.items")
    return sorted((int(str(r["id"])), str(r["name"]), _cents(r["amount"])) for r in rows)


def _cents(value: object) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))


def _update(engine: sa.Engine, ids: list[int], name: str) -> None:
    with engine.begin() as db:
        for i in ids:
            db.execute(sa.text("UPDATE items SET name = :n WHERE id = :i"), {"n": name, "i": i})


def test_reads_rows_between_the_stored_and_the_current_scn(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    before = current_scn(engine)
    _enable(run_cli)
    # Enabling stores the current SCN (before the copy): rows committed earlier are in the copy.
    assert _last_scn() == before
    assert _lake() == _source(engine)
    assert _extract(run_cli) == 0 and _last_scn() == before  # nothing above the SCN

    _update(engine, [1, 2, 3], "first")
    with engine.begin() as db:
        db.execute(sa.text("INSERT INTO items (id, name, amount) VALUES (11, 'new', 1.5)"))
    assert _extract(run_cli) == 4  # exactly the rows whose SCN moved past the stored one
    assert _last_scn() == current_scn(engine) == before + 4
    assert _lake() == _source(engine)

    # The stored SCN is exclusive: the next run reads only rows committed after it.
    _update(engine, [2], "second")
    assert _extract(run_cli) == 1
    assert _lake() == _source(engine)


def test_a_commit_after_the_scn_is_read_waits_for_the_next_run(
    engine: sa.Engine, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _enable(run_cli)
    _update(engine, [4], "before")
    raced: list[int] = []

    def commit_meanwhile() -> None:  # once: a commit lands between the SCN and the read
        if not raced:
            raced.append(current_scn(engine) + 1)
            _update(engine, [5], "racing")

    monkeypatch.setattr(RowscnSQLite, "after_current_scn", staticmethod(commit_meanwhile))
    assert _extract(run_cli) == 1  # row 4 only: row 5's SCN is above the upper bound
    assert _last_scn() == raced[0] - 1
    assert dict((i, n) for i, n, _ in _lake())[5] == "row 5"
    assert _extract(run_cli) == 1  # row 5 now
    assert _lake() == _source(engine)


@pytest.mark.parametrize(
    "point", ["extract.after_delta_commit", "extract.before_repository_update"]
)
def test_a_crash_between_the_delta_commit_and_the_scn_store_rereads_the_same_rows(
    point: str, engine: sa.Engine, run_cli: RunCli
) -> None:
    _enable(run_cli)
    _update(engine, [6, 7], "shipped twice")
    stored = _last_scn()
    crashed = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD_MAIN,
            TESTS_DIR,
            "-t",
            "main.items",
            "-x",
            "--incremental-run-extraction",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "GLUON_FAULT": point},
        timeout=300,
        check=False,
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    committed = lake_rows("SELECT COUNT(*) AS n FROM main_load.items_changes")[0]["n"]
    assert int(str(committed)) == 2, "the crash came after the Delta commit"
    # Killed before the SCN store, the re-run reads rows 6 and 7 again (and appends the same
    # images twice: the merging view takes either); killed after it, only the new row 8.
    rereads = point == "extract.after_delta_commit"
    assert (_last_scn() == stored) is rereads
    _update(engine, [8], "later")
    assert _extract(run_cli) == (3 if rereads else 1)
    assert _lake() == _source(engine)


def _crash(point: str, *options: str) -> None:
    """Run an extraction in a child process that dies at ``point``."""
    crashed = subprocess.run(
        [sys.executable, "-c", CHILD_MAIN, TESTS_DIR, "-t", "main.items", "-x", *options],
        capture_output=True,
        text=True,
        env={**os.environ, "GLUON_FAULT": point},
        timeout=300,
        check=False,
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr


def _delta_rows() -> int:
    committed = lake_rows("SELECT COUNT(*) AS n FROM main_load.items_changes")[0]["n"]
    return int(str(committed))


def test_a_run_ships_batches_of_the_batch_size_and_stores_the_scn_after_each(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """The feed read every changed row into one table, whatever the batch size."""
    _enable(run_cli)
    stored = _last_scn()
    assert stored is not None
    _update(engine, [1, 2, 3, 4, 5], "batched")  # SCNs stored+1 .. stored+5
    # Killed after the second batch's Delta commit: the first batch's SCN is stored.
    _crash(
        "extract.after_delta_commit@2", "--incremental-run-extraction", "--incremental-batch-size=2"
    )
    assert _delta_rows() == 4
    assert _last_scn() == stored + 2
    # The re-run reads the rows from the second batch on (shipped twice: the view takes either).
    assert _extract(run_cli) == 3
    assert _last_scn() == current_scn(engine)
    assert _lake() == _source(engine)


def test_rows_sharing_an_scn_cut_across_batches_are_never_skipped(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """Oracle gives every row of a transaction its commit's SCN: a batch may end between
    them, and the SCN stored after it must not pass the rows of that SCN still unread."""
    _enable(run_cli)
    stored = _last_scn()
    assert stored is not None
    _update(engine, [1, 2, 3, 4, 5], "one transaction")
    with engine.begin() as db:  # rows 1-3 committed at one SCN, rows 4-5 at a later one
        db.execute(sa.text("UPDATE items SET gl_rowscn = :s WHERE id <= 3"), {"s": stored + 3})
        db.execute(sa.text("UPDATE items SET gl_rowscn = :s WHERE id IN (4, 5)"), {"s": stored + 5})
    # Batches: two rows of SCN +3; the third row of +3 and one of +5; the last row of +5.
    # Killed before the second batch's Delta commit: rows 3 and 4 never reached the lake.
    _crash(
        "extract.before_delta_commit@2",
        "--incremental-run-extraction",
        "--incremental-batch-size=2",
    )
    assert _delta_rows() == 2
    assert _last_scn() == stored + 2  # below SCN +3: its third row is read again
    assert _extract(run_cli) == 5
    assert _lake() == _source(engine)


def _notes() -> dict[int, object]:
    """The added ``note`` column of the user view, by key."""
    view = lake_rows("SELECT id, note FROM main.items")
    return {int(str(row["id"])): row["note"] for row in view}


def test_a_column_added_without_a_default_reads_no_row_again(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """Rows unchanged since read NULL in a column added without a default, as the lake
    already shows them: reading the whole table again would ship every row for nothing
    (a warehouse table's full scan)."""
    _enable(run_cli)
    with engine.begin() as db:
        db.execute(sa.text("ALTER TABLE items ADD COLUMN note TEXT"))
    assert _extract(run_cli) == 0
    assert _notes() == {i: None for i in range(1, 11)}
    _update(engine, [3], "after")
    assert _extract(run_cli) == 1
    assert _lake() == _source(engine)


def test_a_column_added_with_a_default_reaches_the_rows_unchanged_since(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """Oracle (11g NOT NULL, 12c+ any) keeps an added column's default as metadata: the rows
    read it without being rewritten, so their ORA_ROWSCN stays put. SQLite's ADD COLUMN does
    the same to the double (no trigger fires, no SCN moves): the carry has every row read
    again, with the column, instead of leaving them NULL in the lake."""
    _enable(run_cli)
    _update(engine, [1], "shipped before")
    assert _extract(run_cli) == 1
    with engine.begin() as db:
        db.execute(sa.text("ALTER TABLE items ADD COLUMN note TEXT NOT NULL DEFAULT 'preset'"))
    assert _extract(run_cli) == 10  # every row, at the SCN it had
    assert _last_scn() == current_scn(engine)
    # Row 1's image was shipped twice at one SCN: the later run's, with the column, shows.
    assert _notes() == {i: "preset" for i in range(1, 11)}

    _update(engine, [2], "after")
    assert _extract(run_cli) == 1  # the re-read happened once
    assert _lake() == _source(engine)
    # Compaction keeps, of the two images of row 1 at one SCN, the later run's.
    compacted = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--incremental-run-extraction",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert compacted.exit_code == 0, compacted.stderr
    assert _notes() == {i: "preset" for i in range(1, 11)}
    assert _lake() == _source(engine)
