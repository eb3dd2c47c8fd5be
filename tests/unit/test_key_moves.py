"""The net change per key of a transaction that moved rows between keys (pure logic; the
decoders that use it are tested on real slots in tests/integration)."""

from __future__ import annotations

import pytest

from gluon.source.key_moves import VACATE, WRITE, KeyNotUniqueError, net_changes


def _moves(*rows: tuple[object, str, object]) -> list[tuple[str, object, object]]:
    """Each UPDATE (old key, image, new key): a vacate of the old key, a write of the new."""
    events: list[tuple[str, object, object]] = []
    for old, image, new in rows:
        events += [(VACATE, old, (old, image)), (WRITE, new, (new, image))]
    return events


def test_a_shift_up_ships_what_each_key_holds() -> None:
    events = _moves((1, "s1", 2), (2, "s2", 3), (3, "s3", 4))
    assert [(events[at], op) for at, op in net_changes(events)] == [
        ((VACATE, 1, (1, "s1")), "D"),
        ((WRITE, 2, (2, "s1")), "I"),
        ((WRITE, 3, (3, "s2")), "I"),
        ((WRITE, 4, (4, "s3")), "I"),
    ]


def test_a_swap_and_identical_images() -> None:
    swap = _moves((1, "a", 2), (2, "b", 1))
    assert [(swap[at][2], op) for at, op in net_changes(swap)] == [((2, "a"), "I"), ((1, "b"), "I")]
    # Rows alike but for the key: the vacate of key 2 matches the image moved onto it,
    # which is the same row to the lake: nothing to ship for key 2 or 3.
    alike = _moves((1, "same", 2), (2, "same", 3), (3, "same", 4))
    assert [(alike[at][1], op) for at, op in net_changes(alike)] == [(1, "D"), (4, "I")]


def test_written_then_gone_ships_nothing_and_two_rows_under_a_key_are_refused() -> None:
    assert net_changes([(WRITE, 5, (5, "n")), (VACATE, 5, (5, "n"))]) == []
    with pytest.raises(KeyNotUniqueError, match=r"\(5\)"):
        net_changes(_moves((1, "a", 5), (2, "b", 5)))
