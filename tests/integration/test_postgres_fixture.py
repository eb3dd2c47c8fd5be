"""The throwaway PostgreSQL fixtures work end to end through SQLAlchemy."""

from __future__ import annotations

from sqlalchemy import create_engine, text


def test_pg_url_round_trip(pg_url: str) -> None:
    assert pg_url.startswith("postgresql+psycopg://")
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE probe (id integer PRIMARY KEY, label text NOT NULL)"))
            conn.execute(
                text("INSERT INTO probe (id, label) VALUES (:id, :label)"),
                {"id": 1, "label": "héllo"},
            )
        with engine.connect() as conn:
            assert (
                conn.execute(text("SELECT label FROM probe WHERE id = 1")).scalar_one() == "héllo"
            )
            version = int(conn.execute(text("SHOW server_version_num")).scalar_one())
            assert version >= 120000
            assert conn.execute(text("SHOW server_encoding")).scalar_one() == "UTF8"
    finally:
        engine.dispose()


def test_each_test_gets_a_fresh_database(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
            assert tables == 0
    finally:
        engine.dispose()
