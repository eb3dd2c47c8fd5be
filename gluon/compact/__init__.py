"""Compaction: merge the changes of a static control partition into the base table.

A persisted state machine (``steps.STEPS``): every step is idempotent and
recorded in the repository, so a compaction killed at any point is resumed by
running the same command again. See docs/architecture.md, sections 4 and 6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gluon.compact.options import CompactionMethod, CompactionOptions

if TYPE_CHECKING:
    from gluon.compact.runner import CompactionResult, run_compaction

_FROM_RUNNER = frozenset({"CompactionResult", "run_compaction"})


def __getattr__(name: str) -> Any:
    # The runner (and the lake code under it) is imported on first use, not with the
    # package: ``offload`` and the status commands read the options' defaults and rules
    # from ``gluon.compact.options``, and an extraction must not pay for the compaction
    # code (issue 14).
    if name in _FROM_RUNNER:
        from gluon.compact import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CompactionMethod", "CompactionOptions", "CompactionResult", "run_compaction"]
