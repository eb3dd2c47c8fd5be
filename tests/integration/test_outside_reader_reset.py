"""A reader outside gluon holding the base table's first path across ``--reset-backend-table``
(issue 28's hidden scenario, found by qa28).

A reset copies the table anew; the reader holding the first path must read the new copy
(issue 28: one location per base table for its whole life). Real SQLite, Sail and Delta.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import RunCli, lake_rows, run_offload_process
from support.statements import configured_source

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

TABLE = "main.kept"
SETUP = (
    "CREATE TABLE kept (id INTEGER PRIMARY KEY, val TEXT)",
    "INSERT INTO kept VALUES (1, 'a'), (2, 'b')",
)


def _rows(rows: list[dict[str, object]]) -> list[tuple[str, ...]]:
    return sorted(tuple(str(row[name]) for name in ("id", "val")) for row in rows)


def _cli(run_cli: RunCli, *args: str) -> None:
    result = run_cli("offload", "-t", TABLE, "-x", *args)
    assert result.exit_code == 0, result.stderr


def test_a_reader_holding_the_first_path_reads_the_reset_copy(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = configured_source(f"sqlite:///{tmp_path / 'app.db'}", monkeypatch, *SETUP)
    _cli(run_cli)
    record = Repository(load_settings().repo_url).get_table("MAIN.KEPT")
    assert record is not None
    first_path = record.base_path
    with engine.begin() as db:
        db.execute(sa.text("UPDATE kept SET val = 'changed' WHERE id = 1"))
    _cli(run_cli, "--reset-backend-table")
    assert _rows(DeltaTable(first_path).to_pyarrow_table().to_pylist()) == [
        ("1", "changed"),
        ("2", "b"),
    ]


@pytest.mark.parametrize(
    ("fault", "seen_after_kill"),
    [("offload.before_reset_publish", "a"), ("offload.after_reset_publish", "changed")],
)
def test_a_reset_killed_around_its_publish_leaves_the_reader_a_whole_copy(
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    seen_after_kill: str,
) -> None:
    engine = configured_source(f"sqlite:///{tmp_path / 'app.db'}", monkeypatch, *SETUP)
    _cli(run_cli)
    record = Repository(load_settings().repo_url).get_table("MAIN.KEPT")
    assert record is not None
    with engine.begin() as db:
        db.execute(sa.text("UPDATE kept SET val = 'changed' WHERE id = 1"))
    died = run_offload_process(
        "-t", TABLE, "-x", "--reset-backend-table", env={"GLUON_FAULT": fault}
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    assert _rows(DeltaTable(record.base_path).to_pyarrow_table().to_pylist()) == [
        ("1", seen_after_kill),
        ("2", "b"),
    ]
    _cli(run_cli, "--reset-backend-table")
    assert _rows(DeltaTable(record.base_path).to_pyarrow_table().to_pylist()) == [
        ("1", "changed"),
        ("2", "b"),
    ]
    after = Repository(load_settings().repo_url).get_table("MAIN.KEPT")
    assert after is not None and after.base_path == record.base_path


def test_a_base_an_older_reset_moved_comes_back_to_the_first_path(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured_source(f"sqlite:///{tmp_path / 'app.db'}", monkeypatch, *SETUP)
    _cli(run_cli)
    repo = Repository(load_settings().repo_url)
    record = repo.get_table("MAIN.KEPT")
    assert record is not None
    first_path = Path(record.base_path)
    moved = first_path.with_name(f"{first_path.name}_r20250101000000000000")
    first_path.rename(moved)  # where an older gluon's reset left the base
    repo.save_table(replace(record, base_path=str(moved)))
    _cli(run_cli, "--reset-backend-table")
    after = Repository(load_settings().repo_url).get_table("MAIN.KEPT")
    assert after is not None and after.base_path == str(first_path)
    assert not moved.exists()
    assert _rows(DeltaTable(str(first_path)).to_pyarrow_table().to_pylist()) == [
        ("1", "a"),
        ("2", "b"),
    ]


ENABLE = ("--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")


@pytest.mark.parametrize(
    "fault",
    [
        "offload.before_reset_publish",
        "offload.after_reset_publish",
        # the window between the publish and the repository update: the record's old columns
        "repo.before_save_table",
        "repo.after_save_table",
    ],
)
def test_a_reset_with_the_enable_killed_completes_when_run_again(
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    """``--reset-backend-table --incremental-updates-enabled`` (docs/operations.md, the way to
    copy a table anew) killed at its publish or its repository update: the same command run
    again finishes it (it found the enable it interrupted and refused "enabled" before), the
    record holds the source's columns, and the next change ships."""
    engine = configured_source(f"sqlite:///{tmp_path / 'app.db'}", monkeypatch, *SETUP)
    _cli(run_cli, *ENABLE)
    _cli(run_cli, "--incremental-updates-disabled")
    with engine.begin() as db:  # while disabled: only a new copy brings these
        db.execute(sa.text("ALTER TABLE kept ADD COLUMN note TEXT"))
        db.execute(sa.text("UPDATE kept SET val = 'changed', note = 'n' WHERE id = 1"))
    reset = ("--reset-backend-table", *ENABLE)
    died = run_offload_process("-t", TABLE, "-x", *reset, env={"GLUON_FAULT": fault})
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    _cli(run_cli, *reset)
    record = Repository(load_settings().repo_url).get_table("MAIN.KEPT")
    assert record is not None
    assert [column.name.lower() for column in record.columns] == ["id", "val", "note"]
    with engine.begin() as db:
        db.execute(sa.text("INSERT INTO kept VALUES (3, 'c', NULL)"))
    _cli(run_cli, "--incremental-run-extraction")
    shown = lake_rows(f"SELECT id, val, note FROM {record.user_view}")
    assert sorted((row["id"], row["val"], row["note"]) for row in shown) == [
        (1, "changed", "n"),
        (2, "b", None),
        (3, "c", None),
    ]
