"""One decoding of a database's shared slot for several member tables' extractions in a row
(issue 33 item 4): what ``shared_reader.SharedSlotReader`` streams its slot through.

Inside :func:`one_decoding` (the service runs the due members of a shared slot one after the
other in it, ``gluon.service.passes``), the first member's extraction decodes the slot up to
the WAL flushed when it starts, as alone, and the stream's messages are kept as they pass;
each following member's reader replays them, with that horizon, instead of decoding the slot
again. Without it (every command, a continuous loop) each extraction decodes the slot itself.

A replay ships exactly what a fresh decoding would: a peek returns every transaction committed
past the slot's confirmed position, and every member not released stands at or past it (the
slot is only ever confirmed to its members' least position), so the kept messages hold every
transaction a member still needs up to the horizon; a member skips the ones before its own
position as it does in a fresh decoding (``TablePosition.ships``). Each member still saves its
own position after its own Delta commit and confirms the slot (``SharedSlotReader.done``):
nothing about exactly-once changes, only how many times the server decodes the WAL.

The messages are kept only while they fit :data:`KEPT_MESSAGES`, and only once the first
reader read the stream to its end: a longer backlog (after a stop, say), or a run that
failed or stopped in the middle, leaves the next member to decode the slot itself.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

Chunk = TypeVar("Chunk", bound=Sized)

KEPT_MESSAGES = 250_000
"""The most messages one pass keeps for the members after the first (a few tens of MB)."""


@dataclass(slots=True)
class _Kept:
    horizon: int
    chunks: list[Sized] = field(default_factory=list)
    messages: int = 0
    complete: bool = False
    """The first reader read the stream to its end: the chunks are all of it."""


@dataclass(slots=True)
class PassDecodings:
    """The decodings kept in one pass, by slot; ``opened`` counts the slot streams opened."""

    kept: dict[str, _Kept] = field(default_factory=dict)
    opened: int = 0
    replayed: int = 0


_current: contextvars.ContextVar[PassDecodings | None] = contextvars.ContextVar(
    "gluon_shared_pass", default=None
)
_totals_lock = threading.Lock()
_totals = {"opened": 0, "replayed": 0}


@contextmanager
def one_decoding() -> Iterator[PassDecodings]:
    """Shared-slot readers of this thread inside share one decoding per slot (see above)."""
    decodings = PassDecodings()
    token = _current.set(decodings)
    try:
        yield decodings
    finally:
        _current.reset(token)


def totals() -> dict[str, int]:
    """Slot streams opened and replayed inside passes since the process started."""
    with _totals_lock:
        return dict(_totals)


def stream(
    slot: str,
    flushed: Callable[[], int],
    open_stream: Callable[[int], Iterator[Chunk]],
) -> tuple[int, Iterator[Chunk]]:
    """The horizon and chunks of ``slot``'s stream for one reader: a replay of the pass's
    kept decoding when there is a whole one, else ``open_stream(flushed())`` (kept, inside
    a pass, for the members after this one)."""
    decodings = _current.get()
    if decodings is None:
        horizon = flushed()
        return horizon, open_stream(horizon)
    kept = decodings.kept.get(slot)
    if kept is not None and kept.complete:
        decodings.replayed += 1
        _count("replayed")
        return kept.horizon, iter(kept.chunks)  # type: ignore[arg-type]
    horizon = flushed()
    kept = _Kept(horizon)
    decodings.kept[slot] = kept
    decodings.opened += 1
    _count("opened")
    return horizon, _keeping(open_stream(horizon), kept, decodings, slot)


def _keeping(
    chunks: Iterator[Chunk], kept: _Kept, decodings: PassDecodings, slot: str
) -> Iterator[Chunk]:
    """``chunks``, kept in ``kept`` while they fit; complete once they all passed."""
    for chunk in chunks:
        if decodings.kept.get(slot) is kept:
            kept.messages += len(chunk)
            if kept.messages <= KEPT_MESSAGES:
                kept.chunks.append(chunk)
            else:
                del decodings.kept[slot]  # too long to keep: the next member decodes it
                kept.chunks.clear()
        yield chunk
    kept.complete = True


def _count(name: str) -> None:
    with _totals_lock:
        _totals[name] += 1
