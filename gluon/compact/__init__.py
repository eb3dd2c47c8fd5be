"""Compaction: merge the changes of a static control partition into the base table.

A persisted state machine (``steps.STEPS``): every step is idempotent and
recorded in the repository, so a compaction killed at any point is resumed by
running the same command again. See docs/architecture.md, sections 4 and 6.
"""

from gluon.compact.options import CompactionMethod, CompactionOptions
from gluon.compact.runner import CompactionResult, run_compaction

__all__ = ["CompactionMethod", "CompactionOptions", "CompactionResult", "run_compaction"]
