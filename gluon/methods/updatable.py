"""UPDATABLE: DML against an updatable view in the hybrid schema patches the offloaded data."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    UPDATABLE_OBJECTS,
    ExtractionMethod,
    OffloadUseCase,
)


class UpdatableMethod(ExtractionMethod):
    """The view's INSTEAD OF trigger records the changes; the application table is untouched.

    The view shows the application table plus the lake rows staged with
    ``--incremental-stage-lake-rows``, so rows gone from the source can be patched too.
    """

    name = "UPDATABLE"
    summary = "patch through the updatable view"
    is_basic = True
    captured_dml = frozenset({DML.INSERT, DML.UPDATE, DML.DELETE})
    offload_use_cases = frozenset(OffloadUseCase)
    source_objects = (*CHANGELOG_OBJECTS, *UPDATABLE_OBJECTS)
    keeps_lake_only_rows = True
    when_to_use = (
        "Offloaded data must be corrected through the updatable view: rows that may be gone "
        "from the source, or any table where a trigger on the application table is not "
        "wanted (source DML must then be repeated on the view)."
    )
