"""Table-shape matrix (issue 26, deliverable 4): names.

SQL keywords as schema, table and column names; mixed case; spaces and non-ASCII; the
longest names the dialect allows (PostgreSQL: 63 bytes). Each shape with every method of
its dialect, the merge mode drawn; compared value for value (support/shape_matrix.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, run_case, sqlite_url
from support.shapes import Case, cases, name_shapes


@pytest.mark.parametrize("case", cases(name_shapes("sqlite")))
def test_sqlite_name_shape(
    case: Case, tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run_case(case, url, run_cli)


@pytest.mark.parametrize("case", cases(name_shapes("postgresql")))
def test_postgresql_name_shape(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)
