"""Table-shape matrix (issue 26, deliverable 4): types at their edges.

One wide table per dialect whose rows cycle through edge values: numeric precision and
scale extremes, NaN and the infinities (float8, unconstrained numeric), timestamps with
time zones (read in a non-UTC session), time with time zone, interval, bytea with zero
bytes, large TOASTed values changed and left unchanged, json/jsonb, inet/cidr, an enum,
a domain, a generated column. Every method, the merge mode drawn; compared value for value.
What gluon refuses is asserted as a refusal (arrays, infinite dates and timestamps).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import RunCli, SourceDb, run_case, sqlite_url
from support.shapes import Case, cases, pg_type_shape, sqlite_type_shape


@pytest.mark.parametrize("case", cases([sqlite_type_shape()]))
def test_sqlite_edge_values(
    case: Case, tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run_case(case, url, run_cli)


@pytest.mark.parametrize("case", cases([pg_type_shape()]))
def test_postgresql_edge_values(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    run_case(case, pg_url, run_cli)
