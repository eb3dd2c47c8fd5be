"""UPDATABLE_INSERT: UPDATABLE for adding rows only; the delta view just appends."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    UPDATABLE_OBJECTS,
    ExtractionMethod,
    OffloadUseCase,
    ViewKind,
)


class UpdatableInsertMethod(ExtractionMethod):
    """Inserts into the updatable view are captured; its trigger refuses updates and deletes.

    It also refuses an insert whose key the view already shows (an application row or a
    staged lake row): the delta view appends, so the lake would show the key twice.
    """

    name = "UPDATABLE_INSERT"
    summary = "insert-only, through the updatable view"
    captured_dml = frozenset({DML.INSERT})
    offload_use_cases = frozenset(OffloadUseCase)
    view_kind = ViewKind.UNION_ALL
    source_objects = (*CHANGELOG_OBJECTS, *UPDATABLE_OBJECTS)
    verifies_unique_key = True
    keeps_lake_only_rows = True
    when_to_use = (
        "Rows must be added to offloaded data that is no longer in the source (for example "
        "dropped partitions) and cannot be inserted into the source table."
    )
