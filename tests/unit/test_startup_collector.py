"""The ``offload`` command loads its modules with the cyclic garbage collector paused, then
runs with it on (``gluon.cli.startup``; issue 28: a full collection of the start-up's
objects was 25-60 ms of a one-second IMMEDIATE sync). Run in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
{before}
import gluon.cli.offload
print(gc.get_stats()[2]["collections"], gc.isenabled(), gc.get_freeze_count() > 0)
"""


def _probe(before: str = "") -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def test_offload_imports_without_a_full_collection_then_collects() -> None:
    full_collections, enabled, frozen = _probe()
    assert full_collections == "0"
    assert enabled == "True"  # the run itself is collected as usual
    assert frozen == "True"  # the start-up's objects are out of the collector's reach


def test_a_collector_switched_off_before_stays_off() -> None:
    assert _probe("gc.disable()")[1] == "False"
