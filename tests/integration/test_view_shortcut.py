"""A DEFERRED table with nothing pending is read from its base table alone (issue 28).

gluon's sessions register the user view over the base table, with no join, when the delta
table's current version has no file in the view's control partitions; after an
extraction they merge again, and a long session (``gluon shell``) re-registers once the
delta table has a newer version (``gluon.read.catalog.refresh_pending``). Results always equal
the source.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.incremental import RunCli, enable, extract, sqlite_source, workload_for
from support.workload import canonical

from gluon.config import EngineKind, load_settings
from gluon.lake.session import LakeSession
from gluon.read.catalog import lake_session, refresh_pending

VIEW = "main.items"
COUNT = f"SELECT * FROM {VIEW}"


def _plan(session: LakeSession) -> str:
    # the engine's own session: EXPLAIN is a diagnosis, outside gluon's portable subset
    explained = session.spark.sql(f"EXPLAIN SELECT SUM(id) FROM {VIEW}").collect()
    return "\n".join(str(row[0]) for row in explained)


def _rows(session: LakeSession) -> dict[int, object]:
    rows = [canonical(row) for row in session.sql(COUNT).toArrow().to_pylist()]
    assert len(rows) == len({row[0] for row in rows}), "the user view shows a key twice"
    return {row[0]: row for row in rows}


@pytest.mark.usefixtures("offload_home")
def test_an_empty_delta_reads_the_base_alone_and_changes_merge_again(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", 28)
    workload.create(40)
    enable(run_cli, source, "CHANGELOG")
    settings = load_settings()
    # Only the embedded engine's catalog is the session's own (a shared metastore keeps the
    # merging view: other readers of it must not miss later changes).
    alone = settings.engine == EngineKind.SAIL

    with lake_session(settings) as idle:  # nothing extracted yet: the base alone
        assert (VIEW in idle.base_only) == alone
        assert ("Join" not in _plan(idle)) == alone
        assert _rows(idle) == workload.expected

        workload.round(15)
        extract(run_cli, source)
        with lake_session(settings) as pending:  # changes pending: the merging view
            assert VIEW not in pending.base_only
            assert "Join" in _plan(pending)
            assert _rows(pending) == workload.expected

        # The session registered before the extraction sees it once a statement names it.
        assert (_rows(idle) != workload.expected) == alone
        refresh_pending(idle, COUNT)
        assert VIEW not in idle.base_only
        assert _rows(idle) == workload.expected

    compacted = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert compacted.exit_code == 0, compacted.stderr
    with lake_session(settings) as after:  # compacted: nothing pending, the base alone again
        assert (VIEW in after.base_only) == alone
        assert ("Join" not in _plan(after)) == alone
        assert _rows(after) == workload.expected
