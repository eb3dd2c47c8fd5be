"""Table-shape matrix (issue 26, deliverable 4): PostgreSQL declarative partitioning.

LIST, RANGE and HASH, two levels (LIST over RANGE and HASH), a partition attached after
enable, rows moving between partitions (a key change across RANGE bounds, a LIST column
updated). Every method, the merge mode drawn; compared value for value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, run_case
from support.shapes import Case, cases, partitioned_shapes


@pytest.mark.parametrize("case", cases(partitioned_shapes()))
def test_partitioned_shape(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)
