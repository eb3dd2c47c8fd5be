"""Table-shape matrix (issue 26, deliverable 4): DML that needs a table of its own.

Every shape's standard rounds already cover inserts, updates, key changes, deletes,
multi-row statements and one key changed many times in one transaction
(support/shapes.py). Here: a multi-row UPDATE that shifts keys onto each other
(PostgreSQL, a DEFERRABLE primary key), TRUNCATE, TRUNCATE and inserts in one
transaction; SQLite's DELETE without WHERE. Compared value for value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, run_case, sqlite_url
from support.shapes import Case, cases, dml_shapes


@pytest.mark.parametrize("case", cases(dml_shapes("sqlite")))
def test_sqlite_dml_shape(
    case: Case, tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run_case(case, url, run_cli)


@pytest.mark.parametrize("case", cases(dml_shapes("postgresql")))
def test_postgresql_dml_shape(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)
