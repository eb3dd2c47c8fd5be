"""``bench/`` drives gluon through its public entry points (``gluon.api``) only.

Internal modules move when the layout does; a benchmark that imported them would measure
nothing after such a move, or measure the wrong code. Code strings a benchmark runs in
another code tree are not imports and are not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gluon.api

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _gluon_imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("gluon")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gluon"):
            found.append((node.lineno, node.module or ""))
    return found


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_a_benchmark_imports_only_gluon_api(path: Path) -> None:
    outside = [f"{path.name}:{line}: {module}" for line, module in _gluon_imports(path)]
    assert [found for found in outside if not found.endswith(": gluon.api")] == []


def test_the_check_sees_an_internal_import(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text("from gluon.capture.changelog import delete_changes\nimport gluon.lake\n")
    assert _gluon_imports(script) == [(1, "gluon.capture.changelog"), (2, "gluon.lake")]


def test_every_public_name_resolves() -> None:
    assert all(hasattr(gluon.api, name) for name in gluon.api.__all__)
