"""Change feeds: where an extraction reads changes, and how it marks them shipped.

One feed per ``ChangeReader`` of the method registry (``FEEDS``), each in its own module:
``changelog`` (the changelog methods), ``rowscn`` (ORA_ROWSCN) and ``pg_logical``
(PG_LOGICAL, with ``slot``: what enabling checks and status counts of its slot, and
``shared_slot``: a table joining and leaving its database's shared slot, ``shared_reader`` and
``shared_feed``: the feed of a table enabled into it); ``base`` holds the protocol they
share. What differs between them is declared or done here, behind the protocol: callers look
a feed up by ``FEEDS[method.change_reader]`` (what a method's reader declares) or
``feed_of(state)`` (the feed that reads an enabled table, chosen by its recorded capture
objects) and never ask which one it is (``tests/unit/test_plugin_boundary.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gluon.extract.feeds.base import (
    REBUILD_HINT,
    ChangeFeed,
    Pending,
    SlotBacklog,
    capture_objects,
    object_records,
)
from gluon.methods import get_method
from gluon.methods.base import ChangeReader, SourceObject

if TYPE_CHECKING:
    from gluon.extract.feeds.changelog import ChangelogFeed
    from gluon.extract.feeds.pg_logical import PgLogicalFeed
    from gluon.extract.feeds.rowscn import RowscnFeed
    from gluon.repo.incremental import IncrementalState

_FEED_CLASSES: dict[ChangeReader, tuple[str, str]] = {
    ChangeReader.CHANGELOG: ("gluon.extract.feeds.changelog", "ChangelogFeed"),
    ChangeReader.ORA_ROWSCN: ("gluon.extract.feeds.rowscn", "RowscnFeed"),
    ChangeReader.PG_LOGICAL: ("gluon.extract.feeds.pg_logical", "PgLogicalFeed"),
}

_MEMBER_FEEDS: dict[SourceObject, tuple[str, str]] = {
    SourceObject.SHARED_SLOT_TABLE: ("gluon.extract.feeds.shared_feed", "SharedSlotFeed"),
}
"""A table whose recorded capture objects hold one of these kinds (its place in an object
shared by the tables of its database) is read by this feed instead of its reader's."""


class _Feeds(Mapping[ChangeReader, "type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]"]):
    """The feed of each change reader, its module imported when it is first looked up: a
    changelog table's extraction does not load the slot feeds' modules (pgoutput, the shared
    slot: 25-35 ms of a one-second IMMEDIATE sync's start-up, issue 28)."""

    def __getitem__(
        self, reader: ChangeReader
    ) -> type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]:
        module, name = _FEED_CLASSES[reader]
        feed: type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]
        feed = getattr(importlib.import_module(module), name)
        return feed

    def __iter__(self) -> Iterator[ChangeReader]:
        return iter(_FEED_CLASSES)

    def __len__(self) -> int:
        return len(_FEED_CLASSES)


FEEDS = _Feeds()


def feed_of(
    state: IncrementalState,
) -> type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]:
    """The feed that reads the table of ``state``: the feed of the shared object its recorded
    capture objects place it in (``_MEMBER_FEEDS``), else its method's reader's."""
    kinds = {item.kind for item in state.source_objects}
    for kind, (module, name) in _MEMBER_FEEDS.items():
        if kind.value in kinds:
            feed: type[PgLogicalFeed] = getattr(importlib.import_module(module), name)
            return feed
    return FEEDS[get_method(state.method).change_reader]


def __getattr__(name: str) -> Any:
    """``ChangelogFeed``, ``RowscnFeed``, ``PgLogicalFeed``: imported when first named."""
    for reader, (_, class_name) in _FEED_CLASSES.items():
        if class_name == name:
            return FEEDS[reader]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FEEDS",
    "REBUILD_HINT",
    "ChangeFeed",
    "ChangelogFeed",
    "Pending",
    "PgLogicalFeed",
    "RowscnFeed",
    "SlotBacklog",
    "capture_objects",
    "feed_of",
    "object_records",
]
