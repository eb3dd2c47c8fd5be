"""Fault injection for crash tests.

``GLUON_FAULT=<point>`` kills the process at that point with ``os._exit`` (no
cleanup, like ``kill -9``); ``GLUON_PAUSE=<point>:<seconds>`` sleeps there
(to hold a lock while another run starts; with ``GLUON_PAUSE_RELEASE=<path>`` the
pause ends as soon as that file exists, so a test can hold a command exactly as long
as it needs). Points are named
``<operation>.<moment>`` (``extract.after_delta_commit``...). Unset, a fault
point costs two dictionary lookups.
"""

from __future__ import annotations

import os
import time

FAULT_EXIT_CODE = 137


def fault_raise(name: str, error: type[Exception] = OSError) -> None:
    """Raise ``error`` here if ``GLUON_FAULT`` names this point (an unavailable resource)."""
    if os.environ.get("GLUON_FAULT") == name:
        raise error(f"injected fault at {name}")


def fault_point(name: str) -> None:
    """Die (or pause) here if the environment names this point."""
    if os.environ.get("GLUON_FAULT") == name:
        os._exit(FAULT_EXIT_CODE)
    pause = os.environ.get("GLUON_PAUSE", "")
    if pause.startswith(name + ":"):
        _pause(float(pause.rsplit(":", 1)[1]), os.environ.get("GLUON_PAUSE_RELEASE"))


def _pause(seconds: float, release: str | None) -> None:
    if not release:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not os.path.exists(release):
        time.sleep(0.05)
