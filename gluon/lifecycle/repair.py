"""Repairing the capture objects of an enabled table."""

from __future__ import annotations

from gluon import source as sources
from gluon.capture import objects as source_objects
from gluon.capture import ownership
from gluon.config import Settings
from gluon.errors import StateError
from gluon.extract.feeds import FEEDS, capture_objects
from gluon.lifecycle.checks import (
    check_existing_objects,
    enabled_before_markers,
    missing_objects,
    object_labels,
)
from gluon.lifecycle.enable_plan import EnableOptions
from gluon.lifecycle.result import IncrementalResult
from gluon.locks import lifecycle_lock
from gluon.methods import get_method
from gluon.methods.base import JOINED_KINDS, SourceObject
from gluon.offload.copy import (
    Step,
)
from gluon.repo import Repository


def repair_capture_objects(settings: Settings, options: EnableOptions) -> IncrementalResult:
    """Re-create the missing capture objects of an enabled table; refresh the code objects.

    The way out when capture objects were dropped (or a trigger disabled) outside
    gluon: application DML works and is captured again. Objects that exist must
    be this installation's. The changelog is created with the recorded columns.
    Changes made while capture was broken were never recorded: the message says so.

    Raises:
        StateError: not enabled, another method, or an existing object gluon does not own.
    """
    ref = options.table
    repo = Repository(settings.repo_url)
    record, state = repo.enabled_table(
        ref.key, otherwise="--incremental-recreate-capture-objects repairs an enabled table"
    )
    method = get_method(options.method)
    if method.name != state.method:
        raise StateError(
            f"{ref.key} uses extraction method {state.method}, not {method.name}: repeat it "
            "with --incremental-extraction-method"
        )
    source = sources.connect_configured(settings)
    source.check_connection()
    spec = record.spec()
    objects = capture_objects(state)
    marker = ownership.Marker(repo.installation_id, ref.key)
    check_existing_objects(
        source,
        spec,
        objects,
        marker,
        take_over=False,
        legacy=enabled_before_markers(repo, state),
        recorded=True,
    )
    missing = missing_objects(source, objects, repo.installation_id)
    recreated = [item for item in missing if item.kind is not SourceObject.HYBRID_SCHEMA]
    steps = [
        Step("create_capture", f"create {o.object_type.lower()} {o.display_name}") for o in missing
    ] + [
        Step("refresh_capture", f"replace {o.object_type.lower()} {o.display_name}")
        for o in objects
        if o not in missing and o.kind in source_objects.REPLACED_ON_CREATE
    ]
    result = IncrementalResult(ref.key, steps, options.execute)
    if not options.execute:
        return result
    with lifecycle_lock(
        settings, ref.key, "offload --incremental-recreate-capture-objects", repo=repo
    ):
        schemas = [item for item in missing if item.kind is SourceObject.HYBRID_SCHEMA]
        source_objects.create_source_objects(
            source, spec, method, schemas + objects, state.key_columns, marker
        )
        joined = [item for item in missing if item.kind in JOINED_KINDS]
        if joined:  # created by the feed, not by a template
            FEEDS[method.change_reader].rejoin(source, repo, state, spec, joined)
    result.message = (
        f"re-created {object_labels(recreated)} for {ref.key}; "
        "changes made while they were missing "
        "were not captured: disable incremental update, re-offload with --reset-backend-table "
        "and enable it again to bring the lake back in step"
        if recreated
        else f"capture objects of {ref.key} refreshed (none was missing)"
    )
    return result
