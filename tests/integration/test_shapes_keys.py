"""Table-shape matrix (issue 26, deliverable 4): keys.

One integer; composite (integer, text) and (date, text); text; uuid; numeric; a key
that is the lake's partition column; a key change that moves a row to another lake
partition. Each shape runs with every method of its dialect, the merge mode drawn
(support/shapes.py); the lake is compared with the source value for value after every
extraction and after compaction (support/shape_matrix.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, run_case, sqlite_url
from support.shapes import Case, cases, key_shapes


@pytest.mark.parametrize("case", cases(key_shapes("sqlite")))
def test_sqlite_key_shape(
    case: Case, tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run_case(case, url, run_cli)


@pytest.mark.parametrize("case", cases(key_shapes("postgresql")))
def test_postgresql_key_shape(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)
