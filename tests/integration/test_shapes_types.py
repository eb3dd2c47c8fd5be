"""Table-shape matrix (issue 26, deliverable 4): types at their edges.

One wide table per dialect whose rows cycle through edge values: numeric precision and
scale extremes, NaN and the infinities (float8, unconstrained numeric), timestamps with
time zones (read in a non-UTC session), time with time zone, interval, bytea with zero
bytes, large TOASTed values changed and left unchanged, json/jsonb, inet/cidr, an enum,
a domain, a generated column. Every method, the merge mode drawn (PG_LOGICAL also as a member
of the shared slot, in the other mode); compared value for value.
What gluon refuses is asserted as a refusal (arrays, infinite dates and timestamps).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, SourceDb, run_case, sqlite_url
from support.shapes import Case, cases, member_cases, pg_type_shape, sqlite_type_shape


@pytest.mark.parametrize("case", cases([sqlite_type_shape()]))
def test_sqlite_edge_values(
    case: Case, tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run_case(case, url, run_cli)


@pytest.mark.parametrize("case", cases([pg_type_shape()]) + member_cases([pg_type_shape()]))
def test_postgresql_edge_values(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)


def _refused(run_cli: RunCli, pg_url: str, *statements: str) -> tuple[list[str], int]:
    SourceDb("postgresql", pg_url).run(["CREATE SCHEMA app", *statements])
    result = run_cli(
        "offload", "-t", "app.t", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )  # fmt: skip
    assert result.exit_code != 0, result.stdout
    return [line for line in result.stderr.splitlines() if line.strip()], result.exit_code


def test_an_array_column_is_refused_in_one_line_and_nothing_is_offloaded(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrays are not carried: the offload says so, naming the column, before writing."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    lines, _ = _refused(
        run_cli, pg_url,
        "CREATE TABLE app.t (id INTEGER PRIMARY KEY, tags TEXT[], scores INTEGER[][])",
        "INSERT INTO app.t VALUES (1, '{a,b}', '{{1,2},{3,4}}')",
    )  # fmt: skip
    assert len(lines) == 1, lines
    assert "tags" in lines[0] and "scores" in lines[0], lines[0]
    assert not (offload_home / "lake").exists() or not any(
        (offload_home / "lake").rglob("*.parquet")
    )
    triggers = SourceDb("postgresql", pg_url).rows(
        "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal"
    )
    assert triggers == [(0,)]


@pytest.mark.parametrize("method", ["CHANGELOG", "PG_LOGICAL"])
@pytest.mark.parametrize(
    "column, value",
    [("d", "'infinity'"), ("ts", "'-infinity'"), ("tstz", "'infinity'")],
)
def test_an_infinite_date_or_timestamp_is_refused_at_enable_leaving_nothing(
    method: str,
    column: str,
    value: str,
    pg_url: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lake's dates and timestamps have no infinity: enabling a table that holds one
    is refused in one line, before any trigger, changelog or slot exists."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    db = SourceDb("postgresql", pg_url)
    db.run(
        [
            "CREATE SCHEMA app",
            "CREATE TABLE app.t (id INTEGER PRIMARY KEY, d DATE, ts TIMESTAMP, tstz TIMESTAMPTZ)",
            "INSERT INTO app.t (id) VALUES (1), (2)",
            f"UPDATE app.t SET {column} = {value} WHERE id = 2",
        ]
    )
    result = run_cli(
        "offload", "-t", "app.t", "-x", "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )  # fmt: skip
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.stderr
    assert column in lines[0], lines[0]
    left = db.rows(
        "SELECT (SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal),"
        " (SELECT count(*) FROM pg_replication_slots),"
        " (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "  WHERE n.nspname = 'app_h')"
    )
    assert left == [(0, 0, 0)], f"triggers, slots, changelog objects left behind: {left}"
