"""Every source connection gluon opens carries the configured timeouts.

A call of ``gluon.source.connect`` with the URL alone gets the default timeouts,
not the ones the user configured (``--incremental-discard-changes`` did so).
Commands connect through ``connect_configured(settings)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gluon
from gluon.config import load_settings
from gluon.source import connect_configured

PACKAGE = Path(gluon.__file__).parent


def _connect_calls_without_timeouts() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "connect"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "sources"
                and len(node.args) + len(node.keywords) < 2
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_source_connection_without_the_configured_timeouts() -> None:
    assert _connect_calls_without_timeouts() == []


def test_connect_configured_applies_the_settings_timeouts(tmp_path: Path) -> None:
    settings = load_settings(
        {
            "OFFLOAD_HOME": str(tmp_path),
            "GLUON_SOURCE_URL": f"sqlite:///{tmp_path / 'app.db'}",
            "GLUON_SOURCE_LOCK_TIMEOUT": "7",
        }
    )
    source = connect_configured(settings)
    with source.engine.connect() as connection:
        busy = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
    assert busy == 7000
