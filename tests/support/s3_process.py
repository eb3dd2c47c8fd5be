"""moto's S3 server as a process of its own, for tests where gluon runs in the test process.

deltalake's ``DeltaTable.history`` keeps Python's GIL while it waits on the object store, so
a server in a thread of the same process (``support.s3.S3Server``) can never answer it: the
call waits forever (seen in an extraction's row count, through ``gluon.lake.stats``). A
separate process has no such tie. It is started in its own process group and stopped by it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from support.s3 import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY

START_TIMEOUT = 60.0
"""Seconds to wait for the server to listen (generous: the suite runs on loaded machines)."""


class S3Process:
    """moto's S3 server in a child process on 127.0.0.1 and a free port."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.endpoint = ""
        self._server: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        with self.log.open("ab") as out:
            self._server = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if self._server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto's S3 server did not start on {port}: see {self.log}")
            time.sleep(0.1)
        self.endpoint = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is None:
            return
        os.killpg(self._server.pid, signal.SIGTERM)
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self._server.pid, signal.SIGKILL)
            self._server.wait()

    def env(self) -> dict[str, str]:
        """The standard ``AWS_*`` settings that reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_REGION": REGION,
        }

    def client(self) -> Any:  # boto3 ships no type hints
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
        )

    def create_bucket(self) -> str:
        bucket = f"gluon-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=bucket)
        return bucket
