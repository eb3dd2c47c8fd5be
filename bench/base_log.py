"""What an IMMEDIATE base table's Delta log and files look like over a continuous run.

:class:`BaseLogSampler` reads, every few seconds while ``bench.continuous`` writes, the
base's ``_delta_log`` (bytes, JSON commits, the newest checkpoint, so the commits a reader
replays after it) and its data file count; :func:`merge_times` reads each batch's merge
time and the base files it scanned from the base's history afterwards (deltalake's
``execution_time_ms`` and ``num_target_files_scanned`` of every MERGE commit). Both are
summed up in windows of the run (:func:`windows`), so growth over time shows as rising
figures from one window to the next.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any


def base_path(home: Path, table_key: str) -> str | None:
    os.environ["OFFLOAD_HOME"] = str(home)
    from gluon.api import Repository, load_settings

    record = Repository(load_settings().repo_url).get_table(table_key)
    return None if record is None else record.base_path


def log_sample(location: str) -> dict[str, Any]:
    """The base's version, log size, commits since its newest checkpoint and data files."""
    from deltalake import DeltaTable

    log_dir = Path(location.removeprefix("file://")) / "_delta_log"
    entries = list(log_dir.iterdir())
    commits = [int(p.name.split(".")[0]) for p in entries if p.name.endswith(".json")]
    checkpoint_hint = log_dir / "_last_checkpoint"
    checkpoint = (
        int(json.loads(checkpoint_hint.read_text())["version"]) if checkpoint_hint.exists() else -1
    )
    version = max(commits) if commits else -1
    return {
        "version": version,
        "log_bytes": sum(p.stat().st_size for p in entries if p.is_file()),
        "log_json_files": len(commits),
        "checkpoint": checkpoint,
        "commits_since_checkpoint": version - checkpoint,
        "data_files": len(DeltaTable(location).file_uris()),
    }


class BaseLogSampler(threading.Thread):
    """Samples :func:`log_sample` every ``every`` seconds until ``stop`` is set."""

    def __init__(self, home: Path, table_key: str, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.home = home
        self.table_key = table_key
        self.every = every
        self.stop = threading.Event()
        self.samples: list[dict[str, Any]] = []
        self.started = time.time()

    def run(self) -> None:
        location = None
        while not self.stop.wait(self.every):
            try:
                location = location or base_path(self.home, self.table_key)
                if location is not None:
                    sample = log_sample(location)
                    sample["t"] = round(time.time() - self.started, 1)
                    self.samples.append(sample)
            except (OSError, ValueError):  # a file removed mid-listing: the next sample
                continue


def merge_times(location: str, since: float) -> list[tuple[float, float, int]]:
    """(seconds after ``since``, merge milliseconds, base files scanned) of each MERGE
    commit of the base."""
    from deltalake import DeltaTable

    times = []
    for entry in DeltaTable(location).history():
        metrics = entry.get("operationMetrics") or {}
        if entry.get("operation") != "MERGE" or "execution_time_ms" not in metrics:
            continue
        moment = int(entry["timestamp"]) / 1000 - since
        scanned = int(metrics.get("num_target_files_scanned", 0))
        times.append((moment, float(metrics["execution_time_ms"]), scanned))
    return sorted(times)


def windows(
    samples: list[dict[str, Any]], merges: list[tuple[float, float, int]], width: float
) -> list[dict[str, Any]]:
    """Per ``width`` seconds of the run: the merges' median and max time and files scanned,
    and the last log sample in the window."""
    out = []
    end = max([merge[0] for merge in merges] + [s["t"] for s in samples] + [0.0])
    start = 0.0
    while start <= end:
        inside = [merge for merge in merges if start <= merge[0] < start + width]
        sampled = [s for s in samples if start <= s["t"] < start + width]
        row: dict[str, Any] = {"from_s": start, "merges": len(inside)}
        if inside:
            row["merge_ms_p50"] = round(statistics.median(merge[1] for merge in inside))
            row["merge_ms_max"] = round(max(merge[1] for merge in inside))
            row["files_scanned_p50"] = round(statistics.median(merge[2] for merge in inside))
        if sampled:
            row.update({k: v for k, v in sampled[-1].items() if k != "t"})
        out.append(row)
        start += width
    return out
