"""The lake's engine started while verify does its first steps without it.

Starting the embedded engine (its server, pyspark's client and their imports) takes about a
second of wall time; a verify opens its lake session only after the extraction, the
repository reads and the source's first pass are under way, and the lake's pass is then the
last to end (bench/README.md, "verify at full, session 15"). A thread opens and closes one
session from the start: the later session finds the server up and the modules imported.
"""

from __future__ import annotations

import logging
import threading

from gluon.config import EngineKind, Settings
from gluon.lake.session import open_session
from gluon.reuse import keeping

log = logging.getLogger(__name__)


class EngineWarmUp:
    """The embedded engine's start, in a thread from construction until :meth:`join`.

    Nothing happens for a remote or classic engine (nothing of theirs starts in this
    process), nor in the service, whose workers keep a session of their own running."""

    def __init__(self, settings: Settings) -> None:
        self._thread: threading.Thread | None = None
        if settings.engine is EngineKind.SAIL and not keeping():
            self._thread = threading.Thread(
                target=self._start, args=(settings,), name="verify-engine-start", daemon=True
            )
            self._thread.start()

    @staticmethod
    def _start(settings: Settings) -> None:
        try:
            with open_session(settings):
                pass
        except Exception:  # the lake's side opens its own session and reports the failure
            log.debug("starting the lake engine ahead of verify failed", exc_info=True)

    @property
    def started(self) -> bool:
        """Whether a thread is starting the engine (or did)."""
        return self._thread is not None

    def join(self) -> None:
        """Wait for the start to end (a failed verify leaves no thread inside the engine)."""
        if self._thread is not None:
            self._thread.join()
