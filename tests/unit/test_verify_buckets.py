"""gluon.verify.buckets: an integer key's bucket names nest like hash prefixes, for negative
and extreme keys too, and only a single integer key that is never NULL is bucketed so."""

from __future__ import annotations

import itertools

import pytest

from gluon.schema import Column
from gluon.verify.buckets import (
    HASH_DIGITS,
    RESIDUE_DIGITS,
    full_digits,
    mask,
    residue_key,
    residue_name,
    residue_of,
)

KEYS = [0, 1, -1, 15, 16, -16, 0x0123456789ABCDEF, -(2**63), 2**63 - 1, -777 * 16**9]


def _engine_residue(key: int, digits: int) -> int:
    """``key & mask`` as a 64-bit engine computes it (two's complement)."""
    literal = mask(digits)
    bits = -1 if literal == "(-1)" else int(literal)
    return key & bits


@pytest.mark.parametrize("key", KEYS)
def test_a_child_bucket_extends_its_parent_and_names_the_engines_residue(key: int) -> None:
    names = [residue_name(_engine_residue(key, d), d) for d in range(1, RESIDUE_DIGITS + 1)]
    for parent, child in itertools.pairwise(names):
        assert child.startswith(parent), (key, parent, child)
    for digits, name in enumerate(names, start=1):
        assert len(name) == digits
        assert residue_of(name) == _engine_residue(key, digits)  # what the IN list binds
    assert residue_name(key, RESIDUE_DIGITS) == f"{key % 2**64:016x}"[::-1]


def test_keys_that_differ_get_different_buckets_once_all_digits_are_used() -> None:
    names = {residue_name(_engine_residue(key, RESIDUE_DIGITS), RESIDUE_DIGITS) for key in KEYS}
    assert len(names) == len(KEYS)


def test_only_one_integer_key_that_is_never_null_is_bucketed_by_its_value() -> None:
    key = Column("id", "bigint", "bigint", nullable=False)
    nullable = Column("id", "bigint", "bigint", nullable=True)
    text = Column("code", "text", "string", nullable=False)
    assert residue_key([key, text], ["integer", "text"], [0])
    assert not residue_key([nullable, text], ["integer", "text"], [0])
    assert not residue_key([key, text], ["integer", "text"], [1])
    assert not residue_key([key, text], ["integer", "text"], [0, 1])
    assert (full_digits(True), full_digits(False)) == (RESIDUE_DIGITS, HASH_DIGITS)
