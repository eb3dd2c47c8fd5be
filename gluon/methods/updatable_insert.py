"""UPDATABLE_INSERT: UPDATABLE for adding rows only; the delta view just appends."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
    ViewKind,
)


class UpdatableInsertMethod(ExtractionMethod):
    """Inserts into the updatable view are captured; its trigger refuses updates and deletes."""

    name = "UPDATABLE_INSERT"
    captured_dml = frozenset({DML.INSERT})
    offload_use_cases = frozenset(OffloadUseCase)
    view_kind = ViewKind.UNION_ALL
    source_objects = (
        *CHANGELOG_OBJECTS,
        SourceObject.UPDATABLE_VIEW,
        SourceObject.UPDATABLE_TRIGGER,
    )
    verifies_unique_key = True
    when_to_use = (
        "Rows must be added to offloaded data that is no longer in the source (for example "
        "dropped partitions) and cannot be inserted into the source table."
    )
