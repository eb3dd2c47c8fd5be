"""One process's turns at the replication slots: extractions share, the lag reader waits.

PostgreSQL lets one session at a time use a replication slot: while the service's lag
reader peeked a slot to count its backlog, an extraction advancing it failed with
``replication slot ... is active for PID ...`` (and the other way round). Every
extraction of a table whose changes wait in a slot takes a shared turn; the lag reader
takes the only turn, for one table's reading, and is served first when it waits (so a
busy service cannot starve the gauges). A slot may be shared by the tables of a
database, so the turn is one for all slots, not one a slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from gluon.extract.feeds import FEEDS
from gluon.extract.feeds.base import capture_objects
from gluon.methods import get_method
from gluon.repo.incremental import IncrementalState


def reads_a_slot(state: IncrementalState) -> bool:
    """Reading the table's backlog and extracting it take turns (a table's own replication
    slot). Not a table of its database's shared slot: the lag reader does not peek that one
    (its members' backlog comes from their positions), so its extractions never wait for it."""
    feed = FEEDS[get_method(state.method).change_reader]
    return feed.exclusive_reads and not feed.reads_shared_stream(capture_objects(state))


def shares_a_stream(state: IncrementalState) -> bool:
    """The table reads a stream shared with other tables of its database (a shared slot):
    the service extracts the due ones in a row from one decoding (``gluon.service.passes``)."""
    return FEEDS[get_method(state.method).change_reader].reads_shared_stream(capture_objects(state))


class SlotTurns:
    """Shared turns for extractions, a sole turn for the lag reader (served first)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._extracting = 0
        self._reading = False
        self._reader_waiting = False

    @contextmanager
    def extracting(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._reading and not self._reader_waiting)
            self._extracting += 1
        try:
            yield
        finally:
            with self._condition:
                self._extracting -= 1
                self._condition.notify_all()

    @contextmanager
    def reading(self, timeout: float) -> Iterator[bool]:
        """The sole turn; yields False when running extractions did not end in ``timeout``
        seconds (then read nothing: the gauges keep their last value)."""
        with self._condition:
            self._reader_waiting = True
            got = self._condition.wait_for(lambda: self._extracting == 0, timeout)
            self._reader_waiting = False
            self._reading = got
            if not got:
                self._condition.notify_all()
        try:
            yield got
        finally:
            if got:
                with self._condition:
                    self._reading = False
                    self._condition.notify_all()
