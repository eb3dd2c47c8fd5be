"""The feed registry chooses the feed that reads an enabled table (issue 33 item 1): a table
whose recorded capture objects place it in its database's shared slot is read by the shared
slot's feed, any other PG_LOGICAL table by its own slot's, and no feed class chooses for it
when it is made."""

from __future__ import annotations

from gluon.extract.feeds import FEEDS, feed_of
from gluon.extract.feeds.changelog import ChangelogFeed
from gluon.extract.feeds.pg_logical import PgLogicalFeed
from gluon.extract.feeds.shared_feed import SharedSlotFeed
from gluon.methods.base import ChangeReader, SourceObject
from gluon.repo.incremental import IncrementalState, SourceObjectRecord


def _state(method: str, *kinds: SourceObject) -> IncrementalState:
    return IncrementalState(
        table_key="APP.ORDERS",
        method=method,
        status="ENABLED",
        key_columns=("ID",),
        source_objects=tuple(
            SourceObjectRecord(kind=kind.value, schema="app", name="orders", object_type="X")
            for kind in kinds
        ),
        delta_table="app_load.orders_changes",
        delta_path="/lake/app_load/orders_changes",
    )


def test_a_member_of_the_shared_slot_is_read_by_the_shared_slot_feed() -> None:
    state = _state("PG_LOGICAL", SourceObject.SHARED_SLOT_TABLE)
    assert feed_of(state) is SharedSlotFeed


def test_a_table_with_its_own_slot_is_read_by_its_readers_feed() -> None:
    state = _state("PG_LOGICAL", SourceObject.REPLICATION_SLOT)
    assert feed_of(state) is PgLogicalFeed is FEEDS[ChangeReader.PG_LOGICAL]


def test_a_changelog_table_is_read_by_the_changelog_feed() -> None:
    state = _state("CHANGELOG", SourceObject.CHANGELOG_TABLE, SourceObject.CHANGELOG_TRIGGER)
    assert feed_of(state) is ChangelogFeed


def test_making_the_own_slot_feed_does_not_choose_another_feed() -> None:
    """The choice is the registry's: the own slot's feed made for a member stays itself."""
    state = _state("PG_LOGICAL", SourceObject.SHARED_SLOT_TABLE)
    feed = PgLogicalFeed(None, None, state, None)  # type: ignore[arg-type]
    assert type(feed) is PgLogicalFeed
