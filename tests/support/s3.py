"""An S3-compatible server on 127.0.0.1 for the object-store tests (moto's ThreadedMotoServer).

Usage (the ``s3_server`` and ``s3_bucket`` fixtures in tests/conftest.py do this)::

    server = S3Server()
    server.start()                       # a thread of this process, on a free port
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

import logging
import uuid
from typing import Any

__all__ = ["ACCESS_KEY_ID", "REGION", "SECRET_ACCESS_KEY", "S3Server"]

ACCESS_KEY_ID = "gluontestaccesskey"
SECRET_ACCESS_KEY = "gluon-test-secret-3b7e1c0d9a"
REGION = "us-east-1"


class S3Server:
    """moto's S3 server in a thread of this process, on 127.0.0.1 and a free port."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""
        """``http://127.0.0.1:<port>`` once started."""

    def start(self) -> None:
        """Start serving (returns once the port is bound)."""
        # werkzeug logs one line per request at INFO: thousands per test, on stderr.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving; every bucket is forgotten."""
        self._server.stop()

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
