"""Registers offloaded tables' lake objects in a Spark session, from the repository.

A table without incremental update: base table + user view. With it: base
table, delta table, internal delta view of the current generation, and the
user view over that internal view. In merge mode IMMEDIATE the base table itself is
registered under the user view's name (no views). ``gluon query`` registers only the tables its
statement names (``named_in``): each registration costs the engine round trips.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from gluon.config import EngineKind, Settings
from gluon.errors import LakeError
from gluon.lake import publish, sql, storage, tables, touched
from gluon.lake.changes import view_sql
from gluon.lake.session import LakeSession, first_line, open_session
from gluon.lake.user_sql import NAME_CHAIN_PATTERN, NAME_PART_PATTERN
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.naming import TableRef, lake_names
from gluon.offload.copy import OFFLOADED, register_user_view
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED, IncrementalState
from gluon.schema import lake_column
from gluon.states import MergeMode

log = logging.getLogger(__name__)
RETAINED_NAME = re.compile(r"[^.\s()]+\.[^.\s()]+")
"""A ``schema.table`` name (older records hold descriptions such as ``T (before)``)."""
NAME_CHAIN = re.compile(NAME_CHAIN_PATTERN)
"""A dotted Spark SQL name (``a.b``, ``a . `b c```), each part bare or back-quoted."""
NAME_PART = re.compile(NAME_PART_PATTERN)


READ_JOIN_OPTIONS: dict[str, int] = {
    "datafusion.optimizer.hash_join_single_partition_threshold": 64 * 1024 * 1024,
    "datafusion.optimizer.hash_join_single_partition_threshold_rows": 4 * 1024 * 1024,
}
"""The embedded engine's limits (bytes, rows: estimated from Delta statistics) under which
a hash join builds one table from its smaller side and probes it from every partition,
instead of hash-repartitioning both sides (DataFusion's defaults: 1 MiB, 128Ki rows).

A merge view's anti-joins build on the changes and probe the base: past 1 MiB of keys
(131k changes of a bigint key) the engine repartitioned every base row. Measured on a
5M-row base with 500k changes (2 cores, loaded): COUNT(*) CPU 0.50-0.57 s -> 0.43-0.49 s
and wall 0.60-0.73 -> 0.47-0.51 s, SUM 0.62 -> 0.51-0.55 s CPU, one partition 0.11 ->
0.09 s CPU; results identical. Memory is the same (both modes hold the whole build side).
"""


def tune_for_reads(session: LakeSession) -> None:
    """Let a read session's joins build from the smaller side (:data:`READ_JOIN_OPTIONS`).

    The embedded engine only: Sail applies ``datafusion.*`` options given by ``SET`` (not by
    the session's Spark configuration), for this session alone; Spark would store them as
    unknown keys. Sent past :meth:`LakeSession.sql`: an engine option, outside gluon's
    portable subset. A rejected option only costs speed, so it is logged, not raised.
    """
    if session.settings.engine != EngineKind.SAIL:
        return
    for key, value in READ_JOIN_OPTIONS.items():
        try:
            session.spark.sql(sql.set_option(key, value)).collect()
        except Exception as exc:
            log.info("the lake engine did not take %s: %s", key, first_line(exc))


def internal_view_name(record: OffloadedTable, generation: int) -> str:
    names = lake_names(TableRef(record.lake_schema, record.lake_table))
    return str(names.internal_view(generation))


def register_incremental_views(
    session: LakeSession, record: OffloadedTable, state: IncrementalState
) -> None:
    """Register base and delta tables, the internal delta view and the user view.

    With no change pending (no file of the delta table's current version in the view's
    control partitions) the internal view reads the base table alone: no join. The file
    list is read here, after the repository state, so every change committed before this
    registration is in it (then the view merges); a change committed later is a change
    after the session's snapshot, as for a statement that already started.
    ``refresh_pending`` re-registers such a view once its delta table has a newer version.
    Only where the catalog is the session's own (the embedded engine): a view in a shared
    metastore outlives the session, and other readers would miss later changes.
    There too, with changes pending in only some base partitions, the view passes the
    others through without a join (:func:`_partition_split`, pinned to the Delta versions
    it was derived from).
    """
    method = get_method(state.method)
    tables.register_table(session, record.base_table, record.base_path)
    tables.register_table(session, state.delta_table, state.delta_path)
    internal = internal_view_name(record, state.view_generation)
    pending = _pending_files(session, state)
    if pending is not None and pending.files == 0:
        session.base_only[record.user_view] = (state.delta_path, pending.version)
        lake_columns = [column.lake_name for column in record.columns]
        tables.create_view(session, internal, sql.select_columns(lake_columns, record.base_table))
        tables.create_user_view(session, record.user_view, record.columns, internal)
        return
    session.base_only.pop(record.user_view, None)
    session.pinned.pop(record.user_view, None)
    split = _partition_split(session, record, state) if pending is not None else None
    if split is not None:
        tables.create_view(session, internal, split)
        tables.create_user_view(session, record.user_view, record.columns, internal)
        return
    select = view_sql(
        method.view_kind.value,
        columns=record.columns,
        keys=state.key_columns,
        base=sql.quote(record.base_table),
        delta=sql.quote(state.delta_table),
        min_partition=state.view_min_partition,
        truncated=state.truncates_from(state.view_min_partition),
    )
    tables.create_view(session, internal, select)
    tables.create_user_view(session, record.user_view, record.columns, internal)


def _partition_split(
    session: LakeSession, record: OffloadedTable, state: IncrementalState
) -> str | None:
    """The view split by the base partitions pending changes may touch
    (:mod:`gluon.lake.touched`), its versions recorded in ``session.pinned`` for
    ``refresh_pending``; None where the general merge view is kept: an insert-only method
    (its view has no join), a TRUNCATE in range, or no partition untouched."""
    if get_method(state.method).view_kind is not ViewKind.MERGE or state.truncates_from(
        state.view_min_partition
    ):
        return None
    keys = tuple(lake_column(key) for key in state.key_columns)
    found = touched.touched_partitions(
        record.base_path, state.delta_path, keys, min_partition=state.view_min_partition
    )
    if found is None:
        return None
    try:
        select = touched.split_view_sql(
            found,
            columns=record.columns,
            keys=state.key_columns,
            base=record.base_table,
            delta=state.delta_table,
            min_partition=state.view_min_partition,
        )
    except TypeError:  # a partition value without a literal: the general view reads it
        return None
    session.pinned[record.user_view] = (state.delta_path, found.delta_version)
    log.debug("%s merges %d base partitions", record.user_view, len(found.touched))
    return select


def _pending_files(session: LakeSession, state: IncrementalState) -> storage.PartitionFiles | None:
    """The delta table's files in the view's range, where a view over the base alone may
    be registered (the embedded engine's per-session catalog); else None."""
    if session.settings.engine != EngineKind.SAIL:
        return None
    return storage.partition_files(
        state.delta_path, sql.CONTROL_PARTITION, at_least=state.view_min_partition
    )


def register_table(session: LakeSession, repo: Repository, record: OffloadedTable) -> None:
    """Register one offloaded table's views (and the objects compactions kept) in ``session``."""
    state = repo.incremental.get_state(record.table_key)
    if state is not None and state.status == ENABLED and state.merge_mode == MergeMode.IMMEDIATE:
        # No views: the base table, current after every extraction, under the user's name.
        tables.register_table(session, record.base_table, record.base_path)
        tables.register_table(session, record.user_view, record.base_path)
    elif state is not None and state.status == ENABLED:
        published = replace(state, view_min_partition=published_min_partition(repo, record, state))
        register_incremental_views(session, record, published)
    else:
        register_user_view(session, record)
    register_retained(session, repo, record)


def published_min_partition(
    repo: Repository, record: OffloadedTable, state: IncrementalState
) -> int:
    """The lowest control partition the views read: the recorded one, or the open full
    compaction's new one once its publish has committed (the base then holds the compacted
    changes, which a ``UNION ALL`` view would show again until the switch is recorded).

    The state was read before the Delta log here: a switch recorded by then follows a
    publish this read sees, so the pair is never older base with newer partitions.
    """
    if get_method(state.method).view_kind is not ViewKind.UNION_ALL:
        return state.view_min_partition  # merging a change the base holds changes nothing
    run = repo.compaction.open_run(record.table_key, state.enablement_id)
    if (
        run is None
        or run.new_partition is None
        or run.new_partition <= state.view_min_partition
        or not run.progress.get("staged_base")
    ):
        return state.view_min_partition
    if publish.published(record.base_path, run.id):
        return run.new_partition
    return state.view_min_partition


def register_retained(session: LakeSession, repo: Repository, record: OffloadedTable) -> None:
    """Register each retained obsolete Delta table under its recorded name (``S.T_DATA_R7``,
    ``S_LOAD.T_RETAINED_7``...), of every enablement: they outlive disabling. Objects
    recorded before they had such a name, or whose files were removed, are skipped."""
    for item in repo.compaction.retained(record.table_key):
        if item.location is None or not RETAINED_NAME.fullmatch(item.name):
            continue
        if storage.delta_version(item.location) is None:
            continue
        if item.delta_version is not None:
            # A version of the base table (it keeps one path): readable while the engine can
            # time-travel there; status says how to read it otherwise.
            readable = storage.version_readability(item.location, item.delta_version)[0]
            if readable == storage.ENGINE and tables.same_location(item.location, record.base_path):
                tables.register_table(session, record.base_table, record.base_path)
                select = sql.version_of_table(record.base_table, item.delta_version)
                tables.create_view(session, item.name, select)
            continue
        tables.register_table(session, item.name, item.location)


def register_all(
    session: LakeSession, repo: Repository, *, named_in: str | None = None
) -> list[str]:
    """Create every user view (and what it reads) in ``session``; return the view names.

    ``named_in``: a statement; only the tables whose objects it may name are registered.

    A table that cannot be registered (its files removed, say) is skipped with a warning
    and listed in ``session.unavailable``: one broken table must not stop queries of the
    others.
    """
    views = []
    names = None if named_in is None else named_objects(named_in)
    for record in repo.list_tables():
        if record.status != OFFLOADED:
            continue
        if names is not None and not object_names(repo, record) & names:
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


def refresh_pending(session: LakeSession, statement: str) -> None:
    """Re-register each view ``statement`` may name that reads its base table alone
    (nothing was pending at registration) if its delta table has a newer version since:
    a long session (``gluon shell``) then sees changes extracted after it started.

    Costs one Delta log read per such view and statement; the repository is opened only
    when a view is re-registered. A failure keeps the registration there was (logged).
    """
    names = named_objects(statement)
    stale = [
        view
        for view, (location, version) in (session.base_only | session.pinned).items()
        if (names is None or view.rsplit(".", 1)[-1].lower() in names)
        and storage.delta_version(location) != version
    ]
    if not stale:
        return
    repo = Repository(session.settings.repo_url)
    records = {record.user_view: record for record in repo.list_tables()}
    for view in stale:
        record = records.get(view)
        if record is None:
            continue
        try:
            register_table(session, repo, record)
        except Exception as exc:  # the registration there was still answers
            log.warning("could not re-register %s: %s", view, first_line(exc))


def named_objects(statement: str) -> set[str] | None:
    """The last part of every name ``statement`` may use, lower case (Spark's names are
    case-insensitive), or None when it lists the catalog (``SHOW ...``): then it needs every
    table.

    Conservative on purpose: a table registered for nothing costs a little, a missing one
    fails the query. So words in literals and comments count, a schema is not required to
    match (``t`` names every ``*.t``), and the statement is read twice: with back-quoted
    parts, and with the back quotes dropped (a quote inside a string literal must not hide
    a name from the first reading).
    """
    if statement.lstrip().upper().startswith("SHOW"):
        return None
    names = set()
    for text in (statement, statement.replace("`", " ")):
        for chain in NAME_CHAIN.finditer(text):
            parts = NAME_PART.findall(chain.group())
            last = parts[-1]
            if last.startswith("`"):
                last = last[1:-1].replace("``", "`")
            names.add(last.lower())
    return names


def object_names(repo: Repository, record: OffloadedTable) -> set[str]:
    """The last part, lower case, of each object registering ``record`` creates."""
    full = {record.user_view, record.base_table}
    state = repo.incremental.get_state(record.table_key)
    if state is not None and state.status == ENABLED:
        full |= {state.delta_table, internal_view_name(record, state.view_generation)}
    full |= {item.name for item in repo.compaction.retained(record.table_key)}
    return {name.rsplit(".", 1)[-1].lower() for name in full}


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
def lake_session(
    settings: Settings, repo: Repository | None = None, *, named_in: str | None = None
) -> Iterator[LakeSession]:
    """A lake session with every gluon view registered (the Python API for querying), its
    joins tuned for reads (:func:`tune_for_reads`).

    ``repo``: the command's repository, if it has one open (else the session opens it).
    ``named_in``: a statement; only the tables it may name are registered.
    """
    if repo is None:
        repo = Repository(settings.repo_url)
    with open_session(settings) as session:
        tune_for_reads(session)
        register_all(session, repo, named_in=named_in)
        yield session
