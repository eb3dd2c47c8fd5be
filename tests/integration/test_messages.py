"""Messages that name the real problem (issue 17): one line on stderr, a documented exit code.

Each case runs the real commands against a real source (a SQLite file, or the throwaway
PostgreSQL) and asserts the whole error line, not a fragment: a message that points
elsewhere ("incremental update is not enabled" for a misspelled table) is the bug.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import error_lines
from support.tables import App, compact, enable, extract, offload, ok
from typer.testing import Result

RunCli = Callable[..., Result]

INCREMENTAL_ACTIONS = (
    ("--incremental-run-extraction",),
    ("--incremental-run-extraction", "-x"),
    ("--incremental-run-compaction", "-x"),
    ("--incremental-run-compaction",),
    ("--incremental-updates-disabled", "-x"),
    ("--incremental-discard-changes", "-x"),
    ("--incremental-abandon-compaction", "-x"),
    ("--incremental-stage-lake-rows", "none", "-x"),
)


def one_error_line(result: Result, program: str, exit_code: int) -> str:
    """The command failed with ``exit_code`` and said why in one line (no traceback)."""
    lines = error_lines(result)
    assert len(lines) == 1, f"expected one error line, got:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    assert result.exit_code == exit_code, lines[0]
    prefix = f"{program}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0].removeprefix(prefix)


@pytest.fixture
def app(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    """A SQLite source (its main database) with ``main.products``, 3 rows, as the source."""
    url = f"sqlite:///{offload_home.parent / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    source = App(url, "main")
    source.create_table("products", 3)
    return source


def test_a_misspelled_table_is_not_offloaded_whatever_the_action(app: App, run_cli: RunCli) -> None:
    offload(run_cli, "main.products")
    for action in INCREMENTAL_ACTIONS:
        result = run_cli("offload", "-t", "main.prodcts", *action)
        assert one_error_line(result, "offload", 1) == (
            "MAIN.PRODCTS has not been offloaded (the repository has no record of it); "
            "did you mean MAIN.PRODUCTS?"
        ), action
        assert result.stdout == ""
    status = run_cli("display_incremental_status", "-t", "main.prodcts")
    assert one_error_line(status, "display_incremental_status", 1) == (
        "MAIN.PRODCTS has not been offloaded (the repository has no record of it); "
        "did you mean MAIN.PRODUCTS?"
    )
    unlike = run_cli("offload", "-t", "main.orders", "--incremental-run-extraction", "-x")
    assert one_error_line(unlike, "offload", 1) == (
        "MAIN.ORDERS has not been offloaded (the repository has no record of it): "
        "offload it first with: offload -t MAIN.ORDERS -x"
    )


def test_unknown_schema_and_table_in_the_source_at_offload(app: App, run_cli: RunCli) -> None:
    table = run_cli("offload", "-t", "main.prodcts", "-x")
    assert one_error_line(table, "offload", 1) == (
        "table MAIN.PRODCTS does not exist in the sqlite source database "
        "(check the -t value and GLUON_SOURCE_URL)"
    )
    schema = run_cli("offload", "-t", "mian.products", "-x")
    assert one_error_line(schema, "offload", 1) == (
        "table MIAN.PRODUCTS does not exist: SQLite source has no database 'mian' "
        "(attached: main; the main file is 'main')"
    )


def test_unknown_schema_in_a_postgresql_source_is_named(
    pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    App(pg_url, "public").create_table("items", 2)
    schema = run_cli("offload", "-t", "shop.items", "-x")
    assert one_error_line(schema, "offload", 1) == (
        "table SHOP.ITEMS does not exist: the postgresql source database has no schema SHOP "
        "(check the -t value and GLUON_SOURCE_URL)"
    )
    table = run_cli("offload", "-t", "public.itmes", "-x")
    assert one_error_line(table, "offload", 1) == (
        "table PUBLIC.ITMES does not exist in the postgresql source database "
        "(check the -t value and GLUON_SOURCE_URL)"
    )


def test_an_offloaded_table_not_enabled_says_how_to_enable(app: App, run_cli: RunCli) -> None:
    offload(run_cli, "main.products")
    result = run_cli("offload", "-t", "main.products", "-x", "--incremental-run-extraction")
    assert one_error_line(result, "offload", 1) == (
        "incremental update is not enabled for MAIN.PRODUCTS: enable it with "
        "--incremental-updates-enabled --incremental-extraction-method=METHOD"
    )
    disabled = run_cli("offload", "-t", "main.products", "-x", "--incremental-updates-disabled")
    assert one_error_line(disabled, "offload", 1) == (
        "incremental update is not enabled for MAIN.PRODUCTS: nothing to disable"
    )


def test_an_enabled_table_whose_delta_table_is_gone_says_so(
    app: App, run_cli: RunCli, offload_home: Path
) -> None:
    enable(run_cli, "main.products")
    delta = offload_home / "lake" / "main_load.db" / "products_changes"
    assert delta.is_dir()
    shutil.rmtree(delta)
    app.change("main.products", first_key=10)
    expected = (
        f"incremental update is enabled for MAIN.PRODUCTS but its delta table {delta} is "
        "missing from the lake: restore it from a backup, or disable and enable incremental "
        "update again"
    )
    result = run_cli("offload", "-t", "main.products", "-x", "--incremental-run-extraction")
    assert one_error_line(result, "offload", 1) == expected
    compaction = run_cli("offload", "-t", "main.products", "-x", "--incremental-run-compaction")
    assert one_error_line(compaction, "offload", 1) == expected  # not "0 changes: nothing to do"


@pytest.mark.parametrize(
    ("statement", "engine_words"),
    [
        ("SELECT * FROM main.nothing", "Table or view not found: nothing"),
        ("SELEC 1", "found SELEC"),
        ("SELECT no_such_column FROM main.products", "no_such_column"),
    ],
)
def test_query_errors_are_one_line_in_the_engine_words(
    app: App,
    run_cli: RunCli,
    statement: str,
    engine_words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offload(run_cli, "main.products")
    # A user's bad SQL is not gluon's: kept out of the session's portability check.
    monkeypatch.setenv("GLUON_RECORD_SQL", str(tmp_path / "user_statements.jsonl"))
    result = run_cli("gluon", "query", statement)
    line = one_error_line(result, "gluon", 1)
    assert line.startswith("the query failed: "), line
    assert engine_words in line
    assert "unexpected" not in line and "Exception" not in line
    assert result.stdout == ""


def test_the_enable_plan_names_the_changelog_schema_once(
    pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    App(pg_url, "public").create_table("items", 2)
    plan = ok(
        run_cli(
            "offload",
            "-t",
            "public.items",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        )
    )
    assert "create schema public_h in the source" in plan.stdout
    assert "public_h.public_h" not in plan.stdout


def test_success_lines_carry_counts(app: App, run_cli: RunCli) -> None:
    offloaded = ok(run_cli("offload", "-t", "main.products", "-x"))
    assert offloaded.stdout.splitlines()[0] == (
        "Offloaded MAIN.PRODUCTS: 3 rows, query it as main.products"
    )
    app.create_table("orders", 4)
    enabled = ok(
        run_cli(
            "offload",
            "-t",
            "main.orders",
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        )
    )
    assert enabled.stdout.splitlines()[0] == (
        "Incremental update enabled for MAIN.ORDERS with CHANGELOG after offloading 4 rows; "
        "query main.orders for the latest state"
    )
    changes = app.change("main.orders", first_key=10)
    extracted = extract(run_cli, "main.orders").stdout.splitlines()[0]
    assert extracted.startswith(f"Extracted {changes} changes of MAIN.ORDERS")
    compacted = compact(run_cli, "main.orders").stdout.splitlines()[0]
    assert compacted.endswith(f"complete: {changes} changes merged into the base table")


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity tokens (Python accepts them; JSON does not)."""

    def refuse(token: str) -> None:
        raise ValueError(f"invalid JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_query_json_is_valid_json_for_nan_and_infinities(app: App, run_cli: RunCli) -> None:
    offload(run_cli, "main.products")  # a repository to open
    result = ok(
        run_cli(
            "gluon",
            "query",
            "--json",
            "SELECT CAST('NaN' AS DOUBLE) AS nan, CAST('Infinity' AS DOUBLE) AS plus, "
            "-CAST('Infinity' AS DOUBLE) AS minus, CAST(NULL AS DOUBLE) AS nothing, "
            "CAST(0.5 AS DOUBLE) AS half",
        )
    )
    assert strict_json(result.stdout) == [
        {"nan": "NaN", "plus": "Infinity", "minus": "-Infinity", "nothing": None, "half": 0.5}
    ]
    csv_result = ok(
        run_cli("gluon", "query", "--csv", "SELECT CAST('NaN' AS DOUBLE) AS nan, 1 AS one")
    )
    assert csv_result.stdout.splitlines() == ["nan,one", "NaN,1"]
    # Booleans as the JSON output writes them (issue 30: not Python's True/False).
    flags = ok(run_cli("gluon", "query", "--csv", "SELECT true AS yes, false AS no, 1 AS one"))
    assert flags.stdout.splitlines() == ["yes,no,one", "true,false,1"]
    text = ok(
        run_cli("gluon", "query", "SELECT CAST(NULL AS DOUBLE) AS x, CAST('NaN' AS DOUBLE) AS y")
    )
    assert [line.split() for line in text.stdout.splitlines()] == [["x", "y"], ["NULL", "NaN"]]


def run_program(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``program ARGS`` in a child process, stdout and stderr captured apart."""
    module = {
        "offload": "gluon.cli.offload",
        "gluon": "gluon.cli.app",
        "display_incremental_status": "gluon.cli.status",
    }[program]
    return subprocess.run(
        [sys.executable, "-c", f"from {module} import main; main()", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


def test_progress_goes_to_stderr_and_results_to_stdout(app: App, offload_home: Path) -> None:
    offloaded = run_program("offload", "-t", "main.products", "-x", "-v")
    assert offloaded.returncode == 0, offloaded.stderr
    assert offloaded.stdout.splitlines()[0] == (
        "Offloaded MAIN.PRODUCTS: 3 rows, query it as main.products"
    )
    assert offloaded.stdout.splitlines()[1].startswith("Log file: ")
    assert len(offloaded.stdout.splitlines()) == 2
    assert "offloading MAIN.PRODUCTS" in offloaded.stderr  # -v: the steps, on stderr

    query = run_program("gluon", "query", "--json", "-v", "SELECT id FROM main.products")
    assert query.returncode == 0, query.stderr
    assert strict_json(query.stdout) == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert "query --json -v SELECT id FROM main.products" in query.stderr  # -v: the log lines

    status = run_program("display_incremental_status", "-t", "main.products", "--json", "-v")
    assert status.returncode == 0, status.stderr
    document = strict_json(status.stdout)
    assert document["table_key"] == "MAIN.PRODUCTS"
    assert status.stderr.strip() != ""  # -v: the steps, on stderr


def step_durations(log_file: Path) -> dict[str, float]:
    """``step NAME: done in S.SSSs`` lines of a command's log -> {NAME: seconds}."""
    found: dict[str, float] = {}
    for line in log_file.read_text(encoding="utf-8").splitlines():
        _, marker, rest = line.partition(" gluon.steps: step ")
        name, done, seconds = rest.partition(": done in ")
        if marker and done:
            found[name] = float(seconds.split("s", 1)[0])
    return found


def log_file_of(result: Result) -> Path:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("Log file: ")]
    return Path(line.removeprefix("Log file: "))


def test_the_log_holds_every_step_with_its_duration(app: App, run_cli: RunCli) -> None:
    offloaded = ok(
        run_cli(
            "offload",
            "-t",
            "main.products",
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        )
    )
    steps = step_durations(log_file_of(offloaded))
    assert set(steps) == {
        "create_capture",
        "count_rows",
        "start_engine",
        "record_start",
        "copy_rows",
        "verify_rows",
        "create_views",
        "record_done",
        "create_delta_table",
        "record_enabled",
    }
    assert all(seconds >= 0 for seconds in steps.values())
    assert "offload done in " in log_file_of(offloaded).read_text(encoding="utf-8")

    app.change("main.products", first_key=10)
    extracted = extract(run_cli, "main.products")
    assert set(step_durations(log_file_of(extracted))) == {
        "schema_changes",
        "check_capture",
        "ship_changes",
        "read",  # no start_engine: a batch that only appends is written with deltalake
        "write",
        "done",
        "count_rows",  # SQLite's capture sees no TRUNCATE: gluon.extract.truncation compares counts
    }
    compacted = compact(run_cli, "main.products")
    assert {"request_diversion", "compact", "switch_views", "vacuum"} <= set(
        step_durations(log_file_of(compacted))
    )
