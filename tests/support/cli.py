"""Run gluon's command-line programs in this process (Typer's CliRunner).

Usage::

    result = run_cli("offload", "-t", "main.products", "-x")
    assert result.exit_code == 0, result.stderr
    result = run_cli("gluon", "query", "--json", "SELECT * FROM main.products")

The program is a name in ``PROGRAMS`` (``"offload"``, ``"gluon"``,
``"display_incremental_status"``, ``"offload_status_report"``) or a Typer
app. ``stdout`` and ``stderr`` are captured separately (Typer vendors Click
8.2's runner, which no longer mixes them).
Exceptions that escape gluon's own error handling are re-raised rather than
turned into exit code 1, so a crash shows its traceback.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import typer
from typer.testing import CliRunner, Result

__all__ = [
    "GLUON_SETTINGS",
    "PROGRAMS",
    "assert_plan_printed",
    "error_lines",
    "query_json",
    "run_cli",
]

# Settings gluon reads from the environment; tests clear them all. GLUON_RECORD_SQL is
# deliberately absent: the session-wide SQL recording (conftest.py) must survive.
GLUON_SETTINGS = (
    "GLUON_SOURCE_URL",
    "OFFLOAD_LAKE_ROOT",
    "GLUON_REPO_URL",
    "SPARK_REMOTE",
    "GLUON_ENGINE",
    "GLUON_SPARK_MASTER",
    "OFFLOAD_LOGDIR",
    "ORA_CONN",
    "ORA_APP_USER",
    "ORA_APP_PASS",
    "GLUON_DEBUG",
    "GLUON_SOURCE_CONNECT_TIMEOUT",
    "GLUON_SOURCE_STATEMENT_TIMEOUT",
    "GLUON_SOURCE_LOCK_TIMEOUT",
    "GLUON_PG_LOGICAL_MAX_RETAINED_WAL",
    "GLUON_UMASK",
)

PROGRAMS: dict[str, str] = {
    "offload": "gluon.cli.offload",
    "gluon": "gluon.cli.app",
    "display_incremental_status": "gluon.cli.status",
    "offload_status_report": "gluon.cli.report",
}


def _app(program: str | typer.Typer) -> tuple[typer.Typer, str]:
    if isinstance(program, typer.Typer):
        return program, "gluon"
    module = importlib.import_module(PROGRAMS[program])
    return module.app, program


def run_cli(program: str | typer.Typer, *args: object) -> Result:
    """Invoke ``program`` with ``args`` (converted to strings); return the runner's Result."""
    app, name = _app(program)
    runner = CliRunner()
    return runner.invoke(app, [str(arg) for arg in args], prog_name=name, catch_exceptions=False)


def error_lines(result: Result) -> list[str]:
    """The non-empty lines the command wrote to stderr."""
    return [line for line in result.stderr.splitlines() if line.strip()]


def query_json(statement: str) -> list[dict[str, Any]]:
    """Rows of ``gluon query --json STATEMENT`` (fails with the command's stderr)."""
    result = run_cli("gluon", "query", "--json", statement)
    assert result.exit_code == 0, f"gluon query failed ({result.exit_code}): {result.stderr}"
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def assert_plan_printed(stdout: str, table_key: str) -> None:
    """The plan header names the table and says nothing changed; steps are numbered 1..n."""
    lines = stdout.splitlines()
    assert table_key in lines[0]
    assert "nothing was changed" in lines[0]
    assert "-x" in lines[0]
    numbers = [line.split(".")[0].strip() for line in lines[1:] if line.startswith("  ")]
    assert len(numbers) >= 5
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)]
