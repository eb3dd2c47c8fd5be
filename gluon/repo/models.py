"""Repository tables (SQLAlchemy Core) as the newest migration leaves them.

Change a table here and in a new revision (``gluon.repo.migrations``) together: a test
compares a migrated repository with these models."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

offloaded_tables = sa.Table(
    "offloaded_tables",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, unique=True),
    sa.Column("source_dialect", sa.String(30), nullable=False),
    sa.Column("source_schema", sa.String(128), nullable=False),
    sa.Column("source_table", sa.String(128), nullable=False),
    sa.Column("lake_schema", sa.String(128), nullable=False),
    sa.Column("lake_table", sa.String(128), nullable=False),
    sa.Column("base_table", sa.String(300), nullable=False),
    sa.Column("base_path", sa.Text, nullable=False),
    sa.Column("columns_json", sa.Text, nullable=False),
    sa.Column("primary_key_json", sa.Text, nullable=False),
    sa.Column("partitioning_json", sa.Text, nullable=False),
    sa.Column("offload_type", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("row_count", sa.BigInteger),
    sa.Column("offloaded_at", sa.DateTime),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

incremental_state = sa.Table(
    "incremental_state",
    metadata,
    sa.Column("table_key", sa.String(300), primary_key=True),
    sa.Column("method", sa.String(30), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("key_columns_json", sa.Text, nullable=False),
    sa.Column("source_objects_json", sa.Text, nullable=False),
    sa.Column("delta_table", sa.String(300), nullable=False),
    sa.Column("delta_path", sa.Text, nullable=False),
    sa.Column("view_generation", sa.Integer, nullable=False),
    sa.Column("active_partition", sa.Integer, nullable=False),
    sa.Column("view_min_partition", sa.Integer, nullable=False),
    sa.Column("requested_partition", sa.Integer),
    sa.Column("requested_at", sa.DateTime),
    sa.Column("acknowledged_partition", sa.Integer),
    sa.Column("acknowledged_at", sa.DateTime),
    sa.Column("last_scn", sa.BigInteger),
    sa.Column("enabled_at", sa.DateTime),
    sa.Column("updated_at", sa.DateTime, nullable=False),
    # Revision 0009: the highest gl_seq ever sent to the lake for this enablement (recorded
    # before each Delta commit), so a changelog sequence that goes below it is caught.
    sa.Column("shipped_seq", sa.BigInteger),
    sa.Column("enablement_id", sa.Integer),
    # Revision 0011: DEFERRED (delta table, views, compaction) or IMMEDIATE (merged per batch).
    sa.Column("merge_mode", sa.String(20), server_default="DEFERRED"),
    # Revision 0012: the highest control partition a TRUNCATE ('T' change) was shipped to
    # (recorded before its Delta commit): views and compactions reading it apply TRUNCATEs.
    sa.Column("truncate_partition", sa.Integer),
)

extraction_runs = sa.Table(
    "extraction_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("rows_read", sa.BigInteger),
    sa.Column("rows_written", sa.BigInteger),
    sa.Column("min_seq", sa.BigInteger),
    sa.Column("max_seq", sa.BigInteger),
    sa.Column("control_partition", sa.Integer),
    sa.Column("scn", sa.BigInteger),
    sa.Column("message", sa.Text),
    sa.Column("enablement_id", sa.Integer),
    # Revision 0010: when the oldest change the run shipped was captured, on this host's
    # clock (naive UTC): finished_at minus it is the source-to-lake latency (gluon.status.lag).
    sa.Column("oldest_change_at", sa.DateTime),
    # Revision 0012: where the capture cannot see a TRUNCATE, the source's rows and the fewest
    # the lake can show, counted at the run's end (gluon.extract.truncation).
    sa.Column("source_rows", sa.BigInteger),
    sa.Column("lake_rows", sa.BigInteger),
    # Revision 0025: the gl_seq ranges of the last batch the run counted, as JSON
    # [[first, last], ...] (gluon.extract.counting): until a later run succeeds, a run
    # re-reading one of them leaves it out of its count.
    sa.Column("counted_seqs", sa.Text),
)

compaction_runs = sa.Table(
    "compaction_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("method", sa.String(30), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("current_step", sa.String(40)),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("options_json", sa.Text, nullable=False),
    sa.Column("compacted_partition", sa.Integer),
    sa.Column("new_partition", sa.Integer),
    sa.Column("changes", sa.BigInteger),
    sa.Column("snapshot_json", sa.Text),
    sa.Column("progress_json", sa.Text),
    sa.Column("message", sa.Text),
    sa.Column("enablement_id", sa.Integer),
)

compaction_steps = sa.Table(
    "compaction_steps",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, nullable=False, index=True),
    sa.Column("step", sa.String(40), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("detail", sa.Text),
)

obsolete_objects = sa.Table(
    "obsolete_objects",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("name", sa.String(300), nullable=False),
    sa.Column("location", sa.Text),
    sa.Column("retained_at", sa.DateTime, nullable=False),
    sa.Column("compaction_run_id", sa.Integer),
    sa.Column("enablement_id", sa.Integer),
    # A retained version of the Delta table at ``location`` (revision 0016); NULL: the table.
    sa.Column("delta_version", sa.Integer),
)

offload_increments = sa.Table(
    "offload_increments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("kind", sa.String(30), nullable=False),
    sa.Column("predicate", sa.Text, nullable=False),
    sa.Column("boundary", sa.Text),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("rows", sa.BigInteger),
    sa.Column("offloaded_at", sa.DateTime),
    sa.Column("names", sa.Text),  # JSON list (revision 0014); NULL before it
)

table_locks = sa.Table(
    "table_locks",
    metadata,
    sa.Column("table_key", sa.String(300), primary_key=True),
    sa.Column("lock_name", sa.String(30), primary_key=True),
    sa.Column("command", sa.String(100), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("acquired_at", sa.DateTime, nullable=False),
)

installation = sa.Table(
    "installation",
    metadata,
    sa.Column("installation_id", sa.String(32), primary_key=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
)
"""One row: the random id that marks the source objects and lake tables this repository's
gluon created (``gluon.capture.ownership``)."""

rejected_changes = sa.Table(
    "rejected_changes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False),
    sa.Column("enabled_at", sa.DateTime, nullable=False),
    sa.Column("gl_seq", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.String(30), nullable=False),
    sa.Column("key_json", sa.Text, nullable=False),
    sa.Column("row_json", sa.Text),
    sa.Column("recorded_at", sa.DateTime, nullable=False),
    sa.UniqueConstraint("table_key", "enabled_at", "gl_seq"),
)
"""Changes an insert-only table's extraction did not apply (``gluon.extract.insert_only``)."""

