"""Fault points: every listed point is reached by some code path, and every point is listed.

The stateful model test (tests/stateful/) draws its kills from ``FAULT_POINTS``;
a point that no code reaches would make those kills silently do nothing, and a
point missing from the list would never be drawn.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gluon.compact.steps import STEPS
from gluon.faults import COMPACTION_STEPS, FAULT_EXIT_CODE, FAULT_POINTS, REPOSITORY_WRITES

GLUON = Path(__file__).resolve().parents[2] / "gluon"
LITERAL_POINT = re.compile(r"""fault_point\(\s*"([a-z_.]+)"\s*\)""")
REPOSITORY_WRITE = re.compile(r"""@repository_write\("([a-z_]+)"\)\n\s+def \w+\(""")
# A method of a repository class: its decorators, its name, and its body up to the next method.
METHOD = re.compile(r"\n(    (?:@.*\n    )*)def (\w+)\(.*?(?=\n    (?:@|def )|\Z)", re.S)


def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in GLUON.rglob("*.py")}


def test_compaction_step_names_match_the_steps() -> None:
    assert tuple(step.name for step in STEPS) == COMPACTION_STEPS


def test_every_listed_point_is_reached_in_the_source() -> None:
    sources = _sources()
    literal = {name for text in sources.values() for name in LITERAL_POINT.findall(text)}
    decorated = {name for text in sources.values() for name in REPOSITORY_WRITE.findall(text)}
    runner = (GLUON / "compact" / "runner.py").read_text()
    assert 'fault_point(f"compact.before_{step.name}")' in runner
    assert 'fault_point(f"compact.after_{step.name}")' in runner
    reached = literal | {
        f"compact.{moment}_{step.name}" for step in STEPS for moment in ("before", "after")
    }
    reached |= {f"repo.{moment}_{name}" for name in decorated for moment in ("before", "after")}
    assert set(REPOSITORY_WRITES) == decorated
    unreached = [point for point in FAULT_POINTS if point not in reached]
    assert unreached == [], f"listed in FAULT_POINTS but never reached: {unreached}"
    unlisted = sorted(reached - set(FAULT_POINTS))
    assert unlisted == [], f"fault points missing from FAULT_POINTS: {unlisted}"
    assert len(FAULT_POINTS) == len(set(FAULT_POINTS))


def test_every_repository_write_is_decorated() -> None:
    """Each method of the repository classes that opens a write transaction has fault points."""
    repo = GLUON / "repo"
    undecorated = []
    for path in sorted(repo.glob("*.py")):
        if path.name in {"models.py", "migrations.py", "common.py"}:
            continue
        text = path.read_text()
        for match in METHOD.finditer(text):
            decorators, name = match.group(1), match.group(2)
            body = match.group(0)
            writes = "engine.begin()" in body or "upsert(" in body
            if writes and "@repository_write(" not in decorators:
                undecorated.append(f"{path.name}:{name}")
    assert undecorated == [], f"repository writes without fault points: {undecorated}"


@pytest.mark.parametrize(
    ("fault", "visits", "dies"),
    [("demo.point", 3, True), ("demo.point@3", 3, True), ("demo.point@4", 3, False)],
)
def test_a_point_dies_on_its_nth_visit(fault: str, visits: int, dies: bool) -> None:
    code = (
        "from gluon.faults import fault_point\n"
        f"for _ in range({visits}):\n"
        "    fault_point('demo.point')\n"
        "print('survived')\n"
    )
    env = {**os.environ, "GLUON_FAULT": fault}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == (FAULT_EXIT_CODE if dies else 0), done.stderr
    assert ("survived" in done.stdout) is not dies


@pytest.mark.parametrize(
    ("pause", "paused_at"),
    [("demo.point:9", [1, 2, 3]), ("demo.point@2:9", [2]), ("demo.point@4:9", [])],
)
def test_a_pause_holds_on_every_visit_or_on_its_nth(
    pause: str, paused_at: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gluon import faults

    visits = [0]
    held: list[tuple[int, float]] = []
    monkeypatch.setattr(faults, "_reached", {})
    monkeypatch.setattr(
        faults, "_pause", lambda seconds, _release: held.append((visits[-1], seconds))
    )
    monkeypatch.setenv("GLUON_PAUSE", pause)
    monkeypatch.delenv("GLUON_FAULT", raising=False)
    for visit in range(1, 4):
        visits.append(visit)
        faults.fault_point("demo.point")
    faults.fault_point("demo.other")
    assert held == [(n, 9.0) for n in paused_at]
