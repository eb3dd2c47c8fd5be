"""Alembic environment: migrates the connection ``gluon.repo.migrations`` passes in."""

from __future__ import annotations

from alembic import context

from gluon.repo.migrations import VERSION_TABLE

context.configure(
    connection=context.config.attributes["connection"],
    version_table=VERSION_TABLE,
    # One transaction per revision, as the numbered migrations had: a crash keeps the
    # revisions already applied and the next run resumes after them.
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
