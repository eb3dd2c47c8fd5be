"""Change feeds: where an extraction reads changes, and how it marks them shipped.

One feed per ``ChangeReader`` of the method registry (``FEEDS``), each in its own module:
``changelog`` (the changelog methods), ``rowscn`` (ORA_ROWSCN) and ``pg_logical``
(PG_LOGICAL, with ``slot``: what enabling checks and status counts of its slot, and
``shared_slot``: a table joining and leaving its database's shared slot, ``shared_reader`` and
``shared_feed``: the feed ``PgLogicalFeed`` gives a table enabled into it); ``base``
holds the protocol they share. What differs between them is declared or done here, behind
the protocol: callers look a feed up by ``FEEDS[method.change_reader]`` and never ask
which one it is (``tests/unit/test_plugin_boundary.py``).
"""

from __future__ import annotations

from gluon.extract.feeds.base import (
    REBUILD_HINT,
    ChangeFeed,
    Pending,
    SlotBacklog,
    capture_objects,
    object_records,
)
from gluon.extract.feeds.changelog import ChangelogFeed
from gluon.extract.feeds.pg_logical import PgLogicalFeed
from gluon.extract.feeds.rowscn import RowscnFeed
from gluon.methods.base import ChangeReader

FEEDS: dict[ChangeReader, type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]] = {
    ChangeReader.CHANGELOG: ChangelogFeed,
    ChangeReader.ORA_ROWSCN: RowscnFeed,
    ChangeReader.PG_LOGICAL: PgLogicalFeed,
}

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
    "object_records",
]
