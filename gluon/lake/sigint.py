"""Ctrl-C stays gluon's: the embedded Sail server must not stop on the terminal's SIGINT.

pysail's server (0.7) waits on tokio's ``ctrl_c()`` to shut down, which installs a
process-wide SIGINT handler that runs before Python's. One Ctrl-C in ``gluon shell`` then
raised KeyboardInterrupt *and* stopped the engine: the next statement, and releasing the
session at exit, retried against a closed server for minutes (``[RETRIES_EXCEEDED]``).
gluon stops the server itself (at exit), so the server's handler is replaced by the one
the process had before it started: Python's, or whatever a command installed.

Measured (Linux, pysail 0.7.2): the server installs its handler ~10 ms after ``start``,
when its thread first waits for the shutdown signal; nothing installs it later (tokio
registers a signal once per process).
"""

from __future__ import annotations

import ctypes
import logging
import signal
import sys
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

HANDLER_WAIT_SECONDS = 5.0
"""How long to wait for the server to install its handler (it takes milliseconds)."""
_POLL_SECONDS = 0.002
_SIGACTION_BYTES = 512
"""Room for a C ``struct sigaction`` (152 bytes on Linux x86-64 and aarch64)."""

_checked = False


def _libc() -> ctypes.CDLL | None:
    if sys.platform == "win32":  # no sigaction; Sail's handler there is a console handler
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction  # noqa: B018 - present on every POSIX C library
    except (OSError, AttributeError):
        return None
    return libc


def _sigint_action(libc: ctypes.CDLL) -> bytes:
    """The process's current SIGINT ``struct sigaction``, as raw bytes."""
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if libc.sigaction(signal.SIGINT, None, action) != 0:
        raise OSError(ctypes.get_errno(), "sigaction failed")
    return action.raw


def _handler(action: bytes) -> bytes:
    """The handler's address: the struct's first member. Only that is compared: glibc fills
    the rest of ``sa_mask`` (128 bytes, the kernel's is 8) with whatever its stack held."""
    return action[: ctypes.sizeof(ctypes.c_void_p)]


def start_keeping_sigint(start: Callable[[], None]) -> None:
    """Run ``start`` (it starts the embedded server), then put back the SIGINT handler the
    process had before, once the server has installed its own.

    Only the first server of a process installs a handler, so later calls only ``start``.
    A platform without ``sigaction``, or a server that installed nothing in
    :data:`HANDLER_WAIT_SECONDS`, is logged and left as it is.
    """
    global _checked
    libc = None if _checked else _libc()
    if libc is None:
        start()
        return
    before = _sigint_action(libc)
    start()
    _checked = True
    deadline = time.monotonic() + HANDLER_WAIT_SECONDS
    while _handler(_sigint_action(libc)) == _handler(before):
        if time.monotonic() > deadline:
            log.debug("the embedded engine installed no SIGINT handler")
            return
        time.sleep(_POLL_SECONDS)
    saved = ctypes.create_string_buffer(before, _SIGACTION_BYTES)
    if libc.sigaction(signal.SIGINT, saved, None) != 0:
        log.warning(
            "could not take SIGINT back from the embedded engine (errno %d): Ctrl-C "
            "stops the engine",
            ctypes.get_errno(),
        )
        return
    log.debug("SIGINT handler restored after the embedded engine started")
