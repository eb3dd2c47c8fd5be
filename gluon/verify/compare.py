"""Differences between two sides' rows, by key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gluon.verify.canonical import Canonical

FIRST_KEYS = 5
"""How many differing keys of each kind a table's line names."""


@dataclass
class Differences:
    """The keys that differ, by kind (a key is a tuple of canonical values)."""

    missing_in_lake: list[Canonical] = field(default_factory=list)
    extra_in_lake: list[Canonical] = field(default_factory=list)
    different_values: list[Canonical] = field(default_factory=list)
    evidence: dict[Canonical, tuple[list[Canonical] | None, list[Canonical] | None]] = field(
        default_factory=dict
    )
    """Each differing key's rows on both sides: a key whose rows stay the same from one
    look to the next, with an extraction between, is not a change in flight."""

    @property
    def count(self) -> int:
        return len(self.missing_in_lake) + len(self.extra_in_lake) + len(self.different_values)

    def only(self, keys: Iterable[Canonical]) -> Differences:
        """These differences, kept to ``keys``."""
        kept = set(keys)
        return Differences(
            [k for k in self.missing_in_lake if k in kept],
            [k for k in self.extra_in_lake if k in kept],
            [k for k in self.different_values if k in kept],
            {k: v for k, v in self.evidence.items() if k in kept},
        )


def diff(
    source: Mapping[Canonical, list[Canonical]], lake: Mapping[Canonical, list[Canonical]]
) -> Differences:
    """Compare rows grouped by key; a key shown twice on one side counts as different."""
    found = Differences()
    for key, rows in source.items():
        other = lake.get(key)
        if other is None:
            found.missing_in_lake.append(key)
            found.evidence[key] = (sorted(rows, key=repr), None)
        elif sorted(rows, key=repr) != sorted(other, key=repr):
            found.different_values.append(key)
            found.evidence[key] = (sorted(rows, key=repr), sorted(other, key=repr))
    for key, other in lake.items():
        if key not in source:
            found.extra_in_lake.append(key)
            found.evidence[key] = (None, sorted(other, key=repr))
    for kind in (found.missing_in_lake, found.extra_in_lake, found.different_values):
        kind.sort(key=repr)
    return found
