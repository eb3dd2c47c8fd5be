"""Variants of the PostgreSQL CHANGELOG capture, side by side in one run, against no capture.

    python -m bench.trigger_variants [--accounts 200000] [--seconds 5] [--rounds 2]
        [--updates 500] [--cycles 20] [--variants none today brin ...]
        [--changes 100000 1000000] [--before TREE]

One throwaway cluster. ``pgbench -i`` fills a template database, gluon enables CHANGELOG
on its ``pgbench_accounts`` through the real ``offload`` command, and every variant is a
copy of that database (``CREATE DATABASE ... TEMPLATE``) whose capture objects are then
changed by hand (``VARIANTS``: what each one changes; ``none`` drops the capture, ``today``
keeps gluon's). ``--before TREE`` adds variant ``before``: the capture the ``offload`` of
another code tree installs (``git archive <commit> | tar -x -C TREE``). Measured:

- server CPU per single-row ``UPDATE pgbench_accounts ... WHERE aid = $1`` transaction
  (autocommit), one session per variant, the variants taking turns chunk by chunk
  (``--cycles`` chunks of ``--updates``): the backend's run time from
  ``/proc/<pid>/schedstat`` (nanoseconds), median chunk. On this shared machine TPS moved
  2-3x between runs of one variant; this figure moves much less;
- pgbench TPS of the same UPDATE with ``-c 1`` and with ``-c 2 -j 2`` (``--seconds`` each,
  0: skipped) and one ``UPDATE`` of every row (``--accounts`` rows) as its own transaction,
  wall time and the backend's CPU, ``--rounds`` rounds, every variant once per round in a
  rotated order.

The changelog is emptied between runs (as an extraction would). Some variants are not
exact (``cache``: a session hands out its cached values after other sessions' larger
ones; ``no_exception``: DML fails after a column drop; ``row_narrow``: the key only) or
record nothing (``floor_*``): they measure what a part costs.

Then what the changelog's index costs extraction (``--changes``): a changelog of N rows
(one ``INSERT ... SELECT``), drained as the changelog feed does it (the read ``ORDER BY
gl_seq LIMIT 100000``, then the delete of the batch's run of ``gl_seq`` with seqscans
off), with a btree primary key (today), a BRIN index, and no index. Not part of
``bench.run``.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import dataset
from bench.harness import BIN, Workspace, note, run_process
from bench.trigger_cost import SCRIPT, _pgbench, _tps

TEMPLATE = "variant_template"
LOG = "public_h.pgbench_accounts_log"
BATCH = 100_000
Conn = Any  # psycopg.Connection


def _capture_function(conn: Conn) -> tuple[str, str]:
    """(qualified name, definition) of gluon's capture function on pgbench_accounts."""
    row = conn.execute(
        "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_trigger t "
        "JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = 'pgbench_accounts'::regclass "
        "AND NOT t.tgisinternal LIMIT 1"
    ).fetchone()
    assert row is not None, "no capture trigger on pgbench_accounts"
    return str(row[0]), str(row[1])


def _sequence(definition: str) -> str:
    match = re.search(r"nextval\('([^']+)'", definition)
    assert match, definition
    return match.group(1)


def _replace_function(conn: Conn, edit: Callable[[str], str]) -> None:
    _, definition = _capture_function(conn)
    conn.execute(edit(definition))


def _no_definer(definition: str) -> str:
    """Without SECURITY DEFINER and the pinned search_path / jit settings."""
    definition = definition.replace(" SECURITY DEFINER\n", "\n")
    return re.sub(r" SET (search_path|jit) TO [^\n]*\n", "", definition)


def _no_setting(name: str) -> Callable[[str], str]:
    """Without the pinned ``name`` setting (still SECURITY DEFINER)."""
    return lambda definition: re.sub(rf" SET {name} TO [^\n]*\n", "", definition)


