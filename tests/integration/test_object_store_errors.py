"""A lake on an object store that cannot be used: one line naming what is missing and how to
fix it, exit 2, nothing written, no raw AWS log lines on the terminal (issue 29).

Each command runs as its own process, as a user runs it: the object-store libraries are
Rust and write to file descriptor 2 directly, which an in-process runner would not see.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.s3 import SECRET_ACCESS_KEY, S3Server

from gluon.env_file import OBJECT_STORE_PREFIXES
from gluon.repo import Repository

PROGRAM = "from gluon.cli.offload import main; main()"


@pytest.fixture
def home(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite source with ``main.items``; no object-store setting in the environment."""
    for key in list(os.environ):
        if key.startswith(OBJECT_STORE_PREFIXES):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role either
    monkeypatch.setenv("AWS_CONFIG_FILE", str(offload_home.parent / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(offload_home.parent / "no-aws-creds"))
    source = offload_home.parent / "app.db"
    with sa.create_engine(f"sqlite:///{source}").begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        db.exec_driver_sql("INSERT INTO items VALUES (1, 'a')")
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{source}")
    (offload_home / "conf").mkdir()
    return offload_home


def _offload(home: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    text = "".join(f"{key}={value}\n" for key, value in settings.items())
    (home / "conf" / "offload.env").write_text(text, encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from gluon.cli.offload import main; main()",
            "-t",
            "main.items",
            "-x",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


def _one_line(result: subprocess.CompletedProcess[str], exit_code: int, *fragments: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("offload: error: "), lines[0]
    assert "unexpected" not in lines[0], lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.returncode == exit_code, lines[0]
    assert SECRET_ACCESS_KEY not in result.stdout + result.stderr


def _no_table_recorded(home: Path) -> None:
    repository = home / "repo" / "gluon.db"
    if repository.exists():
        assert Repository(f"sqlite:///{repository}").list_tables() == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_missing_credentials_are_named(home: Path, s3_server: S3Server, s3_bucket: str) -> None:
    settings = {key: value for key, value in s3_server.env().items() if "ACCESS_KEY" not in key}
    result = _offload(home, {"OFFLOAD_LAKE_ROOT": f"s3://{s3_bucket}/lake", **settings})
    _one_line(result, 2, "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    assert s3_server.keys(s3_bucket) == []
    _no_table_recorded(home)


def test_no_credentials_toward_aws_itself_are_named(home: Path) -> None:
    """No endpoint, no key, no profile, no instance role: the first read of the lake root
    names the credentials; the object-store libraries' own warnings stay off the terminal."""
    result = _offload(home, {"OFFLOAD_LAKE_ROOT": "s3://gluon-test-bucket/lake"})
    _one_line(result, 2, "OFFLOAD_LAKE_ROOT s3://gluon-test-bucket/lake", "AWS_ACCESS_KEY_ID")
    _no_table_recorded(home)


def test_half_a_key_pair_is_named(home: Path, s3_server: S3Server, s3_bucket: str) -> None:
    settings = {key: value for key, value in s3_server.env().items() if "SECRET" not in key}
    result = _offload(home, {"OFFLOAD_LAKE_ROOT": f"s3://{s3_bucket}/lake", **settings})
    _one_line(result, 2, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
    assert s3_server.keys(s3_bucket) == []
    _no_table_recorded(home)


def test_an_endpoint_that_does_not_answer_is_named(
    home: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    settings = {**s3_server.env(), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
    result = _offload(home, {"OFFLOAD_LAKE_ROOT": f"s3://{s3_bucket}/lake", **settings})
    _one_line(result, 2, "OFFLOAD_LAKE_ROOT s3://", "does not answer", "AWS_ENDPOINT_URL")
    assert s3_server.keys(s3_bucket) == []
    _no_table_recorded(home)


def test_a_missing_bucket_is_named(home: Path, s3_server: S3Server) -> None:
    result = _offload(
        home, {"OFFLOAD_LAKE_ROOT": "s3://gluon-no-such-bucket/lake", **s3_server.env()}
    )
    _one_line(result, 2, "OFFLOAD_LAKE_ROOT s3://", "bucket", "does not exist")
    _no_table_recorded(home)


@pytest.mark.parametrize(
    "unsafe",
    [
        "AWS_S3_ALLOW_UNSAFE_RENAME=true",
        "AWS_CONDITIONAL_PUT=disabled",
        "AWS_S3_LOCKING_PROVIDER=dynamodb",
    ],
)
def test_commits_that_could_be_lost_are_refused(
    unsafe: str, home: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    key, value = unsafe.split("=")
    settings = {**s3_server.env(), key: value}
    result = _offload(home, {"OFFLOAD_LAKE_ROOT": f"s3://{s3_bucket}/lake", **settings})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"offload: error: {unsafe} "), result.stderr
    assert result.returncode == 2
    assert s3_server.keys(s3_bucket) == []
    _no_table_recorded(home)