set_aside_changes = sa.Table(
    "set_aside_changes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("enablement_id", sa.Integer, nullable=False),
    sa.Column("gl_seq", sa.BigInteger, nullable=False),
    sa.Column("op", sa.String(1), nullable=False),
    sa.Column("key_json", sa.Text, nullable=False),
    sa.Column("row_json", sa.Text, nullable=False),
    sa.Column("column_name", sa.String(128), nullable=False),
    sa.Column("value_kind", sa.String(200), nullable=False),
    sa.Column("installation_id", sa.String(32), nullable=False),
    sa.Column("set_by", sa.String(128), nullable=False),
    sa.Column("set_at", sa.DateTime, nullable=False),
    sa.UniqueConstraint("table_key", "enablement_id", "gl_seq"),
)
"""Changes the lake could not take, moved out of the changelog on the user's command
(``gluon.extract.set_aside``): what each was, so nothing disappears without a trace."""

enablements = sa.Table(
    "enablements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("method", sa.String(30), nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("enabled_at", sa.DateTime),
    sa.Column("disabled_at", sa.DateTime),
)
"""One enabling of incremental update for a table: its runs, snapshots and kept objects
carry its id, so a later enabling never mistakes them for its own."""

service_checks = sa.Table(
    "service_checks",
    metadata,
    sa.Column("table_key", sa.String(300), primary_key=True),
    sa.Column("enablement_id", sa.Integer),
    sa.Column("checked_at", sa.DateTime, nullable=False),
    sa.Column("empty_checks", sa.BigInteger, nullable=False),
)
"""The service's extraction checks that found nothing (revision 0018): they leave no
extraction run each; the service writes the latest time and the count here, a table at a
time, about once a minute (``gluon.service.checks``)."""
verify_runs = sa.Table(
    "verify_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("table_key", sa.String(300), nullable=False, index=True),
    sa.Column("verified_at", sa.DateTime, nullable=False),
    sa.Column("result", sa.String(20), nullable=False),
    sa.Column("rows_compared", sa.BigInteger, nullable=False),
    sa.Column("missing_in_lake", sa.Integer, nullable=False),
    sa.Column("extra_in_lake", sa.Integer, nullable=False),
    sa.Column("different_values", sa.Integer, nullable=False),
    sa.Column("in_flight", sa.Integer, nullable=False),
)
"""One ``gluon verify`` of a table (revision 0015): status shows the latest."""

verify_progress = sa.Table(
    "verify_progress",
    metadata,
    sa.Column("table_key", sa.String(300), primary_key=True),
    sa.Column("taken_at", sa.String(300), nullable=False),
    sa.Column("saved_at", sa.DateTime, nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=False),
)
"""The bisection levels a running ``gluon verify`` finished (revision 0022): a rerun after a
kill resumes from them while ``taken_at`` (the lake's extraction state) is unchanged."""

slot_positions = sa.Table(
    "slot_positions",
    metadata,
    sa.Column("table_key", sa.String(300), primary_key=True),
    sa.Column("enablement_id", sa.Integer),
    sa.Column("slot_name", sa.String(64), nullable=False, index=True),
    # The start of the first commit record the table has not shipped (0: being enabled,
    # the slot must not move); the shared slot is confirmed to the least over its tables.
    sa.Column("position", sa.BigInteger, nullable=False),
    # The offload's snapshot (xmin:xmax:xip) and the WAL position read after it, kept until
    # the position passes that boundary (gluon.source.shared_shipping.OffloadSnapshot).
    sa.Column("offload_snapshot", sa.Text),
    sa.Column("snapshot_boundary", sa.BigInteger),
    # Set when the table was left out of the slot's minimum (it kept too much WAL): its
    # changes since are lost to it, it needs a re-offload.
    sa.Column("released_reason", sa.Text),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)
"""Where each PG_LOGICAL table of a database's shared slot stands (revision 0029)."""