def _no_exception(definition: str) -> str:
    """Without the dropped-column fallback (no subtransaction per statement)."""
    return re.sub(
        r"\n\s*EXCEPTION WHEN undefined_column THEN.*?\n(\s*)END;",
        r"\n\1END;",
        definition,
        flags=re.DOTALL,
    )


GUARD = (
    "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a WHERE a.attrelid = TG_RELID "
    "AND a.attname OPERATOR(pg_catalog.=) ANY ('{aid,bid,abalance,filler}'::pg_catalog.name[]) "
    "AND NOT a.attisdropped) OPERATOR(pg_catalog.=) 4"
)


def _guarded(definition: str) -> str:
    """The dropped-column fallback chosen by a catalog check instead of a subtransaction."""
    return re.sub(
        r"\n(\s+)BEGIN\n(.*?)\n\s*EXCEPTION WHEN undefined_column THEN\n(.*?)\n\s*END;",
        lambda m: f"\n{m[1]}IF {GUARD} THEN\n{m[2]}\n{m[1]}ELSE\n{m[3]}\n{m[1]}END IF;",
        definition,
        flags=re.DOTALL,
    )


def _drop_capture(conn: Conn) -> None:
    name, _ = _capture_function(conn)
    conn.execute(f"DROP FUNCTION {name} CASCADE")


def _row_trigger(conn: Conn, body: str, *, definer: bool) -> None:
    """Replace gluon's triggers by one AFTER ROW trigger running ``body``."""
    _, definition = _capture_function(conn)
    sequence = _sequence(definition)
    _drop_capture(conn)
    body = body.replace("SEQ", f"'{sequence}'").replace("LOG", LOG)
    guards = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp" if definer else ""
    conn.execute(
        f"CREATE FUNCTION public_h.gl_variant() RETURNS trigger LANGUAGE plpgsql {guards} "
        f"AS $f$ BEGIN {body} RETURN NULL; END $f$"
    )
    conn.execute(
        "CREATE TRIGGER gl_variant AFTER INSERT OR UPDATE OR DELETE ON pgbench_accounts "
        "FOR EACH ROW EXECUTE FUNCTION public_h.gl_variant()"
    )


# Exact for pgbench_accounts (aid is its key): a key change records the delete of the
# old key only when no row holds it (as gluon's row path does).
ROW_FULL = """
IF TG_OP = 'UPDATE' THEN
  IF NEW.aid IS DISTINCT FROM OLD.aid THEN
    IF NOT EXISTS (SELECT 1 FROM public.pgbench_accounts a WHERE a.aid = OLD.aid) THEN
      INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid) VALUES (nextval(SEQ), 'D', 'T', OLD.aid);
    END IF;
    INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid, bid, abalance, filler)
      VALUES (nextval(SEQ), 'I', 'T', NEW.aid, NEW.bid, NEW.abalance, NEW.filler);
  ELSIF NOT (NEW *= OLD) THEN
    INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid, bid, abalance, filler)
      VALUES (nextval(SEQ), 'U', 'T', NEW.aid, NEW.bid, NEW.abalance, NEW.filler);
  END IF;
ELSIF TG_OP = 'INSERT' THEN
  INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid, bid, abalance, filler)
    VALUES (nextval(SEQ), 'I', 'T', NEW.aid, NEW.bid, NEW.abalance, NEW.filler);
ELSE
  INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid) VALUES (nextval(SEQ), 'D', 'T', OLD.aid);
END IF;
"""
# The key alone (a narrower record: extraction would have to read the row elsewhere).
ROW_NARROW = """
INSERT INTO LOG (gl_seq, gl_op, gl_origin, aid)
  VALUES (nextval(SEQ), left(TG_OP, 1), 'T',
          CASE WHEN TG_OP = 'DELETE' THEN OLD.aid ELSE NEW.aid END);
"""


