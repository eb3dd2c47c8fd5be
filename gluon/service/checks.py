"""The service's extraction checks that found nothing: counted in memory, written rarely.

An idle table is checked every interval; a row per check (600 a minute over 100 tables)
cost the service a fifth of its time in repository bookkeeping and grew the repository
without telling anything new. The service counts them here and writes, about once a
minute and when it stops, one row a table (``service_checks``): its latest check and how
many found nothing. Status shows that time as the most recent extraction (a check that
found nothing is an extraction that shipped nothing), so it still says the table is
watched.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from gluon.repo import Repository
from gluon.repo.incremental import EmptyChecks

log = logging.getLogger(__name__)

FLUSH_SECONDS = 60.0
"""How often the counted checks are written to the repository."""


class EmptyCheckCounter:
    def __init__(self, repo_url: str) -> None:
        self._repo_url = repo_url
        self._lock = threading.Lock()
        self._pending: dict[str, EmptyChecks] = {}
        self._latest: dict[str, dt.datetime] = {}
        self.total = 0

    def checked(self, table_key: str, enablement_id: int | None, at: dt.datetime) -> None:
        """A check of ``table_key`` at ``at`` found nothing to extract."""
        with self._lock:
            before = self._pending.get(table_key)
            count = (
                1 if before is None or before.enablement_id != enablement_id else before.count + 1
            )
            self._pending[table_key] = EmptyChecks(table_key, enablement_id, at, count)
            self._latest[table_key] = at
            self.total += 1

    def shipped(self, table_key: str, at: dt.datetime) -> None:
        """A recorded extraction of ``table_key`` finished successfully at ``at``."""
        with self._lock:
            self._latest[table_key] = at

    def latest(self, table_key: str) -> dt.datetime | None:
        """The latest successful check or extraction this service made (None: none yet)."""
        with self._lock:
            return self._latest.get(table_key)

    def flush(self) -> None:
        """Write the checks counted since the last flush (kept for the next on failure)."""
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        if not pending:
            return
        try:
            Repository(self._repo_url).incremental.record_empty_checks(pending)
        except Exception as exc:  # the repository busy or down: the service goes on
            log.warning("writing the service's empty checks failed (tried again): %s", exc)
            with self._lock:
                for check in pending:
                    later = self._pending.get(check.table_key)
                    if later is None:
                        self._pending[check.table_key] = check
                    elif later.enablement_id == check.enablement_id:
                        self._pending[check.table_key] = EmptyChecks(
                            check.table_key,
                            check.enablement_id,
                            later.checked_at,
                            later.count + check.count,
                        )
