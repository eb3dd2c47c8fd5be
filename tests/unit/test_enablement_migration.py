"""Revision 0006 (migration 6) on a real SQLite repository shaped as migration 4 left it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import sqlalchemy as sa

from gluon.repo import Repository, migrations, models
from gluon.repo.compaction import ObsoleteObject

KEY = "MAIN.ITEMS"
ENABLED_AT = dt.datetime(2026, 5, 1, 12, 0)
BEFORE = ENABLED_AT - dt.timedelta(days=3)
AFTER = ENABLED_AT + dt.timedelta(hours=1)


def _without_enablement_ids(table: sa.Table, metadata: sa.MetaData) -> sa.Table:
    columns = [
        sa.Column(
            column.name,
            column.type,
            primary_key=column.primary_key,
            nullable=column.nullable,
            autoincrement=column.autoincrement,
        )
        for column in table.columns
        if column.name != "enablement_id"
    ]
    return sa.Table(table.name, metadata, *columns)


def _version_4_repository(url: str) -> sa.Engine:
    engine = sa.create_engine(url)
    old = sa.MetaData()
    for table in (
        migrations.legacy_schema_version,
        models.offloaded_tables,
        models.incremental_state,
        models.extraction_runs,
        models.compaction_runs,
        models.compaction_steps,
        models.obsolete_objects,
        models.offload_increments,
    ):
        _without_enablement_ids(table, old)
    old.create_all(engine)
    with engine.begin() as db:
        for number in range(1, 5):
            db.execute(
                old.tables["gluon_schema_version"]
                .insert()
                .values(version=number, description=f"migration {number}", applied_at=BEFORE)
            )
        db.execute(
            old.tables["incremental_state"]
            .insert()
            .values(
                table_key=KEY,
                method="CHANGELOG",
                status="enabled",
                key_columns_json='["ID"]',
                source_objects_json="[]",
                delta_table="main_load.items_changes",
                delta_path="/nowhere",
                view_generation=0,
                active_partition=0,
                view_min_partition=0,
                enabled_at=ENABLED_AT,
                updated_at=ENABLED_AT,
            )
        )
        runs = old.tables["compaction_runs"]
        for started, status in ((BEFORE, "waiting"), (AFTER, "failed")):
            db.execute(
                runs.insert().values(
                    table_key=KEY,
                    method="IN_PLACE",
                    status=status,
                    started_at=started,
                    options_json="{}",
                )
            )
        extractions = old.tables["extraction_runs"]
        for started in (BEFORE, AFTER):
            db.execute(
                extractions.insert().values(table_key=KEY, status="success", started_at=started)
            )
    return engine


def test_migration_6_scopes_existing_rows_and_abandons_stale_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'repo.db'}"
    _version_4_repository(url)
    repo = Repository(url)
    assert repo.revision == migrations.head()
    state = repo.incremental.get_state(KEY)
    assert state is not None and state.enablement_id is not None
    [enablement] = repo.incremental.enablements(KEY)
    assert enablement["id"] == state.enablement_id and enablement["enabled_at"] == ENABLED_AT

    runs = {run.started_at: run for run in repo.compaction.runs(KEY)}
    stale, current = runs[BEFORE], runs[AFTER]
    assert stale.enablement_id is None and stale.status == "abandoned"
    assert "earlier enablement" in (stale.message or "")
    assert current.enablement_id == state.enablement_id and current.status == "failed"
    # The run a compaction resumes is this enablement's, never the stale one.
    resumed = repo.compaction.open_run(KEY, state.enablement_id)
    assert resumed is not None and resumed.id == current.id
    extractions = repo.incremental.extraction_runs(KEY, enablement_id=state.enablement_id)
    assert [run.started_at for run in extractions] == [AFTER]
    # Opening the repository again applies nothing twice.
    assert Repository(url).incremental.enablements(KEY) == [enablement]


def test_a_new_repository_has_enablement_ids(tmp_path: Path) -> None:
    repo = Repository(f"sqlite:///{tmp_path / 'repo.db'}", create=True)
    columns = {c["name"] for c in sa.inspect(repo.engine).get_columns("compaction_runs")}
    assert "enablement_id" in columns


def test_a_kept_object_is_recorded_once(tmp_path: Path) -> None:
    """A resumed in-place run retains the same partitions again: one record."""
    repo = Repository(f"sqlite:///{tmp_path / 'repo.db'}", create=True)
    kept = ObsoleteObject(
        table_key=KEY,
        kind="base partitions before compaction",
        name="main_load.items_retained_3",
        location="/lake/main_load/items_retained_3",
        retained_at=AFTER,
        compaction_run_id=3,
        enablement_id=1,
    )
    repo.compaction.retain(kept)
    repo.compaction.retain(kept)
    assert len(repo.compaction.retained(KEY)) == 1
