"""What a bucket of verify's bisection is: hex digits of the key's MD5, or of the key itself.

A bucket is named by hex digits, and a child bucket's name extends its parent's (that is
all :mod:`gluon.verify.bisect` relies on). For a key of one integer column that is never
NULL, the bucket is the key's own low hex digits, least significant first: ``key & mask``
in every engine (two's complement, so a negative key has a residue like any other), and a
bucket of ``digits + 1`` digits extends the one of ``digits`` digits. That saves each
side an MD5 per row; 16 digits are the whole 64-bit key. Any other key (composite, text,
nullable) is bucketed by the first hex digits of the MD5 of its canonical text.
"""

from __future__ import annotations

from collections.abc import Sequence

from gluon.schema import Column

HASH_DIGITS = 32
"""Hex digits of an MD5: a bucket of this many digits holds one key (or its collisions)."""
RESIDUE_DIGITS = 16
"""Hex digits of a 64-bit integer key: a bucket of this many digits holds one key."""
HASH_SUM_DIGITS = 15
"""Hex digits (60 bits) of each row's MD5 a bucket's checksum adds (as _verify_hash.sql.j2's
``hash_value``): one number per row, so each engine hashes a row once."""


def residue_key(columns: Sequence[Column], kinds: Sequence[str], keys: Sequence[int]) -> bool:
    """Whether the key is one integer column that is never NULL (bucketed by its value)."""
    if len(keys) != 1:
        return False
    column = columns[keys[0]]
    return kinds[keys[0]] == "integer" and not column.nullable and not column.read_as_text


def full_digits(by_residue: bool) -> int:
    """The digits at which a bucket holds a single key."""
    return RESIDUE_DIGITS if by_residue else HASH_DIGITS


def mask(digits: int) -> str:
    """The SQL literal that keeps a key's low ``digits`` hex digits (all 64 bits: -1)."""
    return "(-1)" if digits >= RESIDUE_DIGITS else str(16**digits - 1)


def residue_name(residue: int, digits: int) -> str:
    """A residue's bucket: its ``digits`` low hex digits, least significant first."""
    unsigned = int(residue) % 16**digits
    return "".join("0123456789abcdef"[(unsigned >> 4 * i) & 15] for i in range(digits))


def residue_of(name: str) -> int:
    """The residue a bucket names, as the engines compute it (all 16 digits: signed)."""
    value = sum(int(digit, 16) << 4 * i for i, digit in enumerate(name))
    if len(name) >= RESIDUE_DIGITS and value >= 2**63:
        return value - 2**64
    return value
