"""Options an ``offload`` action would ignore are refused: one line, exit 2, nothing changed.

What each action accepts is declared with each option (``accepted_by`` in
``gluon/cli/offload_options.py``, read into ``gluon/cli/actions.py``); these cases
run the real command against a real SQLite source.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli
from typer.testing import Result

from gluon.cli.actions import ACCEPTED, COMMON, Action, OffloadArguments
from gluon.cli.offload import app
from gluon.cli.offload_actions import HANDLERS
from gluon.config import load_settings
from gluon.repo import Repository

TABLE = "main.products"


@pytest.fixture
def products(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    path = offload_home.parent / "app.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{path}")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, sold_on DATE)"
        )
        connection.exec_driver_sql(
            "INSERT INTO products VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-02-01')"
        )
    return engine


def assert_refused(result: Result, option: str, action: Action) -> None:
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0] == f"offload: error: {option} does nothing with {action.value}: remove it"
    assert result.exit_code == 2
    assert result.stdout == ""


def source_tables(engine: sa.Engine) -> list[str]:
    return sorted(sa.inspect(engine).get_table_names())


def test_partial_offload_options_with_enable_on_an_offloaded_table_are_refused(
    products: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    assert run_cli("offload", "-t", TABLE, "-x").exit_code == 0
    result = run_cli(
        "offload",
        "-t",
        TABLE,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--offload-predicate=column(SOLD_ON) < date(2024-02-01)",
    )
    assert_refused(result, "--offload-predicate", Action.ENABLE)
    assert Repository(load_settings().repo_url).incremental.get_state(TABLE.upper()) is None
    assert source_tables(products) == ["products"]


@pytest.mark.parametrize(
    ("action_args", "ignored", "action"),
    [
        (["--incremental-run-extraction"], "--incremental-wait-time=0", Action.EXTRACTION),
        (["--incremental-run-extraction"], "--incremental-full-compaction", Action.EXTRACTION),
        (["--incremental-run-compaction"], "--incremental-batch-size=10", Action.COMPACTION),
        (["--incremental-run-compaction"], "--partition-names=p1", Action.COMPACTION),
        (["--incremental-updates-disabled"], "--partition-columns=id", Action.DISABLE),
        (["--incremental-updates-disabled"], "--incremental-key-columns=id", Action.DISABLE),
        ([], "--incremental-key-columns=id", Action.OFFLOAD),
        ([], "--incremental-batch-size=5", Action.OFFLOAD),
        ([], "--incremental-extraction-method=CHANGELOG", Action.OFFLOAD),
        (["--incremental-stage-lake-rows=none"], "--offload-type=FULL", Action.STAGE_LAKE_ROWS),
        (
            ["--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG"],
            "--incremental-wait-time=5",
            Action.ENABLE_WITH_OFFLOAD,
        ),
    ],
)
def test_an_option_the_action_ignores_is_refused(
    products: sa.Engine,
    offload_home: Path,
    run_cli: RunCli,
    action_args: list[str],
    ignored: str,
    action: Action,
) -> None:
    result = run_cli("offload", "-t", TABLE, "-x", *action_args, ignored)
    assert_refused(result, ignored.split("=")[0], action)
    assert list(offload_home.rglob("_delta_log")) == []
    repository = offload_home / "repo" / "gluon.db"  # refused before any offload made one
    assert not repository.exists() or (
        Repository(load_settings().repo_url).get_table(TABLE.upper()) is None
    )
    assert source_tables(products) == ["products"]


def test_every_offload_option_belongs_to_an_action() -> None:
    """A new option must be added to the table, or every action would refuse it."""
    import typer.main

    command = typer.main.get_command(app)
    names = {parameter.name for parameter in command.params}
    known = COMMON.union(*ACCEPTED.values())
    assert names == known


def test_every_offload_option_reaches_the_actions_and_every_action_has_a_function() -> None:
    """``OffloadArguments`` carries every parameter but the console ones to the actions."""
    import dataclasses

    import typer.main

    command = typer.main.get_command(app)
    names = {parameter.name for parameter in command.params} - {"verbose", "debug"}
    fields = {field.name for field in dataclasses.fields(OffloadArguments)} - {"given"}
    assert fields == names
    assert set(HANDLERS) == set(Action)
