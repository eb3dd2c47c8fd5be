"""Registers every offloaded table's lake objects in a Spark session, from the repository.

A table without incremental update: base table + user view. With it: base
table, delta table, internal delta view of the current generation, and the
user view over that internal view.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from gluon.config import Settings
from gluon.lake import storage, tables
from gluon.lake.changes import view_sql
from gluon.lake.session import LakeSession, open_session
from gluon.methods import get_method
from gluon.naming import TableRef, lake_names
from gluon.offload import OFFLOADED, register_user_view
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED, IncrementalState

RETAINED_NAME = re.compile(r"[^.\s()]+\.[^.\s()]+")
"""A ``schema.table`` name (older records hold descriptions such as ``T (before)``)."""


def internal_view_name(record: OffloadedTable, generation: int) -> str:
    names = lake_names(TableRef(record.lake_schema, record.lake_table))
    return str(names.internal_view(generation))


def register_incremental_views(
    session: LakeSession, record: OffloadedTable, state: IncrementalState
) -> None:
    """Register base and delta tables, the internal delta view and the user view."""
    method = get_method(state.method)
    tables.register_table(session, record.base_table, record.base_path)
    tables.register_table(session, state.delta_table, state.delta_path)
    internal = internal_view_name(record, state.view_generation)
    select = view_sql(
        method.view_kind.value,
        columns=record.columns,
        keys=state.key_columns,
        base=tables.quote(record.base_table),
        delta=tables.quote(state.delta_table),
        min_partition=state.view_min_partition,
    )
    tables.create_view(session, internal, select)
    tables.create_view(session, record.user_view, tables.select_columns(record.columns, internal))


def register_table(session: LakeSession, repo: Repository, record: OffloadedTable) -> None:
    """Register one offloaded table's views (and the objects compactions kept) in ``session``."""
    state = repo.incremental.get_state(record.table_key)
    if state is not None and state.status == ENABLED:
        register_incremental_views(session, record, state)
    else:
        register_user_view(session, record)
    register_retained(session, repo, record)


def register_retained(session: LakeSession, repo: Repository, record: OffloadedTable) -> None:
    """Register each retained obsolete Delta table under its recorded name (``S.T_DATA_R7``,
    ``S_LOAD.T_RETAINED_7``...), of every enablement: they outlive disabling. Objects
    recorded before they had such a name, or whose files were removed, are skipped."""
    for item in repo.compaction.retained(record.table_key):
        if item.location is None or not RETAINED_NAME.fullmatch(item.name):
            continue
        if storage.delta_version(item.location) is None:
            continue
        tables.register_table(session, item.name, item.location)


def register_all(session: LakeSession, repo: Repository) -> list[str]:
    """Create every user view (and what it reads) in ``session``; return the view names."""
    views = []
    for record in repo.list_tables():
        if record.status == OFFLOADED:
            register_table(session, repo, record)
            views.append(record.user_view)
    return views


@contextmanager
def lake_session(settings: Settings) -> Iterator[LakeSession]:
    """A lake session with every gluon view registered (the Python API for querying)."""
    repo = Repository(settings.repo_url)
    with open_session(settings) as session:
        register_all(session, repo)
        yield session
