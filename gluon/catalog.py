"""Registers every offloaded table's lake objects in a Spark session, from the repository.

A table without incremental update: base table + user view. With it: base
table, delta table, internal delta view of the current generation, and the
user view over that internal view.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from gluon.config import Settings
from gluon.errors import LakeError
from gluon.lake import sql, storage, tables
from gluon.lake.changes import view_sql
from gluon.lake.session import LakeSession, first_line, open_session
from gluon.methods import get_method
from gluon.naming import TableRef, lake_names
from gluon.offload import OFFLOADED, register_user_view
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED, IncrementalState

log = logging.getLogger(__name__)
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
        base=sql.quote(record.base_table),
        delta=sql.quote(state.delta_table),
        min_partition=state.view_min_partition,
    )
    tables.create_view(session, internal, select)
    tables.create_user_view(session, record.user_view, record.columns, internal)


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
    """Create every user view (and what it reads) in ``session``; return the view names.

    A table that cannot be registered (its files removed, say) is skipped with a warning
    and listed in ``session.unavailable``: one broken table must not stop queries of the
    others.
    """
    views = []
    for record in repo.list_tables():
        if record.status != OFFLOADED:
            continue
        try:
            register_table(session, repo, record)
        except Exception as exc:  # whatever broke this table, the others stay queryable
            reason = _missing_tables(repo, record) or first_line(exc)
            session.unavailable[record.user_view] = reason
            log.warning("skipped %s (%s): %s", record.user_view, record.table_key, reason)
            continue
        views.append(record.user_view)
    return views


def _missing_tables(repo: Repository, record: OffloadedTable) -> str:
    """Which of the table's Delta tables are gone (the usual cause), or ""."""
    locations = {"base table": record.base_path}
    state = repo.incremental.get_state(record.table_key)
    if state is not None and state.status == ENABLED:
        locations["delta table"] = state.delta_path
    try:
        missing = [
            f"its {kind} {path} is missing"
            for kind, path in locations.items()
            if storage.delta_version(path) is None
        ]
    except Exception:  # the diagnosis must not hide the error it explains
        return ""
    return "; ".join(missing)


def unavailable_error(session: LakeSession, statement: str) -> LakeError | None:
    """The error naming the unavailable tables ``statement`` mentions, if any."""
    text = statement.replace("`", "").lower()
    named = [view for view in session.unavailable if view.lower() in text]
    if not named:
        return None
    reasons = "; ".join(f"{view} is unavailable: {session.unavailable[view]}" for view in named)
    return LakeError(
        f"{reasons} (display_incremental_status and the log say more; other tables "
        "can still be queried)"
    )


@contextmanager
def lake_session(settings: Settings, repo: Repository | None = None) -> Iterator[LakeSession]:
    """A lake session with every gluon view registered (the Python API for querying).

    ``repo``: the command's repository, if it has one open (else the session opens it).
    """
    if repo is None:
        repo = Repository(settings.repo_url)
    with open_session(settings) as session:
        register_all(session, repo)
        yield session
