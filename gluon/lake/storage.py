"""Lake storage: where tables live, and Delta log facts read with deltalake."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from gluon.errors import ConfigError, StateError
from gluon.faults import fault_point
from gluon.lake import failures

log = logging.getLogger(__name__)


def is_local(root: str) -> bool:
    """True for a plain path or a ``file://`` URI."""
    scheme = urlparse(root).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(location: str) -> Path:
    """The filesystem path of a local location."""
    parsed = urlparse(location)
    return Path(parsed.path if parsed.scheme == "file" else location)


def _object_store(location: str) -> Any:
    """deltalake's own store over the object-store folder ``location``: the same store and
    settings as every Delta call (the process environment: gluon.config). The raw handler,
    not ``deltalake.fs.DeltaStorageHandler``: that one wraps its streams in pyarrow files,
    whose writes it then refuses ("'Buffer' object is not an instance of 'bytes'",
    deltalake 1.6.6)."""
    from deltalake._internal import DeltaFileSystemHandler

    return DeltaFileSystemHandler(location.rstrip("/"), None, None)


def write_text(location: str, name: str, text: str) -> None:
    """Write the small file ``name`` into the folder ``location`` (a path or an object-store
    URI; an object-store put replaces the whole object at once)."""
    if is_local(location):
        folder = local_path(location)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
        return
    stream = _object_store(location).open_output_stream(name)
    try:
        stream.write(text.encode("utf-8"))
    finally:
        stream.close()


def read_text(location: str, name: str) -> str | None:
    """The small file ``name`` in the folder ``location`` (None: it does not exist)."""
    if is_local(location):
        try:
            return (local_path(location) / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
    try:
        stream = _object_store(location).open_input_file(name)
    except FileNotFoundError:
        return None
    try:
        return bytes(stream.read()).decode("utf-8")
    finally:
        stream.close()


def remove_table(location: str) -> bool:
    """Delete the files of a Delta table gluon no longer uses; False where it cannot."""
    fault_point("lake.before_remove_table")
    if is_local(location):
        shutil.rmtree(local_path(location), ignore_errors=True)
    else:
        _object_store(location).delete_dir("")  # every object under the prefix
    fault_point("lake.after_remove_table")
    return True


def check_writable(root: str) -> None:
    """Fail with one clear line unless the lake root can be written.

    Raises:
        ConfigError: the local lake root cannot be created or written.
    """
    if not is_local(root):
        _check_object_store(root)
        return
    path = local_path(root)
    # Nothing is created here (a dry run changes nothing): probe the root, or where it would be.
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    probe = existing / f".gluon-write-check-{uuid.uuid4().hex}"
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "not a directory", str(existing))
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"OFFLOAD_LAKE_ROOT {root} is not writable ({exc.strerror or exc}): "
            "fix its permissions or point OFFLOAD_LAKE_ROOT elsewhere"
        ) from None


def _check_object_store(root: str) -> None:
    """Read the lake root once, so missing credentials, a missing bucket or an endpoint that
    does not answer fail before anything is written."""
    from deltalake import DeltaTable

    try:
        DeltaTable.is_deltatable(root)
    except Exception as exc:
        cause = failures.storage_cause(exc)
        if cause in (failures.NO_CREDENTIALS, failures.NO_BUCKET, failures.UNREACHABLE):
            raise ConfigError(f"OFFLOAD_LAKE_ROOT {root}: {cause}") from None
        # Anything else (a scheme the engine reads but deltalake does not, a network
        # hiccup) is left to the first write, which names it.
        log.info("reading the lake root %s failed: %s", root, failures.describe(exc))


def delta_version(location: str) -> int | None:
    """The latest Delta version of the table at ``location`` (None: no table)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return int(DeltaTable(location).version())
    except TableNotFoundError:
        return None


def data_files(location: str) -> int | None:
    """How many data files the latest version of the Delta table at ``location`` holds,
    from its log (no data file is opened). None: no table at ``location``."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return len(DeltaTable(location).file_uris())
    except TableNotFoundError:
        return None


@dataclass(frozen=True)
class PartitionFiles:
    """How many data files one version of a Delta table holds in a range of partitions."""

    version: int
    files: int


def partition_files(location: str, column: str, *, at_least: int) -> PartitionFiles | None:
    """The latest version of the Delta table at ``location`` and how many of its data files
    have the integer partition column ``column`` at least ``at_least``, both from one read
    of the Delta log (no data file is opened). None: no table at ``location``."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(location)
    except TableNotFoundError:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    values = actions.column(f"partition.{column}").to_pylist() if actions.num_rows else []
    files = sum(1 for value in values if value is not None and int(value) >= at_least)
    return PartitionFiles(version=int(table.version()), files=files)


ENGINE = "engine"
DELTALAKE = "deltalake"
GONE = "gone"


def _newest_checkpoint(location: str) -> int | None:
    """The version of the newest checkpoint in a local Delta log (None: none, or not local)."""
    log_dir = local_path(location) / "_delta_log"
    versions = []
    for entry in log_dir.glob("*.checkpoint*.parquet"):
        head = entry.name.split(".", 1)[0]
        if head.isdigit():
            versions.append(int(head))
    return max(versions) if versions else None


def version_readability(location: str, version: int) -> tuple[str, str]:
    """Whether ``version`` of the Delta table at ``location`` can still be read, and how.

    Returns ``(ENGINE | DELTALAKE | GONE, reason)``. The engine (Sail) cannot read a
    version older than the table's newest checkpoint; deltalake can, as long as the
    version's log entry and data files exist (vacuum deletes the files, a full
    compaction deletes the whole old table).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(location, version=version)
    except TableNotFoundError:
        return GONE, "the table was deleted"
    except Exception as exc:  # deltalake reports a missing log entry in several error types
        return GONE, f"version {version} is no longer in the Delta log ({exc})"
    if is_local(location):
        root = local_path(location)
        for uri in table.file_uris():
            path = local_path(uri)
            if not (path if path.is_absolute() else root / path).exists():
                return GONE, "vacuum deleted its data files"
        newest = _newest_checkpoint(location)
        if newest is not None and newest > version:
            return DELTALAKE, f"the engine cannot time-travel past checkpoint {newest}"
        return ENGINE, ""
    return _object_store_readability(location, version, table.file_uris())


