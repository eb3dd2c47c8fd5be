"""``--max-rows-per-second``: the pace sleeps exactly enough to keep the rows read within
the rate (a clock the test advances; no wall time)."""

from __future__ import annotations

from gluon.verify.pace import Pace


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_paced_read_waits_until_its_rows_fit_the_rate() -> None:
    clock = _Clock()
    pace = Pace(1000, clock=clock, sleep=clock.sleep)
    assert pace.batch_rows(50_000) == 100
    pace.read(100)  # read at once: 0.1 s early
    clock.now += 0.05  # the next batch took 0.05 s to read
    pace.read(100)
    assert [round(s, 6) for s in clock.slept] == [0.1, 0.05]
    clock.now += 1.0  # a slow batch: already behind the rate, no sleep
    pace.read(100)
    assert len(clock.slept) == 2


def test_an_unpaced_read_never_sleeps() -> None:
    clock = _Clock()
    pace = Pace(None, clock=clock, sleep=clock.sleep)
    assert pace.batch_rows(50_000) == 50_000
    pace.read(10**9)
    assert clock.slept == []
