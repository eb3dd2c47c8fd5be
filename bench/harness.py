"""Measuring: child processes (wall time and peak RSS), the figures, the workspace.

Every measured operation runs in a fresh child process, gluon's through its real
``offload`` command and the raw baselines through ``python -m bench.worker``,
so both sides pay the same start-up (Python imports, starting the embedded Sail
engine) and their peak memory can be told apart: the peak resident set size of
each child comes from the kernel (``os.wait4`` -> ``ru_maxrss``), and Sail runs
inside that child, so it is covered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULT_MARK = "BENCH_RESULT "

sys.path.insert(0, str(ROOT / "tests"))  # tests/support (PostgresServer) is not a package


class BenchError(RuntimeError):
    """A measured command failed: the benchmark stops with its output."""


@dataclass(slots=True)
class Proc:
    argv: list[str]
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any] = field(default_factory=dict)
    """What a ``bench.worker`` child reported (its ``BENCH_RESULT`` line)."""
    cpu_seconds: float = 0.0
    """The child's user + system CPU time (from ``wait4``): steadier than wall time on a
    shared machine (a database server's work for the child is not in it)."""


def runs_detail(side: str, best: Proc, in_process_s: float, runs: list[Proc]) -> dict[str, Any]:
    """A figure's detail for one side's repeated runs: the fastest one's wall and in-process
    seconds, the largest peak RSS and every run's seconds, keyed ``<side>_...``."""
    return {
        f"{side}_wall_s": best.seconds,
        f"{side}_in_process_s": in_process_s,
        f"{side}_peak_rss_mb": max(proc.peak_rss_mb for proc in runs),
        f"{side}_runs_s": [proc.seconds for proc in runs],
        f"{side}_cpu_s": best.cpu_seconds,
        f"{side}_runs_cpu_s": [proc.cpu_seconds for proc in runs],
    }


def run_process(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
    check: bool = True,
) -> Proc:
    """Run ``argv`` to completion; wall time and the child's peak RSS (from ``wait4``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        deadline = started + timeout
        try:
            while True:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    child.kill()
                    pid, status, usage = os.wait4(child.pid, 0)
                    break
                time.sleep(0.01)
        except BaseException:  # interrupted: leave no child behind
            child.kill()
            child.wait()
            raise
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        proc = Proc(
            argv=argv,
            seconds=seconds,
            peak_rss_mb=usage.ru_maxrss / 1024,  # KiB on Linux
            returncode=child.returncode,
            stdout=out.read(),
            stderr=err.read(),
            cpu_seconds=usage.ru_utime + usage.ru_stime,
        )
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            proc.result = json.loads(line[len(RESULT_MARK) :])
    if check and proc.returncode != 0:
        raise BenchError(
            f"{' '.join(argv)} exited with {proc.returncode} after {seconds:.1f} s\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )
    return proc


def worker(job: str, *args: str, env: dict[str, str] | None = None) -> Proc:
    """Run a raw-baseline job of ``bench.worker`` in a child process."""
    return run_process([sys.executable, "-m", "bench.worker", job, *args], env=env)


@dataclass(slots=True)
class Figure:
    """One row of the results table.

    ``ratio`` is always gluon's cost over the baseline's: time over time, or
    the baseline's rate over gluon's rate, so above 1 means gluon is slower.
    """

    group: str
    name: str
    unit: str
    gluon: float
    baseline: float | None = None
    baseline_name: str = ""
    higher_is_better: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or not self.gluon or not self.baseline:
            return None
        return self.baseline / self.gluon if self.higher_is_better else self.gluon / self.baseline

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


@dataclass(slots=True)
class Results:
    scale: str
    figures: list[Figure] = field(default_factory=list)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        ratio = f"  ratio {figure.ratio:.2f}" if figure.ratio is not None else ""
        base = f"  vs {figure.baseline_name} {fmt(figure.baseline)}" if figure.baseline else ""
        note(f"{figure.group}: {figure.name}: {fmt(figure.gluon)} {figure.unit}{base}{ratio}")
        return figure

    def group(self, name: str) -> list[Figure]:
        return [figure for figure in self.figures if figure.group == name]


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def note(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Workspace:
    """A scratch directory, one throwaway PostgreSQL cluster, and gluon homes in it."""

    def __init__(self, root: Path) -> None:
        from support.postgres import PostgresServer

        self.root = root
        self.server = PostgresServer()

    def __enter__(self) -> Workspace:
        self.root.mkdir(parents=True, exist_ok=True)
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def home(self, name: str, source_url: str) -> GluonHome:
        path = self.root / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return GluonHome(path, source_url)


@dataclass(slots=True)
class GluonHome:
    """One ``OFFLOAD_HOME`` (lake, repository, logs) and the source gluon works on."""

    path: Path
    source_url: str

    @property
    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GLUON_", "OFFLOAD_", "SPARK_"))
        }
        env.update(
            OFFLOAD_HOME=str(self.path),
            GLUON_SOURCE_URL=self.source_url,
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            RUST_LOG="error",
        )
        return env

    @property
    def lake(self) -> Path:
        return self.path / "lake"

    @property
    def repo_url(self) -> str:
        return f"sqlite:///{self.path / 'repo' / 'gluon.db'}"

    def offload(self, *args: str, check: bool = True) -> Proc:
        """The real ``offload`` command, in a child process."""
        return run_process([str(BIN / "offload"), *args], env=self.env, check=check)

    def save(self, name: str) -> None:
        """Copy the lake and the repository aside (restore with :meth:`restore`)."""
        target = self.path.parent / f"{self.path.name}.{name}"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for part in ("lake", "repo"):
            shutil.copytree(self.path / part, target / part, symlinks=True)

    def restore(self, name: str) -> None:
        """Put back the lake and repository saved as ``name`` (paths inside stay valid)."""
        saved = self.path.parent / f"{self.path.name}.{name}"
        for part in ("lake", "repo"):
            shutil.rmtree(self.path / part, ignore_errors=True)
            shutil.copytree(saved / part, self.path / part, symlinks=True)
        shutil.rmtree(self.path / "run", ignore_errors=True)

    def discard(self) -> None:
        for path in self.path.parent.glob(f"{self.path.name}*"):
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def service_home(database: str) -> Iterator[tuple[str, Path]]:
    """A throwaway PostgreSQL cluster with one empty ``database``, and an ``OFFLOAD_HOME``
    whose env file points at it: ``(source URL, home)``; both are gone afterwards."""
    from support.postgres import PostgresServer

    server = PostgresServer()
    server.start()
    work = Path(tempfile.mkdtemp(prefix=f"{database}-"))
    try:
        url = server.create_database(database)
        home = work / "home"
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={url}\n")
        yield url, home
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def save_json(out: Path, name: str, payload: Any) -> None:
    """Write a bench's figures as ``out/name`` (the folder made if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(payload, indent=2))


def settings_of(arguments: Any) -> dict[str, Any]:
    """A bench's command-line settings, for its JSON (without the output folder)."""
    return {key: value for key, value in vars(arguments).items() if key != "out"}
