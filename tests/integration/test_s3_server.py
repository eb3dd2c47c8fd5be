"""The suite's S3-compatible server (support/s3.py) behaves as the object-store tests need."""

from __future__ import annotations

import pyarrow as pa
import pytest
from support.s3 import S3Server


def test_a_delta_table_written_there_is_read_back(s3_server: S3Server, s3_bucket: str) -> None:
    from deltalake import DeltaTable, write_deltalake

    options = {**s3_server.env(), "conditional_put": "etag"}
    location = f"s3://{s3_bucket}/lake/t"
    write_deltalake(location, pa.table({"id": [1, 2]}), storage_options=options)
    write_deltalake(location, pa.table({"id": [3]}), mode="append", storage_options=options)
    table = DeltaTable(location, storage_options=options)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    assert "lake/t/_delta_log/00000000000000000001.json" in s3_server.keys(s3_bucket)


def test_a_put_if_absent_loses_to_an_existing_object(s3_server: S3Server, s3_bucket: str) -> None:
    """The atomic create Delta commits rely on: the second writer of a key is refused."""
    from botocore.exceptions import ClientError

    client = s3_server.client()
    client.put_object(Bucket=s3_bucket, Key="log/1.json", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError, match="PreconditionFailed"):
        client.put_object(Bucket=s3_bucket, Key="log/1.json", Body=b"second", IfNoneMatch="*")
    body = client.get_object(Bucket=s3_bucket, Key="log/1.json")["Body"].read()
    assert body == b"first"
