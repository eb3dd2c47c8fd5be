"""SIGINT (Ctrl-C) is the command's, never the embedded engine's (gluon.lake.sigint).

pysail's server installs its own SIGINT handler, which stopped the server on the first
Ctrl-C: every later statement, and releasing the session, retried for minutes. Each check
runs in a fresh process: only the first server of a process installs the handler.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

INTERRUPTED_THEN_QUERIED = """
import os, signal, time
from gluon.config import load_settings
from gluon.lake.session import open_session

{handler}
with open_session(load_settings()) as session:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the handler runs at once; the sleep only gives it the time
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted")
    print(session.sql("SELECT 6 * 7 AS answer").collect()[0].answer)
"""


def _run(handler: str) -> subprocess.CompletedProcess[str]:
    # The guard only ends a hang (the stopped engine was retried for ~10 minutes): never a
    # speed check.
    return subprocess.run(
        [sys.executable, "-c", INTERRUPTED_THEN_QUERIED.format(handler=handler)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=240,
        check=False,
    )


@pytest.mark.usefixtures("offload_home")
def test_after_ctrl_c_the_engine_still_answers() -> None:
    result = _run("")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["interrupted", "42"]


@pytest.mark.usefixtures("offload_home")
def test_a_handler_the_command_installed_stays_in_place() -> None:
    """``gluon service`` catches SIGINT to stop after the running runs: the engine must not
    take the signal from it (nor stop under those runs)."""
    handler = "signal.signal(signal.SIGINT, lambda number, frame: print('caught', flush=True))"
    result = _run(handler)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["caught", "not interrupted", "42"]
