"""Reading a table's own replication slot: its ``test_decoding`` rows peeked or streamed, and
the table's changes decoded from them (``SlotDecodingFeed``, the base of ``PgLogicalFeed``):
each row parsed, each transaction's changes numbered (``gl_seq``) leaving out those set aside,
the changes typed for the lake, and those it refuses named.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gluon.capture import changelog
from gluon.errors import SourceError, StateError
from gluon.extract.feeds import unfit
from gluon.extract.feeds.base import REBUILD_HINT, TableFeed
from gluon.extract.feeds.logical_positions import (
    POSITION_BITS,
    format_lsn,
    logical_sequence,
    parse_lsn,
)
from gluon.source import key_moves, logical
from gluon.source.base import SourceDialect
from gluon.source.publication import (
    SLOT_BUSY_WAIT_SECONDS,
    STREAM_FETCH_ROWS,
    stream_when_free,
    when_slot_free,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.source.logical_values import PrintedChanges


_OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", logical.TRUNCATE: "T"}


def peek_slot(
    source: SourceDialect, slot: str, limit: int, wait_seconds: float = SLOT_BUSY_WAIT_SECONDS
) -> list[Any]:
    """The slot's rows (``peek_slot_changes``), waiting while another process reads it.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    return when_slot_free(
        lambda: source.run_query("peek_slot_changes", {"slot": slot, "limit": limit}),
        wait_seconds,
    )