def _statement_floor(conn: Conn, settings: str = "") -> None:
    """Statement triggers keeping transition tables, calling a function that does nothing
    (with ``settings``: gluon's SECURITY DEFINER and pinned settings)."""
    _drop_capture(conn)
    conn.execute(
        f"CREATE FUNCTION public_h.gl_variant() RETURNS trigger LANGUAGE plpgsql {settings} "
        "AS $f$ BEGIN RETURN NULL; END $f$"
    )
    conn.execute(
        "CREATE TRIGGER gl_variant AFTER UPDATE ON pgbench_accounts "
        "REFERENCING OLD TABLE AS gl_old NEW TABLE AS gl_new "
        "FOR EACH STATEMENT EXECUTE FUNCTION public_h.gl_variant()"
    )


def _index(conn: Conn, kind: str) -> None:
    conn.execute(f"ALTER TABLE {LOG} DROP CONSTRAINT pgbench_accounts_log_pkey")
    if kind:
        conn.execute(f"CREATE INDEX ON {LOG} USING {kind} (gl_seq)")


def _cache(conn: Conn) -> None:
    _, definition = _capture_function(conn)
    conn.execute(f"ALTER SEQUENCE {_sequence(definition)} CACHE 1000")


VARIANTS: dict[str, Callable[[Conn], None] | None] = {
    "none": _drop_capture,
    "today": None,
    "no_definer": lambda c: _replace_function(c, _no_definer),
    "no_path": lambda c: _replace_function(c, _no_setting("search_path")),
    "no_jit": lambda c: _replace_function(c, _no_setting("jit")),
    "no_exception": lambda c: _replace_function(c, _no_exception),
    "guard": lambda c: _replace_function(c, _guarded),
    "stmt_lean": lambda c: _replace_function(c, lambda d: _no_exception(_no_definer(d))),
    "brin": lambda c: _index(c, "brin"),
    "btree_plain": lambda c: _index(c, "btree"),
    "no_index": lambda c: _index(c, ""),
    "cache": _cache,
    "no_autovacuum": lambda c: c.execute(f"ALTER TABLE {LOG} SET (autovacuum_enabled = off)"),
    "row_definer": lambda c: _row_trigger(c, ROW_FULL, definer=True),
    "row_lean": lambda c: _row_trigger(c, ROW_FULL, definer=False),
    "row_narrow": lambda c: _row_trigger(c, ROW_NARROW, definer=False),
    "floor_row": lambda c: _row_trigger(c, "", definer=False),
    "floor_stmt": _statement_floor,
    "floor_definer": lambda c: _statement_floor(
        c, "SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off"
    ),
}


