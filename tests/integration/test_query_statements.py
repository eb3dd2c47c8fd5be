"""``gluon query`` statements the embedded engine reads differently from Spark, and its
unknown-column error: the Spark form works, the error names the column and the tables.

Real Sail, real Delta tables offloaded from SQLite (one module-wide home: the tests only
read it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import GLUON_SETTINGS, error_lines, run_cli
from support.tables import App, offload
from typer.testing import Result


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``main.products`` and ``main."select"`` (columns id, name, amount), offloaded."""
    with pytest.MonkeyPatch.context() as patch:
        for name in GLUON_SETTINGS:
            patch.delenv(name, raising=False)
        home = tmp_path_factory.mktemp("query_statements") / "offload_home"
        home.mkdir()
        patch.setenv("OFFLOAD_HOME", str(home))
        url = f"sqlite:///{home.parent / 'app.db'}"
        patch.setenv("GLUON_SOURCE_URL", url)
        source = App(url, "main")
        source.create_table("products", 3)
        source.create_table('"select"', 2)
        offload(run_cli, "main.products")
        offload(run_cli, "main.select")
        yield


def _query(statement: str) -> Result:
    return run_cli("gluon", "query", "--json", statement)


def _error(result: Result) -> str:
    lines = error_lines(result)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.exit_code == 1 and result.stdout == ""
    return lines[0]


@pytest.mark.usefixtures("lake")
@pytest.mark.parametrize(
    "statement",
    [
        "DESCRIBE main.products",
        "desc main.products",
        "DESCRIBE TABLE main.products",
        "DESC FORMATTED main.products",
        "DESCRIBE EXTENDED main.products",
    ],
)
def test_describe_with_or_without_table(statement: str) -> None:
    """Spark's ``DESCRIBE name`` (Sail 0.7 took only ``DESCRIBE TABLE name``)."""
    result = _query(statement)
    assert result.exit_code == 0, result.stderr
    assert '"col_name": "amount"' in result.stdout and '"data_type": "decimal(12,2)"' in (
        result.stdout
    )


@pytest.mark.usefixtures("lake")
def test_an_unknown_column_is_named_with_its_table_and_the_columns_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user's bad SQL is not gluon's: kept out of the session's portability check.
    monkeypatch.setenv("GLUON_RECORD_SQL", str(tmp_path / "user_statements.jsonl"))
    assert _error(_query("SELECT bogus FROM main.products")) == (
        "gluon: error: the query failed: column bogus is not in main.products "
        "(columns: id, name, amount)"
    )
    assert _error(_query("SELECT id FROM main.products WHERE amuont > 1")) == (
        "gluon: error: the query failed: column amuont is not in main.products "
        "(did you mean amount? columns: id, name, amount)"
    )
    joined = "SELECT p.nmae FROM main.products p JOIN main.`select` s ON p.id = s.id"
    assert _error(_query(joined)) == (
        "gluon: error: the query failed: column p.nmae is not in main.products or "
        "main.`select` (did you mean name? columns: main.products: id, name, amount; "
        "main.`select`: id, name, amount)"
    )
    assert _error(_query("SELECT bogus FROM range(3)")) == (
        "gluon: error: the query failed: column bogus does not exist in the tables the "
        "statement reads"
    )
