"""Source tables driven into known incremental-update states (status and report tests).

Every step goes through the real commands (``run_cli``), so the repository,
the lake and the source hold what a user's runs would leave behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from typer.testing import Result

RunCli = Callable[..., Result]


@dataclass
class App:
    """The source database of the application whose tables are offloaded."""

    url: str
    schema: str

    @property
    def engine(self) -> sa.Engine:
        return sa.create_engine(self.url)

    def run(self, *statements: str) -> None:
        """Run ``statements`` in one transaction."""
        with self.engine.begin() as db:
            for statement in statements:
                db.execute(sa.text(statement))

    def scalar(self, statement: str) -> Any:
        with self.engine.connect() as db:
            return db.execute(sa.text(statement)).scalar()

    def create_table(self, name: str, rows: int) -> str:
        """``<schema>.<name>`` (id, name, amount) with ``rows`` rows; returns the -t value."""
        table = f"{self.schema}.{name}"
        values = ", ".join(f"({key}, 'row {key}', {key}.25)" for key in range(1, rows + 1))
        self.run(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(40), "
            "amount NUMERIC(12,2))",
            f"INSERT INTO {table} VALUES {values}",
        )
        return table

    def change(self, table: str, *, first_key: int) -> int:
        """Two updates, one delete and two inserts (5 changes); returns the change count."""
        self.run(
            f"UPDATE {table} SET name = 'changed' WHERE id IN (1, 2)",
            f"DELETE FROM {table} WHERE id = 3",
            f"INSERT INTO {table} VALUES ({first_key}, 'new', 1.00), ({first_key + 1}, 'new', 2)",
        )
        return 5


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}{result.stdout}"
    return result


def offload(run_cli: RunCli, table: str) -> None:
    ok(run_cli("offload", "-t", table, "-x"))


def enable(run_cli: RunCli, table: str, method: str = "CHANGELOG") -> None:
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
        )
    )


def extract(run_cli: RunCli, table: str) -> Result:
    return ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))


def compact(run_cli: RunCli, table: str, *flags: str) -> Result:
    return ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
            *flags,
        )
    )


def status_json(run_cli: RunCli, table: str) -> dict[str, Any]:
    result = ok(run_cli("display_incremental_status", "-t", table, "--json"))
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def status_text(run_cli: RunCli, table: str, *flags: str) -> str:
    return str(ok(run_cli("display_incremental_status", "-t", table, *flags)).stdout)
