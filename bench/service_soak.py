"""Resident memory of ``gluon service`` under a steady load:
``PYTHONPATH=tests python -m bench.service_soak [--minutes 5] [--max-growth-mb 100] ...``.

One ``gluon service`` over ``--tables`` PostgreSQL tables (the mixed methods and merge
modes of ``bench.service_scale``) while a writer inserts ``--rate`` rows a second spread
over all of them, for ``--minutes``. The service's resident memory (``VmRSS``) is sampled
every second; the **baseline** is the largest sample of the first ``--warmup-minutes``
(the engine's start, the first pass over every table and its caches), the **growth** is
the largest sample after it less the baseline. Exits 1 when the growth passes
``--max-growth-mb`` (a leak: issue 33 asks for memory flat over an hour, ``--minutes 60``),
0 otherwise; prints one JSON object either way and writes it to ``--out``.
Not part of the test command; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import BIN, save_json, service_home
from bench.service_scale import _env, _prepare, _rss_mb, _Writer

SAMPLE_SECONDS = 1.0


def _sample_rss(pid: int, halt: threading.Event, samples: list[tuple[float, float]]) -> None:
    started = time.monotonic()
    while not halt.wait(SAMPLE_SECONDS):
        rss = _rss_mb(pid)
        if rss is not None:
            samples.append((time.monotonic() - started, rss))


def growth(samples: list[tuple[float, float]], warmup_seconds: float) -> tuple[float, float] | None:
    """(baseline, growth) in MB: the largest sample of the warm-up, the largest after it
    less that; None without samples on both sides."""
    warm = [rss for at, rss in samples if at <= warmup_seconds]
    after = [rss for at, rss in samples if at > warmup_seconds]
    if not warm or not after:
        return None
    return max(warm), max(after) - max(warm)


def soak(url: str, home: Path, names: list[str], arguments: argparse.Namespace) -> dict[str, Any]:
    config = home / "conf" / "tables.toml"
    lines = ["[defaults]", f'extraction_interval = "{arguments.interval}s"', ""]
    lines += [f'[tables."app.{name}"]' for name in names]
    config.write_text("\n".join(lines) + "\n")
    output = home / "service.out"
    service = subprocess.Popen(
        [str(BIN / "gluon"), "service", "--config", str(config), "--parallel", "2"],
        env=_env(home),
        stdout=output.open("wb"),
        stderr=subprocess.STDOUT,
    )
    samples: list[tuple[float, float]] = []
    halt = threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(service.pid, halt, samples))
    sampler.start()
    writer = _Writer(url, names, arguments.rate)
    writer.start()
    try:
        time.sleep(arguments.minutes * 60)
    finally:
        writer.halt.set()
        writer.join()
        halt.set()
        sampler.join()
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=600)
    if writer.failure is not None:
        raise writer.failure
    runs = sum(1 for line in output.read_text().splitlines() if line.startswith("run: "))
    measured = growth(samples, arguments.warmup_minutes * 60)
    rss = [value for _, value in samples]
    return {
        "tables": len(names),
        "rate": arguments.rate,
        "minutes": arguments.minutes,
        "written": writer.written,
        "runs": runs,
        "rss_mb_first_last_max": [rss[0], rss[-1], max(rss)] if rss else None,
        "rss_mb_over_time": rss[:: max(len(rss) // 20, 1)],
        "baseline_mb": measured[0] if measured else None,
        "growth_mb": round(measured[1], 1) if measured else None,
        "max_growth_mb": arguments.max_growth_mb,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="inserts per second, all tables")
    parser.add_argument("--minutes", type=float, default=5.0, help="how long (issue 33: 60)")
    parser.add_argument("--warmup-minutes", type=float, default=1.0, help="baseline window")
    parser.add_argument("--interval", type=float, default=1.0, help="extraction interval (s)")
    parser.add_argument(
        "--max-growth-mb", type=float, default=100.0, help="fail above this growth (MB)"
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-service")
    arguments = parser.parse_args()
    if arguments.warmup_minutes >= arguments.minutes:
        parser.error("--warmup-minutes must be shorter than --minutes")

    with service_home("bench_service_soak") as (url, home):
        names = [f"s{number:03d}" for number in range(arguments.tables)]
        _prepare(url, home, names)
        figure = soak(url, home, names, arguments)
    print(json.dumps(figure), flush=True)
    save_json(arguments.out, "service-soak.json", figure)
    if figure["growth_mb"] is None or figure["growth_mb"] > arguments.max_growth_mb:
        print(
            f"FAILED: resident memory grew {figure['growth_mb']} MB after the warm-up "
            f"(bound {arguments.max_growth_mb} MB)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
