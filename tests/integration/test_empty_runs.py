"""The service's extraction that finds nothing leaves no run row (``record_empty=False``;
a source whose capture misses TRUNCATE records its row counts, so PostgreSQL here),
and a crash around that removal, or around writing the counted checks, loses nothing: the
next extraction ships every change once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.incremental import (
    SEED,
    Source,
    assert_no_duplicate_sequences,
    enable,
    extract,
    lake_state,
    postgres_source,
    workload_for,
)
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import EmptyChecks

KEY = "APP.ITEMS"

SERVICE_RUN = f"""
from gluon.config import load_settings
from gluon.extract.run import run_extraction
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import EmptyChecks
import sys
settings = load_settings()
if sys.argv[1] == "checks":
    Repository(settings.repo_url).incremental.record_empty_checks(
        [EmptyChecks("{KEY}", None, now(), 3)]
    )
else:
    run_extraction(settings, TableRef("app", "items"), record_empty=False)
"""


def service_run(what: str, fault: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-c", SERVICE_RUN, what],
        capture_output=True,
        text=True,
        env={**os.environ, "GLUON_FAULT": fault},
        timeout=300,
        check=False,
    )


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    return source


def test_an_empty_service_run_leaves_no_row_and_crashes_around_it_lose_nothing(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    repo = Repository(load_settings().repo_url)
    workload.round(10)
    extract(run_cli, source)
    recorded = len(repo.incremental.extraction_runs(KEY))

    ran = service_run("run", "none")
    assert ran.returncode == 0, ran.stderr
    assert len(repo.incremental.extraction_runs(KEY)) == recorded, "an empty run left a row"

    for point in (
        "repo.before_discard_empty_extraction",
        "repo.after_discard_empty_extraction",
        "repo.before_record_empty_checks",
        "repo.after_record_empty_checks",
    ):
        crashed = service_run("checks" if "checks" in point else "run", point)
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        workload.round(10)
        extract(run_cli, source)
        assert lake_state(source.schema) == workload.expected, f"after a crash at {point}"
        assert_no_duplicate_sequences(source)

    # The counted checks: the latest time shows as the most recent extraction.
    before = now()
    repo.incremental.record_empty_checks([EmptyChecks(KEY, None, before, 2)])
    totals = repo.incremental.extraction_totals(KEY)
    assert totals.last_success_at == before
