"""Bad input: one clear error line on stderr, a non-zero exit code, and no change anywhere.

Every case runs the real ``offload`` command against a real source (a SQLite
file or the throwaway PostgreSQL) and then checks that nothing was written:
no repository record, no lake table directory, no Delta table at all.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.lake import delta_version, lake_table_dir
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository

RunCli = Callable[..., Result]


def assert_one_error_line(result: Result, exit_code: int, *fragments: str) -> str:
    """The command failed with ``exit_code`` and said so in one line holding ``fragments``."""
    lines = error_lines(result)
    assert len(lines) == 1, f"expected one error line, got:\n{result.stderr}"
    (line,) = lines
    assert line.startswith("offload: error: "), line
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    assert result.exit_code == exit_code, line
    assert result.stdout == ""
    return line


def assert_nothing_changed(home: Path, table_key: str) -> None:
    """No record of ``table_key``, no lake directory for it, no Delta table under ``home``."""
    schema, table = table_key.lower().split(".")
    assert not lake_table_dir(home, schema, table).exists()
    assert not (home / "lake" / f"{schema}.db").exists()
    assert list(home.rglob("_delta_log")) == []
    if (home / "repo" / "gluon.db").exists():
        repo = Repository(f"sqlite:///{home / 'repo' / 'gluon.db'}")
        assert repo.get_table(table_key) is None
        assert repo.list_tables() == []


@pytest.fixture
def sqlite_source(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    """A SQLite source with one good table, ``main.products``, as GLUON_SOURCE_URL."""
    path = offload_home.parent / "app.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{path}")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, sold_on DATE, "
            "price DECIMAL(10,2), ratio REAL)"
        )
        connection.exec_driver_sql(
            "INSERT INTO products VALUES (1, 'a', '2024-01-01', 1.5, 0.5), "
            "(2, 'b', '2024-02-01', 2.5, 0.25)"
        )
    return engine


@pytest.fixture
def pg_source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return sa.create_engine(pg_url)


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the table -------------------------------------------------------------------------------


def test_unknown_table_sqlite(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    result = run_cli("offload", "-t", "main.no_such_table", "-x")
    assert_one_error_line(result, 1, "MAIN.NO_SUCH_TABLE", "does not exist")
    assert_nothing_changed(offload_home, "MAIN.NO_SUCH_TABLE")


def test_unknown_sqlite_database_names_the_attached_ones(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    result = run_cli("offload", "-t", "sales.products", "-x")
    assert_one_error_line(result, 1, "does not exist", "'sales'", "main")
    assert_nothing_changed(offload_home, "SALES.PRODUCTS")


def test_unknown_table_postgres(pg_source: sa.Engine, offload_home: Path, run_cli: RunCli) -> None:
    result = run_cli("offload", "-t", "public.no_such_table", "-x")
    assert_one_error_line(result, 1, "PUBLIC.NO_SUCH_TABLE", "does not exist")
    assert_nothing_changed(offload_home, "PUBLIC.NO_SUCH_TABLE")


@pytest.mark.parametrize("table", ["products", "main.products.extra", "main.", "main.prod-ucts"])
def test_bad_table_format_is_a_usage_error(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli, table: str
) -> None:
    result = run_cli("offload", "-t", table, "-x")
    assert_one_error_line(result, 2, "-t expects SCHEMA.TABLE", repr(table))
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


# -- the source database ---------------------------------------------------------------------


def test_unreachable_postgres(
    offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    password = "s3cr3t-pa55"
    url = f"postgresql+psycopg://gluon:{password}@127.0.0.1:{closed_port()}/app"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    result = run_cli("offload", "-t", "public.products", "-x")
    line = assert_one_error_line(result, 1, "cannot connect", "GLUON_SOURCE_URL")
    assert password not in line
    assert_nothing_changed(offload_home, "PUBLIC.PRODUCTS")
    assert all(password not in log.read_text() for log in (offload_home / "log").iterdir())


def test_missing_sqlite_file(
    offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    missing = offload_home.parent / "no" / "such.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{missing}")
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 1, str(missing), "does not exist", "GLUON_SOURCE_URL")
    assert not missing.exists()  # not created as an empty database either
    assert not missing.parent.exists()
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_no_source_url(offload_home: Path, run_cli: RunCli) -> None:
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 2, "GLUON_SOURCE_URL is not set")
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_unsupported_source_dialect(
    offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", "postgres://gluon@127.0.0.1/app")
    result = run_cli("offload", "-t", "public.products", "-x")
    assert_one_error_line(
        result, 2, "GLUON_SOURCE_URL", "'postgres' is not supported", "did you mean postgresql"
    )
    assert_nothing_changed(offload_home, "PUBLIC.PRODUCTS")


# -- settings --------------------------------------------------------------------------------


def test_missing_offload_home(
    sqlite_source: sa.Engine, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    monkeypatch.delenv("OFFLOAD_HOME")
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 2, "OFFLOAD_HOME is not set")
    assert list(offload_home.iterdir()) == []


def test_unwritable_lake_root(
    sqlite_source: sa.Engine, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    regular_file = offload_home.parent / "a-regular-file"
    regular_file.write_text("not a directory\n")
    lake_root = regular_file / "lake"
    monkeypatch.setenv("OFFLOAD_LAKE_ROOT", str(lake_root))
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 2, "OFFLOAD_LAKE_ROOT", str(lake_root), "not writable")
    assert regular_file.read_text() == "not a directory\n"
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_unwritable_log_directory(
    sqlite_source: sa.Engine, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    regular_file = offload_home.parent / "a-regular-file"
    regular_file.touch()
    monkeypatch.setenv("OFFLOAD_LOGDIR", str(regular_file / "log"))
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 2, "log directory", str(regular_file / "log"))
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_malformed_env_file(sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli) -> None:
    env_file = offload_home / "conf" / "offload.env"
    env_file.parent.mkdir()
    env_file.write_text("OFFLOAD_LAKE_ROOT=/tmp/lake\nnot an assignment\n")
    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 2, f"{env_file}:2")
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


# -- column types ----------------------------------------------------------------------------


def test_unsupported_postgres_column_types(
    pg_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    with pg_source.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE public.readings (id integer PRIMARY KEY, tags int[], "
            "price money, valid int4range, note text)"
        )
    result = run_cli("offload", "-t", "public.readings", "-x")
    line = assert_one_error_line(
        result,
        1,
        "PUBLIC.READINGS",
        "cannot offload without loss",
        "tags (integer[])",
        "price (money)",
        "valid (int4range)",
    )
    listed = line.split("without loss: ", 1)[1].split("; ", 1)[0]
    assert listed == "tags (integer[]), price (money), valid (int4range)"
    assert_nothing_changed(offload_home, "PUBLIC.READINGS")


def test_sqlite_column_without_a_declared_type(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    with sqlite_source.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE loose (id INTEGER PRIMARY KEY, anything)")
        connection.exec_driver_sql("INSERT INTO loose VALUES (1, 'x'), (2, 2.5)")
    result = run_cli("offload", "-t", "main.loose", "-x")
    assert_one_error_line(result, 1, "MAIN.LOOSE", "anything (no declared type)")
    assert_nothing_changed(offload_home, "MAIN.LOOSE")


# -- the offload's state and options ---------------------------------------------------------


def test_offloading_again_without_reset(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    first = run_cli("offload", "-t", "main.products", "-x")
    assert first.exit_code == 0, first.stderr
    location = lake_table_dir(offload_home, "main", "products")
    version = delta_version(location)
    repo = Repository(load_settings().repo_url)
    before = repo.get_table("MAIN.PRODUCTS")

    result = run_cli("offload", "-t", "main.products", "-x")
    assert_one_error_line(result, 1, "already offloaded", "--reset-backend-table")
    assert delta_version(location) == version
    assert repo.get_table("MAIN.PRODUCTS") == before


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (
            ["--partition-columns=sold_date"],
            ["--partition-columns", "'sold_date'", "id, name, sold_on, price, ratio"],
        ),
        (["--partition-columns=ratio"], ["ratio", "cannot partition"]),
        (
            ["--partition-columns=sold_on", "--partition-granularity=W"],
            ["--partition-granularity", "Y, M or D", "'W'"],
        ),
        (
            ["--partition-columns=id", "--partition-granularity=0"],
            ["--partition-granularity", "positive whole number", "'0'"],
        ),
        (
            ["--partition-columns=price"],
            ["--partition-granularity is needed for decimal column price"],
        ),
        (["--partition-granularity=M"], ["--partition-granularity needs --partition-columns"]),
        (
            ["--partition-columns=sold_on,id", "--partition-granularity=M,10,5"],
            ["one value or one per partition column (2), found 3"],
        ),
    ],
    ids=[
        "unknown-column",
        "unusable-type",
        "bad-date-granularity",
        "bad-range-width",
        "decimal-needs-width",
        "granularity-without-columns",
        "granularity-count",
    ],
)
def test_bad_partitioning(
    sqlite_source: sa.Engine,
    offload_home: Path,
    run_cli: RunCli,
    options: list[str],
    fragments: list[str],
) -> None:
    result = run_cli("offload", "-t", "main.products", "-x", *options)
    assert_one_error_line(result, 2, *fragments)
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_bad_partitioning_is_reported_without_execute_too(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    result = run_cli("offload", "-t", "main.products", "--partition-columns=nope")
    assert_one_error_line(result, 2, "'nope'")
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_unreachable_spark_remote_fails_fast_in_one_line(
    offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:{port}")
    Repository(load_settings().repo_url, create=True)  # a query needs an existing repository
    result = run_cli("gluon", "query", "SELECT 1")
    assert result.exit_code == 1
    (line,) = error_lines(result)
    assert "SPARK_REMOTE" in line and "does not answer" in line
    # Refused by gluon's connect probe, before pyspark (which would retry for minutes).
    assert "Connection refused" in line


# -- validation gaps (issue 12, reproduction 13) ---------------------------------------------


def assert_no_log_file(home: Path) -> None:
    """Bad input that names the log file is refused before the log file is opened."""
    log_dir = home / "log"
    assert not log_dir.exists() or list(log_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("table", "fragments"),
    [
        ("main.a/b", ["-t expects SCHEMA.TABLE", "'main.a/b'"]),
        ("main/x.products", ["-t expects SCHEMA.TABLE"]),
        ("main." + "x" * 300, ["-t", "longer than", "128"]),
    ],
    ids=["slash-in-table", "slash-in-schema", "300-characters"],
)
def test_table_text_that_would_name_the_log_file(
    sqlite_source: sa.Engine,
    offload_home: Path,
    run_cli: RunCli,
    table: str,
    fragments: list[str],
) -> None:
    result = run_cli("offload", "-t", table, "-x")
    assert_one_error_line(result, 2, *fragments)
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")
    assert_no_log_file(offload_home)


@pytest.mark.parametrize("program", ["display_incremental_status"])
def test_status_table_text_with_a_slash(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli, program: str
) -> None:
    result = run_cli(program, "-t", "main.a/b")
    (line,) = error_lines(result)
    assert line.startswith(f"{program}: error: -t expects SCHEMA.TABLE"), line
    assert result.exit_code == 2
    assert_no_log_file(offload_home)


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (
            ["--incremental-run-extraction", "--incremental-batch-size=2147483648"],
            ["--incremental-batch-size", "2147483647", "2147483648"],
        ),
        (
            ["--incremental-run-compaction", "--incremental-vacuum-retention-hours=inf"],
            ["--incremental-vacuum-retention-hours", "finite", "inf"],
        ),
        (
            ["--incremental-run-compaction", "--incremental-vacuum-retention-hours=nan"],
            ["--incremental-vacuum-retention-hours", "finite", "nan"],
        ),
        (
            ["--incremental-run-compaction", "--incremental-wait-time=inf"],
            ["--incremental-wait-time", "finite", "inf"],
        ),
        (
            ["--incremental-run-compaction", "--incremental-wait-time=nan"],
            ["--incremental-wait-time", "finite", "nan"],
        ),
        (
            ["--incremental-run-extraction", "--incremental-batch-size=0"],
            ["--incremental-batch-size", "between 1 and", "found 0"],
        ),
        (
            ["--incremental-run-compaction", "--incremental-wait-time=-1"],
            ["--incremental-wait-time", "at least 0", "-1"],
        ),
        (["--offload-predicate="], ["--offload-predicate is empty"]),
        (["--offload-predicate=  "], ["--offload-predicate is empty"]),
        (["--offload-predicate=column(price) < numeric(NaN)"], ["'NaN'", "finite number"]),
        (["--offload-predicate=column(price) < numeric(-Infinity)"], ["finite number"]),
        (["--offload-predicate=column(price) < numeric(sNaN)"], ["finite number"]),
        (
            ["--offload-predicate=" + "(" * 2000 + "column(id) = numeric(1)" + ")" * 2000],
            ["nested more than", "deep"],
        ),
        (
            ["--offload-predicate=" + "not " * 2000 + "column(id) = numeric(1)"],
            ["nested more than", "deep"],
        ),
    ],
    ids=[
        "batch-size-2^31",
        "vacuum-inf",
        "vacuum-nan",
        "wait-inf",
        "wait-nan",
        "batch-size-0",
        "wait-negative",
        "empty-predicate",
        "blank-predicate",
        "numeric-nan",
        "numeric-minus-infinity",
        "numeric-snan",
        "nested-parentheses",
        "nested-not",
    ],
)
def test_option_values_no_code_path_can_take(
    sqlite_source: sa.Engine,
    offload_home: Path,
    run_cli: RunCli,
    options: list[str],
    fragments: list[str],
) -> None:
    result = run_cli("offload", "-t", "main.products", "-x", *options)
    assert_one_error_line(result, 2, *fragments)
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")


def test_infinite_options_of_an_enabled_table_change_nothing(
    sqlite_source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    """Refused up front on a table with changes, not after the views switched."""
    enabled = run_cli(
        "offload",
        "-t",
        "main.products",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    with sqlite_source.begin() as connection:
        connection.exec_driver_sql("UPDATE products SET name = 'c' WHERE id = 1")
    extracted = run_cli("offload", "-t", "main.products", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    repo = Repository(load_settings().repo_url)
    runs_before = repo.compaction.runs("MAIN.PRODUCTS")
    for option in ("--incremental-vacuum-retention-hours=inf", "--incremental-wait-time=nan"):
        result = run_cli(
            "offload", "-t", "main.products", "-x", "--incremental-run-compaction", option
        )
        assert_one_error_line(result, 2, option.split("=")[0], "finite")
    assert repo.compaction.runs("MAIN.PRODUCTS") == runs_before
    big = run_cli(
        "offload",
        "-t",
        "main.products",
        "-x",
        "--incremental-run-extraction",
        "--incremental-batch-size=2147483648",
    )
    assert_one_error_line(big, 2, "--incremental-batch-size")


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("GLUON_SOURCE_URL", "postgresql+psycopg://gluon:pw@127.0.0.1:abc/app"),
        ("GLUON_SOURCE_URL", "postgresql+psycopg://gluon:pw@127.0.0.1:99999/app"),
        ("GLUON_REPO_URL", "postgresql+psycopg://gluon:pw@127.0.0.1:5x/repo"),
    ],
    ids=["source-port-not-a-number", "source-port-out-of-range", "repository-port"],
)
def test_malformed_port_in_a_url(
    sqlite_source: sa.Engine,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    variable: str,
    url: str,
) -> None:
    monkeypatch.setenv(variable, url)
    result = run_cli("offload", "-t", "main.products", "-x")
    line = assert_one_error_line(result, 2, variable, "port")
    assert ":pw@" not in line
    assert_nothing_changed(offload_home, "MAIN.PRODUCTS")
