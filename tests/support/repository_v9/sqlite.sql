-- The repository schema gluon 0.1.0 (numbered migrations 1-9, before Alembic) created on SQLite,
-- captured from that release. Frozen: never edit it.
CREATE TABLE gluon_schema_version (
	version INTEGER NOT NULL, 
	description VARCHAR(200) NOT NULL, 
	applied_at DATETIME NOT NULL, 
	PRIMARY KEY (version)
);
CREATE TABLE offloaded_tables (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	source_dialect VARCHAR(30) NOT NULL, 
	source_schema VARCHAR(128) NOT NULL, 
	source_table VARCHAR(128) NOT NULL, 
	lake_schema VARCHAR(128) NOT NULL, 
	lake_table VARCHAR(128) NOT NULL, 
	base_table VARCHAR(300) NOT NULL, 
	base_path TEXT NOT NULL, 
	columns_json TEXT NOT NULL, 
	primary_key_json TEXT NOT NULL, 
	partitioning_json TEXT NOT NULL, 
	offload_type VARCHAR(20) NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	row_count BIGINT, 
	offloaded_at DATETIME, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (table_key)
);
CREATE TABLE incremental_state (
	table_key VARCHAR(300) NOT NULL, 
	method VARCHAR(30) NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	key_columns_json TEXT NOT NULL, 
	source_objects_json TEXT NOT NULL, 
	delta_table VARCHAR(300) NOT NULL, 
	delta_path TEXT NOT NULL, 
	view_generation INTEGER NOT NULL, 
	active_partition INTEGER NOT NULL, 
	view_min_partition INTEGER NOT NULL, 
	requested_partition INTEGER, 
	requested_at DATETIME, 
	acknowledged_partition INTEGER, 
	acknowledged_at DATETIME, 
	last_scn BIGINT, 
	enabled_at DATETIME, 
	updated_at DATETIME NOT NULL, 
	shipped_seq BIGINT, 
	enablement_id INTEGER, 
	PRIMARY KEY (table_key)
);
CREATE TABLE extraction_runs (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	rows_read BIGINT, 
	rows_written BIGINT, 
	min_seq BIGINT, 
	max_seq BIGINT, 
	control_partition INTEGER, 
	scn BIGINT, 
	message TEXT, 
	enablement_id INTEGER, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_extraction_runs_table_key ON extraction_runs (table_key);
CREATE TABLE compaction_runs (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	method VARCHAR(30) NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	current_step VARCHAR(40), 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	options_json TEXT NOT NULL, 
	compacted_partition INTEGER, 
	new_partition INTEGER, 
	changes BIGINT, 
	snapshot_json TEXT, 
	progress_json TEXT, 
	message TEXT, 
	enablement_id INTEGER, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_compaction_runs_table_key ON compaction_runs (table_key);
CREATE TABLE compaction_steps (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	step VARCHAR(40) NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	detail TEXT, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_compaction_steps_run_id ON compaction_steps (run_id);
CREATE TABLE obsolete_objects (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	kind VARCHAR(40) NOT NULL, 
	name VARCHAR(300) NOT NULL, 
	location TEXT, 
	retained_at DATETIME NOT NULL, 
	compaction_run_id INTEGER, 
	enablement_id INTEGER, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_obsolete_objects_table_key ON obsolete_objects (table_key);
CREATE TABLE offload_increments (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	kind VARCHAR(30) NOT NULL, 
	predicate TEXT NOT NULL, 
	boundary TEXT, 
	status VARCHAR(20) NOT NULL, 
	rows BIGINT, 
	offloaded_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_offload_increments_table_key ON offload_increments (table_key);
CREATE TABLE table_locks (
	table_key VARCHAR(300) NOT NULL, 
	lock_name VARCHAR(30) NOT NULL, 
	command VARCHAR(100) NOT NULL, 
	pid INTEGER NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	acquired_at DATETIME NOT NULL, 
	PRIMARY KEY (table_key, lock_name)
);
CREATE TABLE enablements (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	method VARCHAR(30) NOT NULL, 
	started_at DATETIME NOT NULL, 
	enabled_at DATETIME, 
	disabled_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_enablements_table_key ON enablements (table_key);
CREATE TABLE rejected_changes (
	id INTEGER NOT NULL, 
	table_key VARCHAR(300) NOT NULL, 
	enabled_at DATETIME NOT NULL, 
	gl_seq BIGINT NOT NULL, 
	reason VARCHAR(30) NOT NULL, 
	key_json TEXT NOT NULL, 
	row_json TEXT, 
	recorded_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (table_key, enabled_at, gl_seq)
);
CREATE TABLE installation (
	installation_id VARCHAR(32) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (installation_id)
);
