"""What the ``offload`` command's start-up costs (issue 28: an IMMEDIATE sync against a
hand-written merge). Its modules load with the cyclic garbage collector paused, then run
with it on (``gluon.cli.startup``: a full collection of the start-up's objects was 25-60 ms
of a one-second sync); a changelog table's feed loads without the slot feeds' modules. Run
in a fresh interpreter."""

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


FEED_PROBE = """
import sys
import gluon.cli.offload
from gluon.extract.feeds import FEEDS
from gluon.methods.base import ChangeReader

assert FEEDS[ChangeReader.CHANGELOG].__name__ == "ChangelogFeed"
prefixes = ("gluon.extract.feeds.", "gluon.source.pg")
print(sorted(name for name in sys.modules if name.startswith(prefixes)))
"""


def test_a_changelog_extraction_loads_no_slot_feed() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FEED_PROBE], capture_output=True, text=True, check=True
    ).stdout
    loaded = out.strip()
    assert "pg_logical" not in loaded and "shared" not in loaded and "pgoutput" not in loaded
    assert "gluon.extract.feeds.changelog" in loaded  # the probe itself looked the feed up
