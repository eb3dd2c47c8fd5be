"""The embedded engine's allocator (mimalloc) gives freed memory back at once.

With its default it kept freed pages: the service's resident memory grew with every
Delta commit (issue 33; bench/service_soak.py). mimalloc reports the options it took
when ``MIMALLOC_VERBOSE=1``; a value the user set wins.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

START_ENGINE = "from gluon.lake.session import _sail_url; _sail_url()"


def _options_taken(extra: dict[str, str]) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MIMALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", START_ENGINE],
        env={**env, "MIMALLOC_VERBOSE": "1", **extra},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize(("extra", "taken"), [({}, "0"), ({"MIMALLOC_PURGE_DELAY": "25"}, "25")])
def test_the_engine_purges_freed_memory_at_once_unless_told_otherwise(
    extra: dict[str, str], taken: str
) -> None:
    assert f"option 'purge_delay': {taken} " in _options_taken(extra)
