"""A Sail server in local-cluster mode on 127.0.0.1, for the cluster tests (issue 29).

``SAIL_MODE=local-cluster`` makes the server a driver that plans each job and runs its tasks
on workers, sending them each task's plan: what a Sail cluster on Kubernetes does, on one
machine. gluon reaches it the way it reaches any cluster, through ``SPARK_REMOTE``.
The server runs in its own process group and is stopped by that group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ADDRESS = ("--ip", "127.0.0.1", "--port")
START_TIMEOUT = 120.0
"""Seconds to wait for the server to listen (generous: the suite runs on loaded machines)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def sail_cluster(log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the server (its output in ``log``); yield its ``sc://`` URL; stop it."""
    port = _free_port()
    environment = {**os.environ, **(env or {}), "SAIL_MODE": "local-cluster"}
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "pysail", "spark", "server", *ADDRESS, str(port)],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(port):
            if server.poll() is not None:
                raise RuntimeError(f"the Sail cluster exited ({server.returncode}): see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Sail cluster did not listen on {port}: see {log}")
            time.sleep(0.2)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
