"""The service's slot turns (``gluon.service.slots``) and its backlog gauge's last value
(``gluon.service.metrics``), with real threads and a real Prometheus registry."""

from __future__ import annotations

import threading
import time

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gluon.service.lag import TableLag
from gluon.service.metrics import ServiceMetrics
from gluon.service.slots import SlotTurns


def samples(metrics: ServiceMetrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("table") == "APP.T"
    }


def test_a_failed_backlog_reading_keeps_the_last_value_and_says_how_old() -> None:
    metrics = ServiceMetrics()
    metrics.lag("APP.T", TableLag(backlog=5, seconds_since_extraction=1.0))
    metrics.lag("APP.T", TableLag(backlog=None, seconds_since_extraction=2.0))
    shown = samples(metrics)
    assert shown["gluon_table_backlog_changes"] == 5
    assert shown["gluon_table_seconds_since_extraction"] == 2.0
    assert shown["gluon_table_backlog_age_seconds"] >= 0
    metrics.lag("APP.T", TableLag(backlog=0, seconds_since_extraction=0.5))
    assert samples(metrics)["gluon_table_backlog_changes"] == 0


def test_a_backlog_never_read_has_no_sample() -> None:
    metrics = ServiceMetrics()
    metrics.lag("APP.T", TableLag(backlog=None, seconds_since_extraction=None))
    assert "gluon_table_backlog_changes" not in samples(metrics)


def test_extractions_share_the_slots_and_the_lag_reader_waits_for_them() -> None:
    turns = SlotTurns()
    inside = 0
    most = 0
    overlap_with_reader = []
    reading = threading.Event()
    lock = threading.Lock()

    def extract() -> None:
        nonlocal inside, most
        with turns.extracting():
            with lock:
                inside += 1
                most = max(most, inside)
                overlap_with_reader.append(reading.is_set())
            time.sleep(0.2)
            with lock:
                inside -= 1

    extractions = [threading.Thread(target=extract) for _ in range(2)]
    for thread in extractions:
        thread.start()
    time.sleep(0.05)
    with turns.reading(timeout=30) as got:
        assert got
        reading.set()
        assert inside == 0, "the lag reader read while an extraction held the slots"
        late = threading.Thread(target=extract)
        late.start()
        time.sleep(0.1)
        assert inside == 0, "an extraction started while the lag reader read"
        reading.clear()
    late.join()
    for thread in extractions:
        thread.join()
    assert most == 2
    assert not any(overlap_with_reader)


def test_the_lag_reader_gives_up_its_turn_when_extractions_do_not_end() -> None:
    turns = SlotTurns()
    release = threading.Event()

    def extract() -> None:
        with turns.extracting():
            release.wait(30)

    holder = threading.Thread(target=extract)
    holder.start()
    time.sleep(0.05)
    with turns.reading(timeout=0.1) as got:
        assert not got
    # Extractions are not blocked once the reader gave up.
    second = threading.Thread(target=extract)
    second.start()
    release.set()
    holder.join()
    second.join(timeout=30)
    assert not second.is_alive()