def _backend_cpu(conn: Conn) -> float:
    """CPU seconds the connection's server process has run (the scheduler's nanosecond
    count, /proc/<pid>/schedstat: user + system at a finer grain than /proc/<pid>/stat)."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _bulk_update(url: str) -> tuple[float, float]:
    with dataset.connect(url) as conn:
        cpu = _backend_cpu(conn)
        started = time.perf_counter()
        conn.execute("UPDATE pgbench_accounts SET abalance = abalance + 1")
        return time.perf_counter() - started, _backend_cpu(conn) - cpu


def _cpu_per_update(
    conns: dict[str, Conn], accounts: int, count: int, cycles: int
) -> dict[str, list[float]]:
    """Server CPU microseconds per single-row UPDATE transaction (autocommit), for each
    variant's session: ``cycles`` chunks of ``count`` UPDATEs, the variants taking turns chunk
    by chunk (the load on a shared machine moves TPS 2-3x run to run; the CPU a transaction
    costs the server, measured in small interleaved chunks, much less)."""
    spent: dict[str, list[float]] = {name: [] for name in conns}
    order = list(conns)
    for _ in range(cycles):
        aids = [random.randint(1, accounts) for _ in range(count)]
        random.shuffle(order)  # no variant always runs right after the same one
        for name in order:
            conn = conns[name]
            cpu = _backend_cpu(conn)
            for aid in aids:
                conn.execute(
                    "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = %s", (aid,)
                )
            spent[name].append((_backend_cpu(conn) - cpu) / count * 1e6)
    return spent


def _settle(url: str) -> None:
    with dataset.connect(url) as conn:
        conn.execute(f"TRUNCATE {LOG}")
        conn.execute("VACUUM ANALYZE pgbench_accounts")
        conn.execute("CHECKPOINT")


def _drain(url: str, changes: int, index: str) -> tuple[float, int]:
    """Seconds to read and delete ``changes`` changelog rows batch by batch, and batches."""
    with dataset.connect(url) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {LOG}_drain")
        conn.execute(f"CREATE TABLE {LOG}_drain (LIKE {LOG} INCLUDING DEFAULTS)")
        if index == "btree":
            conn.execute(f"ALTER TABLE {LOG}_drain ADD PRIMARY KEY (gl_seq)")
        elif index:
            conn.execute(f"CREATE INDEX ON {LOG}_drain USING {index} (gl_seq)")
        conn.execute(
            f"INSERT INTO {LOG}_drain (gl_seq, gl_op, gl_origin, aid, bid, abalance, filler) "
            f"SELECT g, 'U', 'T', g, 1, g, '' FROM generate_series(1, {changes}) g"
        )
        conn.execute(f"VACUUM ANALYZE {LOG}_drain")
        started = time.perf_counter()
        batches = 0
        while True:
            rows = conn.execute(
                f"SELECT aid, bid, abalance, filler, gl_seq, gl_op FROM {LOG}_drain "
                f"ORDER BY gl_seq LIMIT {BATCH}"
            ).fetchall()
            if not rows:
                break
            batches += 1
            seqs = [row[4] for row in rows]
            with conn.transaction():
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute(
                    f"DELETE FROM {LOG}_drain WHERE gl_seq BETWEEN %s AND %s",
                    (min(seqs), max(seqs)),
                )
        spent = time.perf_counter() - started
        conn.execute(f"DROP TABLE {LOG}_drain")
        return spent, batches


def _means(
    name: str,
    cpu: dict[str, list[float]],
    tps1: dict[str, list[float]],
    tps2: dict[str, list[float]],
    bulk: dict[str, list[tuple[float, float]]],
) -> list[float]:
    """CPU us per transaction (median chunk), TPS -c1, TPS -c2, bulk wall s, bulk CPU s
    (0: not measured)."""
    if name not in cpu:
        return [0.0] * 5

    def mean(values: list[float]) -> float:
        return statistics.mean(values) if values else 0.0

    walls = [wall for wall, _ in bulk[name]]
    cpus = [spent for _, spent in bulk[name]]
    return [
        statistics.median(cpu[name]),
        mean(tps1[name]),
        mean(tps2[name]),
        mean(walls),
        mean(cpus),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--accounts", type=int, default=200_000)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=500, help="UPDATEs per chunk")
    parser.add_argument("--cycles", type=int, default=20, help="chunks per variant")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--changes", nargs="*", type=int, default=[100_000, 1_000_000])
    parser.add_argument(
        "--before",
        type=Path,
        help="a gluon code tree (e.g. `git worktree add` of an older commit): adds variant "
        "'before', the capture that tree's offload installs",
    )
    args = parser.parse_args()
    if args.accounts % 100_000:
        parser.error("--accounts must be a multiple of 100000 (pgbench -i -s)")
    tmp = Path(tempfile.mkdtemp(prefix="gluon-trigger-variants-"))
    with Workspace(tmp / "ws") as workspace:  # removes the directory on exit
        run(workspace, args)


def run(workspace: Workspace, args: argparse.Namespace) -> None:
    script = workspace.root / "update_account.sql"
    script.write_text(SCRIPT.format(accounts=args.accounts))
    template_url = workspace.server.create_database(TEMPLATE)
    _pgbench(workspace, "-i", "-q", "-s", str(args.accounts // 100_000), TEMPLATE)
    home = workspace.home("trigger_variants", template_url)
    home.offload(
        "-t", "public.pgbench_accounts", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )  # fmt: skip
    note("CHANGELOG enabled on the template")
    admin = workspace.server.url("postgres")
    urls: dict[str, str] = {}
    with dataset.connect(admin) as conn:
        for name in args.variants:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
            urls[name] = workspace.server.url(name)
    if args.before:
        urls["before"] = workspace.server.create_database("before")
        _pgbench(workspace, "-i", "-q", "-s", str(args.accounts // 100_000), "before")
        old = workspace.home("trigger_variants_before", urls["before"])
        run_process(
            [str(BIN / "offload"), "-t", "public.pgbench_accounts", "-x",
             "--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG"],
            env={**old.env, "PYTHONPATH": str(args.before.resolve())},
        )  # fmt: skip
        note(f"CHANGELOG enabled by {args.before} on 'before'")
        args.variants.insert(1, "before")
    for name in args.variants:
        change = VARIANTS.get(name)
        if change is not None:
            with dataset.connect(urls[name]) as conn:
                change(conn)
    tps1: dict[str, list[float]] = {name: [] for name in args.variants}
    tps2: dict[str, list[float]] = {name: [] for name in args.variants}
    bulk: dict[str, list[tuple[float, float]]] = {name: [] for name in args.variants}
    cpu: dict[str, list[float]] = {name: [] for name in args.variants}
    conns = {name: dataset.connect(urls[name]) for name in args.variants}
    for conn in conns.values():  # warm: plans cached, as in a pgbench session
        conn.execute("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1")
    cpu.update(_cpu_per_update(conns, args.accounts, args.updates, args.cycles))
    for conn in conns.values():
        conn.close()
    note("server CPU per transaction measured")
    order = list(args.variants)
    for round_ in range(args.rounds):
        for name in order:
            _settle(urls[name])
            if args.seconds:
                tps1[name].append(_tps(workspace, script, name, args.seconds, 1))
                tps2[name].append(_tps(workspace, script, name, args.seconds, 2))
            _settle(urls[name])
            bulk[name].append(_bulk_update(urls[name]))
        note(f"round {round_ + 1} done")
        order = order[1:] + order[:1]
    print(
        f"\n{'variant':<14} {'CPU us/txn':>10} {'share':>6} {'TPS -c1':>9} {'share':>6} "
        f"{'TPS -c2':>9} {'share':>6} {'UPDATE all':>11} {'ratio':>6} {'CPU s':>6} {'ratio':>6}"
    )
    base = _means("none", cpu, tps1, tps2, bulk)
    for name in args.variants:
        row = _means(name, cpu, tps1, tps2, bulk)
        share = [b / r if r and b else 0.0 for b, r in zip(base[:1], row[:1], strict=True)]
        share += [r / b if r and b else 0.0 for b, r in zip(base[1:3], row[1:3], strict=True)]
        ratio = [r / b if r and b else 0.0 for b, r in zip(base[3:], row[3:], strict=True)]
        print(
            f"{name:<14} {row[0]:>10.0f} {share[0]:>5.2f}x {row[1]:>9,.0f} {share[1]:>5.2f}x "
            f"{row[2]:>9,.0f} {share[2]:>5.2f}x {row[3]:>10.2f}s {ratio[0]:>5.2f}x "
            f"{row[4]:>6.2f} {ratio[1]:>5.2f}x"
        )
    print(f"cpu us/txn chunks: { {n: [round(v) for v in c] for n, c in cpu.items()} }")
    print(f"tps -c1 runs: {tps1}\ntps -c2 runs: {tps2}\nbulk (wall, cpu): {bulk}")
    if args.changes:
        print(
            f"\n{'index':<8} " + " ".join(f"{'drain ' + format(n, ','):>16}" for n in args.changes)
        )
        for index in ("btree", "brin", ""):
            spent = [_drain(template_url, n, index) for n in args.changes]
            cells = " ".join(f"{s:>9.2f}s ({b:>2}b)" for s, b in spent)
            print(f"{index or 'none':<8} {cells}")
    home.discard()


if __name__ == "__main__":
    main()
