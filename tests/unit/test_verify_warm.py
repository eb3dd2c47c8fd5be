"""gluon verify starts the embedded engine ahead of its lake pass only where the engine
runs in this process and nothing else keeps one (gluon/verify/warm.py)."""

from __future__ import annotations

from pathlib import Path

from gluon.config import EngineKind, load_settings
from gluon.reuse import kept_connections
from gluon.verify.warm import EngineWarmUp


def test_a_remote_engine_is_not_started_ahead(tmp_path: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(tmp_path), "SPARK_REMOTE": "sc://spark:15002"})
    assert settings.engine is EngineKind.REMOTE
    warm_up = EngineWarmUp(settings)
    warm_up.join()
    assert not warm_up.started


def test_the_service_keeps_its_own_engine_so_verify_starts_none(tmp_path: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(tmp_path)})
    assert settings.engine is EngineKind.SAIL
    with kept_connections():  # as the service's workers run
        warm_up = EngineWarmUp(settings)
        warm_up.join()
    assert not warm_up.started