def stream_slot(
    source: SourceDialect,
    slot: str,
    upto: int,
    rows: int = STREAM_FETCH_ROWS,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> Generator[list[Any]]:
    """The slot's rows of every transaction committed up to ``upto`` (``stream_slot_changes``:
    one decoding), ``rows`` at a time, waiting while another process reads the slot.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    params = {"slot": slot, "upto": format_lsn(upto)}
    return stream_when_free(source, "stream_slot_changes", params, rows, wait_seconds)


@dataclass(slots=True)
class SlotDecodingFeed(TableFeed):
    """A feed that decodes the table's changes out of ``test_decoding`` rows of its own slot
    (the hooks that read, confirm and count the slot are ``PgLogicalFeed``'s)."""

    _set_aside: set[int] | None = field(default=None, init=False)
    """The ``gl_seq`` of the changes set aside (``gluon.extract.set_aside``), read once: the slot
    still holds them until an extraction confirms past them, and every read skips them."""

    def _decode(
        self, rows: list[Any], labels: logical.RelationLabels, *, strict: bool = True
    ) -> tuple[PrintedChanges, int | None]:
        """The table's changes in ``rows`` as printed, with their gl_seq and gl_op, and the
        last commit LSN. ``strict=False`` (counting, discarding): a TRUNCATE of some
        partitions counts as a change, a row naming the table unexpectedly is passed.

        Raises:
            StateError: a row of the table cannot be read, or names the table in a way
                gluon did not expect (the slot is not advanced past a change not shipped).
        """
        spec = self.record.spec()
        names = [column.name for column in spec.columns]
        keys = list(self.state.key_columns)
        # Matched after the label, which is looked up: as fast for a thousand partitions.
        plain = logical.plain_row_pattern((), [labels.columns.get(name, name) for name in names])
        ours = labels.labels
        from gluon.source.logical_values import PrintedChanges  # loads pyarrow

        out = PrintedChanges()
        # The open transaction's changes of the table: gl_op, and the row as printed (its
        # first item the operation as printed, or "" where the careful reader decoded it).
        ops: list[str] = []
        printed: list[Sequence[str | None]] = []
        truncated = ("", *(None,) * len(names))
        last_commit: int | None = None
        # Whole old rows (REPLICA IDENTITY FULL): a transaction that moves a row's key ships
        # its net change per key (``gluon.source.key_moves``), the old rows of its UPDATEs
        # in place kept for it (by position in ``printed``).
        full = all(r.replica_identity == "f" for r in labels.relations if r.is_leaf)
        moved = False
        olds: dict[int, dict[str, str | None]] = {}
        for lsn, _xid, data in rows:
            if data.startswith("BEGIN"):
                ops, printed, moved, olds = [], [], False, {}
                continue
            if data.startswith("COMMIT"):
                commit = parse_lsn(lsn)
                if ops:
                    if self.oldest_change_at is None:
                        self.oldest_change_at = self._on_host_clock(logical.commit_time(data))
                    if moved:
                        ops, printed = self._net(ops, printed, olds, names, strict=strict)
                    self._commit(out, commit, ops, printed)
                ops, printed, moved, olds = [], [], False, {}
                last_commit = commit
                continue
            if not data.startswith("table "):
                continue  # a message
            # The label ends at the first ": " unless a quoted name holds one (the careful
            # reader below finds those): a slice and a set lookup, whatever the partitions.
            end = data.find(": ", 6)
            if data[6:end] in ours:
                read = logical.plain_printed(data, plain, end)
                if read is not None:
                    ops.append(_OPS[read[0]])
                    printed.append(read)
                    continue
            else:
                found = self._unmatched(data, labels, strict=strict)
                if found:
                    ops.append("T")
                    printed.append(truncated)
                if found is not False:
                    continue  # a TRUNCATE, or another table's change (its key may be unlogged)
            try:
                change = logical.parse_change(data)
            except logical.DecodingError as exc:
                raise StateError(f"slot of {self.state.table_key}: {exc}") from None
            if change is None:
                continue
            if change.op == logical.TRUNCATE:
                if self._unmatched(data, labels, strict=strict):
                    ops.append("T")
                    printed.append(truncated)
                continue
            new = change.new
            if change.old is not None and any(change.old.get(key) != new.get(key) for key in keys):
                ops += ["D", "I"]  # the old key goes, the new one comes
                printed.append(self._in_order(names, change.old))
                printed.append(self._in_order(names, self._complete(new, change.old)))
                moved = full
                continue
            operation = _OPS.get(change.op)
            if operation is None:
                raise StateError(
                    f"slot of {self.state.table_key}: a {change.op} change of {change.table} "
                    "gluon cannot apply: not advancing past it"
                )
            ops.append(operation)
            printed.append(self._in_order(names, self._complete(new, change.old)))
            if full and operation == "U" and change.old is not None:
                olds[len(printed) - 1] = change.old  # put in order only if needed
        return out, last_commit

    def _net(
        self,
        ops: list[str],
        printed: list[Sequence[str | None]],
        olds: dict[int, dict[str, str | None]],
        names: list[str],
        *,
        strict: bool,
    ) -> tuple[list[str], list[Sequence[str | None]]]:
        """One transaction's changes that moved keys of the table (REPLICA IDENTITY FULL)
        as their net change per key; as they are when one cannot be matched (a TRUNCATE,
        an UPDATE without its old row), or when counting (``strict=False``) a transaction
        that left two rows under one key (so a discard moves past it).

        Raises:
            StateError: the transaction left two rows under one key.
        """
        at_key = [names.index(key) for key in self.state.key_columns]
        try:
            # Values as text: the plain reader prints a number bare, the careful one quoted.
            in_order: dict[int, Sequence[str | None]] = {
                at: self._in_order(names, old) for at, old in olds.items()
            }
            netted = key_moves.net_rows(ops, printed, in_order, at_key, _unquoted)
        except key_moves.KeyNotUniqueError as exc:
            if not strict:
                return ops, printed
            raise StateError(
                f"slot of {self.state.table_key}: "
                f"{key_moves.refusal(self.state.key_columns, exc)} {REBUILD_HINT}"
            ) from None
        return (ops, printed) if netted is None else netted

    def _commit(
        self,
        out: PrintedChanges,
        commit: int,
        ops: list[str],
        printed: list[Sequence[str | None]],
    ) -> None:
        """Add the changes of the transaction committed at ``commit`` to ``out``, numbered by
        their position in it, leaving out those set aside.

        Raises:
            StateError: the transaction or the LSN is too large for a bigint sequence.
        """
        logical_sequence(commit, len(ops) - 1)  # the largest position: refused if too large
        first = commit << POSITION_BITS
        seqs: Sequence[int] = range(first, first + len(ops))
        aside = self._aside()
        if aside and not aside.isdisjoint(seqs):
            kept = [at for at, seq in enumerate(seqs) if seq not in aside]
            ops = [ops[at] for at in kept]
            printed = [printed[at] for at in kept]
            seqs = [seqs[at] for at in kept]
        out.extend(printed, seqs, ops)

    def _unmatched(self, data: str, labels: logical.RelationLabels, *, strict: bool) -> bool | None:
        """What change row ``data``, whose label is not plainly one of the table's, is to
        the table: True, a TRUNCATE emptying it; False, a change of one of its relations
        under a label holding ``": "`` (for the careful reader); None, another table's.
        Any other row naming one of the table's relations (spelled another way than the
        server spells it now) or that cannot be read stops the extraction: the slot never
        advances past a change of the table not shipped.

        Raises:
            StateError: the row names the table unexpectedly, cannot be read, or truncates
                some of its partitions only.
        """
        try:
            tables, op, _ = logical.read_header(data)
        except logical.DecodingError as exc:
            raise StateError(
                f"slot of {self.state.table_key}: a change row gluon cannot read ({exc}): "
                "not advancing past it"
            ) from None
        if op == logical.TRUNCATE:
            empties = labels.empties_table(tables)
            if empties is False and strict:
                raise StateError(
                    f"slot of {self.state.table_key}: TRUNCATE of {', '.join(tables)} empties "
                    f"some partitions of {labels.root.label} only, which PG_LOGICAL cannot "
                    f"apply (it ships whole-table truncates); {REBUILD_HINT}"
                )
            if empties is not None:
                return True
        elif len(tables) == 1 and tables[0] in labels.labels:
            return False
        strange = [label for label in tables if labels.names_ours(label)]
        if strange and strict:
            raise StateError(
                f"slot of {self.state.table_key}: a change labelled {strange[0]} names the "
                f"table, which the server labels {' or '.join(sorted(labels.labels))}: not "
                "advancing past a change gluon cannot match; report this to the gluon team"
            )
        return None

    def _aside(self) -> set[int]:
        if self._set_aside is None:
            enablement = self.state.enablement_id
            self._set_aside = (
                set()
                if enablement is None
                else self.repo.set_aside.seqs(self.state.table_key, enablement)
            )
        return self._set_aside

    def _checked(self, changes: PrintedChanges, schema: pa.Schema) -> pa.Table:
        """``changes`` typed, in gluon (no round trip through the source:
        ``gluon.source.logical_values``); one line naming those the lake cannot take, if any."""
        try:
            return changes.as_arrow(self.record.spec(), schema)
        except SourceError as exc:
            from gluon.source.arrow import UnfitValueError  # loaded by the read that failed

            seqs = unfit.refused_seqs(exc) if isinstance(exc, UnfitValueError) else []
            if not seqs:
                raise
            assert isinstance(exc, UnfitValueError)
            texts = self._texts(changes.texts())
            named = [
                self._unfit(texts, seq, exc.column) for seq in seqs[: unfit.LISTED] if seq in texts
            ]
            raise unfit.refusal(self.record, self.state, named, len(seqs) - len(named)) from exc

    def _texts(self, changes: list[list[str | None]]) -> dict[int, changelog.ChangeText]:
        """Decoded ``changes`` (values, gl_seq, gl_op) as texts by ``gl_seq``."""
        names = [column.name for column in self.record.spec().columns]
        return {
            int(str(row[-2])): changelog.ChangeText(
                int(str(row[-2])), str(row[-1]), dict(zip(names, row[:-2], strict=True))
            )
            for row in changes
        }

    def _unfit(
        self, texts: dict[int, changelog.ChangeText], seq: int, lake_column: str
    ) -> unfit.UnfitChange:
        """The change ``seq`` of ``texts``, refused for ``lake_column``, and the next change
        of its key among ``texts``."""
        keys = self.state.key_columns
        key = [texts[seq].values.get(name) for name in keys]
        later = next(
            (
                other
                for other in sorted(texts)
                if other > seq and [texts[other].values.get(name) for name in keys] == key
            ),
            None,
        )
        return unfit.unfit_change(self.record, self.state, texts[seq], lake_column, later)

    @staticmethod
    def _in_order(names: list[str], values: dict[str, str | None]) -> list[str | None]:
        """The careful reader's ``values`` in column order, as printed (quoted again; SQL
        NULL as ``null``, a column the change lacks as None), after an empty operation (see
        ``PrintedChanges``)."""
        return ["", *(_printed(values, name) for name in names)]

    def _on_host_clock(self, committed: dt.datetime | None) -> dt.datetime | None:
        """``committed`` (the source's clock, naive UTC) on this host's clock."""
        if committed is None:
            return None
        source_now = self.source.run_query("source_clock")[0][0]
        host_now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return changelog.OldestChange(committed, source_now, host_now).captured_at

    def _complete(
        self, new: dict[str, str | None], old: dict[str, str | None] | None
    ) -> dict[str, str | None]:
        """``new`` with each large value the UPDATE left alone taken from the old row."""
        if logical.UNCHANGED_TOAST not in new.values():
            return new
        missing = [name for name, value in new.items() if value == logical.UNCHANGED_TOAST]
        if old is None or any(old.get(name) in (None, logical.UNCHANGED_TOAST) for name in missing):
            raise StateError(
                f"an UPDATE of {self.state.table_key} left large values of {', '.join(missing)} "
                "out of the WAL: PG_LOGICAL needs them; run ALTER TABLE ... REPLICA IDENTITY "
                f"FULL on the table, then {REBUILD_HINT}"
            )
        return {**new, **{name: old[name] for name in missing}}

    def _typed(self, changes: list[list[str | None]], schema: pa.Schema) -> pa.Table:
        """``changes`` (values as text, gl_seq, gl_op) in the lake's types."""
        from gluon.source.logical_values import changes_as_arrow  # loads pyarrow

        return changes_as_arrow(changes, self.record.spec(), schema)


def _unquoted(row: Sequence[str | None]) -> tuple[str | None, ...]:
    """A decoded change's values (after its operation) as text, however printed."""
    return tuple(logical.unquote(value) for value in row[1:])


def _printed(values: dict[str, str | None], name: str) -> str | None:
    """Column ``name`` of a decoded change as printed: None when the change lacks it (made
    before the column was added: ``fill_absent`` gives it the column's missing value)."""
    if name not in values:
        return None
    value = values[name]
    return "null" if value is None else logical.printed(value)