def _object_store_readability(location: str, version: int, uris: list[str]) -> tuple[str, str]:
    """:func:`version_readability` on an object store: one HEAD per data file (as many
    requests as the version has files) and one GET of the newest checkpoint's hint."""
    from pyarrow.fs import FileType

    store = _object_store(location)
    prefix = location.rstrip("/") + "/"
    relative = [uri.removeprefix(prefix) for uri in uris]
    if any(info.type == FileType.NotFound for info in store.get_file_info(relative)):
        return GONE, "vacuum deleted its data files"
    try:
        newest = int(
            json.loads(read_text(location, "_delta_log/_last_checkpoint") or "{}")["version"]
        )
    except (KeyError, ValueError, TypeError):
        newest = None
    if newest is not None and newest > version:
        return DELTALAKE, f"the engine cannot time-travel past checkpoint {newest}"
    return ENGINE, ""


def vacuum(location: str, *, retention_hours: float, keep_versions: Sequence[int] = ()) -> int:
    """Delete the files of the Delta table at ``location`` that no version newer than
    ``retention_hours`` ago, nor any of ``keep_versions``, uses; return how many were deleted.

    deltalake counts retention in whole hours: a fraction is rounded up (0.5 keeps files
    for an hour), never down, since 0 would delete files a running query may still read.
    """
    from deltalake import DeltaTable

    from gluon.lake.checkpoints import no_post_commit_hooks  # it reads through this module

    hours = math.ceil(retention_hours)
    removed = DeltaTable(location).vacuum(
        retention_hours=hours,
        enforce_retention_duration=False,
        dry_run=False,
        keep_versions=list(keep_versions) or None,
        post_commithook_properties=no_post_commit_hooks(),
    )
    return len(removed)


def delta_dataset(location: str, version: int | None = None) -> Any:
    """A pyarrow dataset over ``version`` (None: the latest) of the Delta table at ``location``.

    Local tables are read through pyarrow's own filesystem: read through deltalake's
    filesystem handler from pyarrow's threads, a process aborted at exit ("terminate called
    without an active exception", SIGABRT) after 2 of 3 full reads (deltalake 1.6.6,
    pyarrow 26), turning a finished command's exit code into 134.

    Raises:
        TableNotFoundError: no Delta table at ``location``.
    """
    from deltalake import DeltaTable
    from pyarrow import fs

    table = DeltaTable(location, version=version)
    if not is_local(location):
        return table.to_pyarrow_dataset()
    root = fs.SubTreeFileSystem(str(local_path(location).resolve()), fs.LocalFileSystem())
    return table.to_pyarrow_dataset(filesystem=root)


def read_delta(
    location: str, version: int | None = None, columns: Sequence[str] | None = None
) -> Any:
    """``version`` (None: the latest) of the Delta table at ``location`` as a pyarrow table,
    with only ``columns`` if given (see :func:`delta_dataset`)."""
    return delta_dataset(location, version).to_table(
        columns=None if columns is None else list(columns)
    )


def delta_row_count(location: str, *, column: str | None = None, at_least: int = 0) -> int:
    """Rows in the current version of the Delta table at ``location`` (0: no table).

    With ``column``, only rows whose ``column`` is at least ``at_least`` count
    (a partition column: answered from the Delta log's partition values).

    Counted by deltalake's own query engine (file statistics), not a pyarrow dataset: that
    imports pyarrow.dataset and pandas (0.3 s of a compaction that starts no engine).
    """
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(location)
    except TableNotFoundError:
        return 0
    where = "" if column is None else f' WHERE "{column}" >= {int(at_least)}'
    query = f"SELECT COUNT(*) FROM gl_counted{where}"
    reader = QueryBuilder().register("gl_counted", table).execute(query)
    counted = pa.RecordBatchReader.from_stream(reader).read_all()
    return int(counted.column(0)[0].as_py()) if counted.num_rows else 0


def missing_delta_table_error(table_key: str, location: str) -> StateError | None:
    """The real problem when an enabled table's delta table is gone from the lake (the engine
    then speaks of creating a table without columns, a count of 0), else None."""
    try:
        if delta_version(location) is not None:
            return None
    except Exception:  # the diagnosis must not hide the error it explains
        return None
    return StateError(
        f"incremental update is enabled for {table_key} but its delta table {location} is "
        "missing from the lake: restore it from a backup, or disable and enable incremental "
        "update again"
    )


def missing_data_files(location: str) -> list[str]:
    """The data files the current version of the Delta table at ``location`` names but the
    storage no longer holds (deleted by hand, or lost): one existence check per file."""
    from deltalake import DeltaTable
    from pyarrow.fs import FileType

    uris = DeltaTable(location).file_uris()
    if is_local(location):
        root = local_path(location)
        paths = [local_path(uri) for uri in uris]
        return [
            uri
            for uri, path in zip(uris, paths, strict=True)
            if not (path if path.is_absolute() else root / path).exists()
        ]
    prefix = location.rstrip("/") + "/"
    infos = _object_store(location).get_file_info([uri.removeprefix(prefix) for uri in uris])
    return [uri for uri, info in zip(uris, infos, strict=True) if info.type == FileType.NotFound]
