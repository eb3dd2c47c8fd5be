"""Polling until a condition holds, for the tests that run the service as a process."""

from __future__ import annotations

import time
from collections.abc import Callable

WAIT_LIMIT_SECONDS = 300.0
"""How long a test waits before it fails (an upper bound only: it never sets a pace)."""


def wait_until(
    what: str,
    condition: Callable[[], bool],
    limit: float = WAIT_LIMIT_SECONDS,
    pause: float = 0.5,
) -> None:
    """Poll ``condition`` every ``pause`` seconds; fail naming ``what`` after ``limit``."""
    give_up = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(pause)
