"""An S3-compatible server on 127.0.0.1 for the object-store tests (moto's ThreadedMotoServer,
in a child process).

Usage (the ``s3_server`` and ``s3_bucket`` fixtures in tests/conftest.py do this)::

    server = S3Server()
    server.start()                       # a child process, on a free port
    bucket = server.create_bucket()      # a fresh, empty bucket: "gluon-3f2a..."
    env = server.env()                   # AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, AWS_ACCESS_KEY_ID,
                                         # AWS_SECRET_ACCESS_KEY, AWS_REGION
    lake_root = f"s3://{bucket}/lake"
    server.keys(bucket)                  # every object key in the bucket, sorted
    server.client()                      # a boto3 S3 client, for anything else
    server.stop()

The server keeps its objects in memory and forgets them when it stops. It accepts any key
pair; ``SECRET_ACCESS_KEY`` is a distinctive value so a test can check that no output or
log file shows it. moto honours conditional writes (``If-None-Match: *``, ``If-Match``), the
atomic put-if-absent deltalake's ``conditional_put=etag`` commits rely on.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import Any

__all__ = ["ACCESS_KEY_ID", "REGION", "SECRET_ACCESS_KEY", "S3Server"]

ACCESS_KEY_ID = "gluontestaccesskey"
SECRET_ACCESS_KEY = "gluon-test-secret-3b7e1c0d9a"
REGION = "us-east-1"


_SERVE = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # serve until the parent closes stdin (or dies)
"""


class S3Server:
    """moto's S3 server in a child process, on 127.0.0.1 and a free port.

    Not a thread of the test process: deltalake holds the GIL in some calls
    (``DeltaTable.is_deltatable``), so a server sharing the interpreter could not answer
    them and each such call waited out its 180 s retry timeout.
    """

    def __init__(self, log: Path | None = None) -> None:
        self.log = log
        """Where the server writes one line per request it serves (None: nowhere); the
        object-store bench counts requests from it."""
        self._process: subprocess.Popen[str] | None = None
        self.endpoint = ""
        """``http://127.0.0.1:<port>`` once started."""

    def start(self) -> None:
        """Start serving (returns once the port is bound)."""
        # werkzeug logs every request on stderr
        sink = self.log.open("ab") if self.log else nullcontext(subprocess.DEVNULL)
        with sink as requests:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _SERVE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=requests,
                text=True,
            )
        assert self._process.stdout is not None
        port = self._process.stdout.readline().strip()
        if not port.isdigit():
            self.stop()
            raise RuntimeError("the moto S3 server did not start (is moto[server] installed?)")
        self.endpoint = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Stop serving; every bucket is forgotten."""
        if self._process is None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def env(self) -> dict[str, str]:
        """The settings a client needs to reach this server (standard ``AWS_*`` names), for
        the environment, ``conf/offload.env`` or deltalake's ``storage_options``."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_REGION": REGION,
        }

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (default: a fresh ``gluon-<hex>`` name) and return its name."""
        bucket = name or f"gluon-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=bucket)
        return bucket

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix``, sorted."""
        paginator = self.client().get_paginator("list_objects_v2")
        found: list[str] = []
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found.extend(item["Key"] for item in page.get("Contents", []))
        return sorted(found)

    def client(self) -> Any:  # boto3 ships no type hints
        """A boto3 S3 client for this server (to look at or prepare objects directly)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
        )
