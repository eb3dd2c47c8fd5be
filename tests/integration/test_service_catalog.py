"""``gluon service`` describes a table's columns again only when its catalog version moved
(issue 33 item 4: "the source catalog read when something may have changed, not every run"),
and still notices a column added in the source at the next run that has a change to ship:
the lake gets the column and its values. Run in this process so what it sends can be seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows
from support.waiting import wait_until

from gluon.config import load_settings
from gluon.service.config import load_config
from gluon.service.runner import Service, ServiceTotals

LIMIT_SECONDS = 180.0
DESCRIBE_MARK = "format_type(a.atttypid, a.atttypmod) AS formatted_type"


class Describes:
    """How many times this process described a table's columns."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> None:
        with self.lock:
            self.count += DESCRIBE_MARK in str(args[2])


def lake_values(table: str) -> list[tuple[object, ...]]:
    try:
        return sorted(tuple(row.values()) for row in lake_rows(f"SELECT id, v, extra FROM {table}"))
    except Exception:  # the column is not in the lake yet
        return []


@pytest.mark.parametrize("method", ["CHANGELOG", "PG_LOGICAL"])
def test_the_service_reads_the_catalog_again_only_after_a_ddl_and_carries_an_added_column(
    pg_url: str, offload_home: Path, run_cli: Callable[..., Any], method: str
) -> None:
    source = sa.create_engine(pg_url)
    with source.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        db.execute(sa.text("CREATE TABLE app.c (id INTEGER PRIMARY KEY, v INTEGER)"))
        db.execute(sa.text("INSERT INTO app.c SELECT g, g FROM generate_series(1, 5) g"))
    (offload_home / "conf").mkdir()
    (offload_home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={pg_url}\n")
    enabled = run_cli(
        "offload",
        "-t",
        "app.c",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )
    assert enabled.exit_code == 0, enabled.stderr
    tables = offload_home / "conf" / "tables.toml"
    tables.write_text('[defaults]\nextraction_interval = "1s"\n\n[tables."app.c"]\n')

    describes = Describes()
    sa.event.listen(sa.Engine, "before_cursor_execute", describes)
    service = Service(load_settings(), load_config(tables), parallel=1)
    stop = threading.Event()
    ended: list[ServiceTotals] = []
    thread = threading.Thread(target=lambda: ended.append(service.run(stop)), daemon=True)
    try:
        thread.start()
        with source.begin() as db:
            db.execute(sa.text("UPDATE app.c SET v = v + 10 WHERE id = 1"))
        wait_until("the first change shipped", lambda: service.totals.shipped >= 1)
        first = describes.count
        with source.begin() as db:
            db.execute(sa.text("UPDATE app.c SET v = v + 10 WHERE id = 2"))
        wait_until("the second change shipped", lambda: service.totals.shipped >= 2)
        assert describes.count == first, "the table was described again without a DDL"

        with source.begin() as db:
            db.execute(sa.text("ALTER TABLE app.c ADD COLUMN extra TEXT"))
            db.execute(sa.text("INSERT INTO app.c VALUES (6, 6, 'new')"))
        wait_until("the added column in the lake", lambda: (6, 6, "new") in lake_values("app.c"))
        assert describes.count > first, "the added column was carried without describing"
        assert service.totals.failures == 0
    finally:
        stop.set()
        thread.join(timeout=LIMIT_SECONDS)
        sa.event.remove(sa.Engine, "before_cursor_execute", describes)
    with source.connect() as db:
        expected = sorted(
            tuple(row) for row in db.execute(sa.text("SELECT id, v, extra FROM app.c"))
        )
    assert lake_values("app.c") == expected
