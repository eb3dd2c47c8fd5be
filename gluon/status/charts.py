"""Small bar charts for the HTML report: geometry only, drawn as inline SVG by the template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 420
HEIGHT = 150
AXIS = 28
"""Room below the bars for their labels."""
TOP = 16
"""Room above the bars for their values."""


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: int
    title: str
    """Tooltip text."""


@dataclass(frozen=True, slots=True)
class BarChart:
    title: str
    width: int
    height: int
    baseline: float
    bars: tuple[Bar, ...]
    empty_text: str

    @property
    def is_empty(self) -> bool:
        return not self.bars


def bar_chart(
    title: str,
    points: Sequence[tuple[str, int, str]],
    *,
    empty_text: str = "nothing to show yet",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> BarChart:
    """A chart of ``points`` (label, value, tooltip), bars scaled to the largest value."""
    baseline = float(height - AXIS)
    if not points:
        return BarChart(title, width, height, baseline, (), empty_text)
    largest = max(max(value for _, value, _ in points), 1)
    slot = (width - 8) / len(points)
    bar_width = max(min(slot * 0.7, 48.0), 2.0)
    bars = []
    for index, (label, value, tooltip) in enumerate(points):
        bar_height = (baseline - TOP) * value / largest
        bars.append(
            Bar(
                x=round(4 + index * slot + (slot - bar_width) / 2, 1),
                y=round(baseline - bar_height, 1),
                width=round(bar_width, 1),
                height=round(bar_height, 1),
                label=label,
                value=value,
                title=tooltip,
            )
        )
    return BarChart(title, width, height, baseline, tuple(bars), empty_text)
