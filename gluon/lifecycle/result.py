"""What enabling, disabling or repairing incremental update reports."""

from __future__ import annotations

from dataclasses import dataclass

from gluon.offload.copy import (
    Step,
)
from gluon.progress import ShownLine, plan_lines, sentence


@dataclass(slots=True)
class IncrementalResult:
    table_key: str
    steps: list[Step]
    executed: bool
    message: str = ""
    rows: int | None = None

    def shown(self) -> list[ShownLine]:
        if not self.executed:
            return plan_lines(self.table_key, [step.description for step in self.steps])
        return [sentence(self.message, otherwise="Done")]
