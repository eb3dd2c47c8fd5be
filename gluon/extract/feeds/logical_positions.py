"""WAL positions and PG_LOGICAL's change numbering: a ``pg_lsn`` as a number and back (the
source layer's ``gluon.source.shared_shipping`` reading, the one gluon has), and the ``gl_seq``
of a change (its transaction's commit LSN and its position in it), which the table's own slot
(``pg_logical``) and the shared slot (``shared_reader``, ``shared_feed``) both give.
"""

from __future__ import annotations

from gluon.errors import StateError
from gluon.extract.feeds.base import REBUILD_HINT
from gluon.source.shared_shipping import format_lsn, parse_lsn

__all__ = ["POSITION_BITS", "format_lsn", "logical_sequence", "parse_lsn"]

POSITION_BITS = 20
"""``gl_seq`` = commit LSN << 20 | position in the transaction: 1,048,576 changes of the
table per transaction, and 8 TiB of WAL in the cluster's life, fit a bigint."""


def logical_sequence(commit_lsn: int, position: int) -> int:
    """The ``gl_seq`` of the change at ``position`` of the transaction committed at
    ``commit_lsn``: increasing in commit order, the same at every re-read.

    Raises:
        StateError: the transaction or the LSN is too large for a bigint sequence.
    """
    if position >= 1 << POSITION_BITS:
        raise StateError(
            f"a transaction committed at {format_lsn(commit_lsn)} changed the table more than "
            f"{1 << POSITION_BITS} times: PG_LOGICAL cannot number its changes; {REBUILD_HINT}"
        )
    if commit_lsn >= 1 << (63 - POSITION_BITS):
        raise StateError(
            f"the WAL position {format_lsn(commit_lsn)} is beyond what PG_LOGICAL numbers "
            f"changes with; {REBUILD_HINT}"
        )
    return (commit_lsn << POSITION_BITS) | position
