"""Repository tables (SQLAlchemy Core). Change them only through a migration."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

schema_version = sa.Table(
    "gluon_schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("description", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.DateTime, nullable=False),
)

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
