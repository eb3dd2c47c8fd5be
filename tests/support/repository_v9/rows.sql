-- Representative rows in every table of a version-9 repository (one enabled, compacted,
-- partially offloaded table with a lock held and a rejected change). Plain SQL for SQLite
-- and PostgreSQL; ids are left to the database, so the first row of each table has id 1.
INSERT INTO gluon_schema_version (version, description, applied_at) VALUES
 (1, 'offloaded tables', '2026-01-05 09:00:00'),
 (2, 'incremental update state and extraction runs', '2026-01-05 09:00:00'),
 (3, 'compaction runs, their steps and retained obsolete objects', '2026-01-05 09:00:00'),
 (4, 'increments of partially offloaded tables', '2026-01-05 09:00:00'),
 (5, 'table locks held by running commands', '2026-01-05 09:00:00'),
 (6, 'enablements: runs, snapshots and kept objects belong to one enabling', '2026-01-05 09:00:00'),
 (7, 'changes an insert-only table did not apply (duplicate keys, uncaptured DML)', '2026-01-05 09:00:00'),
 (8, 'installation id that marks what gluon creates', '2026-01-05 09:00:00'),
 (9, 'highest change sequence shipped per enablement', '2026-01-05 09:00:00');
INSERT INTO installation (installation_id, created_at) VALUES
 ('0123456789abcdef0123456789abcdef', '2026-01-05 09:00:00');
INSERT INTO offloaded_tables (table_key, source_dialect, source_schema, source_table, lake_schema,
 lake_table, base_table, base_path, columns_json, primary_key_json, partitioning_json,
 offload_type, status, row_count, offloaded_at, updated_at) VALUES
 ('APP.ORDERS', 'postgresql', 'APP', 'ORDERS', 'app', 'orders', 'app_load.orders',
  '/lake/app_load/orders',
  '[{"name": "ID", "source_type": "integer", "lake_type": "INT", "nullable": false}]', '["ID"]', '[]',
  'INCREMENTAL', 'offloaded', 1200, '2026-01-05 09:10:00', '2026-01-05 09:10:00');
INSERT INTO enablements (table_key, method, started_at, enabled_at, disabled_at) VALUES
 ('APP.ORDERS', 'CHANGELOG', '2026-01-06 08:00:00', '2026-01-06 08:00:05', NULL);
INSERT INTO incremental_state (table_key, method, status, key_columns_json, source_objects_json,
 delta_table, delta_path, view_generation, active_partition, view_min_partition,
 requested_partition, requested_at, acknowledged_partition, acknowledged_at, last_scn,
 enabled_at, updated_at, shipped_seq, enablement_id) VALUES
 ('APP.ORDERS', 'CHANGELOG', 'enabled', '["ID"]', '[{"kind": "changelog", "schema": "APP", "name": "ORDERS_LOG", "object_type": "TABLE"}]',
  'app_load.orders_changes', '/lake/app_load/orders_changes', 1, 2, 1, 2,
  '2026-01-07 10:00:00', 2, '2026-01-07 10:00:01', NULL, '2026-01-06 08:00:05',
  '2026-01-07 10:00:01', 41, 1);
INSERT INTO extraction_runs (table_key, status, started_at, finished_at, rows_read,
 rows_written, min_seq, max_seq, control_partition, scn, message, enablement_id) VALUES
 ('APP.ORDERS', 'success', '2026-01-06 09:00:00', '2026-01-06 09:00:30', 41, 41, 1, 41, 1,
  NULL, NULL, 1);
INSERT INTO compaction_runs (table_key, method, status, current_step, started_at, finished_at,
 options_json, compacted_partition, new_partition, changes, snapshot_json, progress_json,
 message, enablement_id) VALUES
 ('APP.ORDERS', 'IN_PLACE', 'success', NULL, '2026-01-07 10:00:00', '2026-01-07 10:05:00',
  '{"vacuum": false}', 1, 2, 41, '{"entries": []}', NULL, NULL, 1);
INSERT INTO compaction_steps (run_id, step, status, started_at, finished_at, detail) VALUES
 (1, 'merge', 'success', '2026-01-07 10:01:00', '2026-01-07 10:02:00', '41 changes');
INSERT INTO obsolete_objects (table_key, kind, name, location, retained_at, compaction_run_id,
 enablement_id) VALUES
 ('APP.ORDERS', 'base partitions before compaction', 'app_load.orders_retained_1',
  '/lake/app_load/orders_retained_1', '2026-01-07 10:04:00', 1, 1);
INSERT INTO offload_increments (table_key, kind, predicate, boundary, status, rows,
 offloaded_at) VALUES
 ('APP.ORDERS', 'predicate', 'ID < 1000', NULL, 'offloaded', 999, '2026-01-05 09:05:00');
INSERT INTO table_locks (table_key, lock_name, command, pid, host, acquired_at) VALUES
 ('APP.ORDERS', 'lifecycle', 'gluon compact -t APP.ORDERS', 4242, 'node-1',
  '2026-01-08 07:00:00');
INSERT INTO rejected_changes (table_key, enabled_at, gl_seq, reason, key_json, row_json,
 recorded_at) VALUES
 ('APP.ORDERS', '2026-01-06 08:00:05', 40, 'duplicate_key', '{"ID": 7}', '{"ID": 7}',
  '2026-01-06 09:00:30');
