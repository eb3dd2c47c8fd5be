"""Redaction of secrets in every line gluon writes (gluon/logs.py)."""

from __future__ import annotations

import logging
import sys

import pytest

from gluon.logs import RedactingFormatter, redact, remember_secret, secrets_of_url


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "cannot open (postgresql+psycopg://gluon:hunter22@h:5/db): refused",
            "cannot open (postgresql+psycopg://gluon:***@h:5/db): refused",
        ),
        ("found 'scott/tiger99@h:1521/svc'", "found 'scott/***@h:1521/svc'"),
        ("host=x password=abc123 port=5", "host=x password=*** port=5"),
        (
            "pg://h/db?sslmode=require&password=abc123&x=1",
            "pg://h/db?sslmode=require&password=***&x=1",
        ),
        ("sc://h:1/;token=zz9yy;user_id=x", "sc://h:1/;token=***;user_id=x"),
        ("{'user': 'u', 'password': 'abc123'}", "{'user': 'u', 'password': '***'}"),
        ("not a URL ('gluon:pass99@host/db')", "not a URL ('gluon:***@host/db')"),
        ("ORA_APP_PASS=abc123 offload", "ORA_APP_PASS=*** offload"),
    ],
)
def test_credential_shapes_are_hidden(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        'column(price) < numeric(1) and column(note) = string("a@b")',
        'FATAL:  password authentication failed for user "gluon"',
        "path /tmp/a@b and 12:30 @home",
        "postgresql+psycopg://gluon@127.0.0.1:5432/app",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_known_secrets_are_hidden_in_any_context_and_encoding() -> None:
    remember_secret("s3cr#t w1th space")
    assert redact("driver said: s3cr#t w1th space is wrong") == "driver said: *** is wrong"
    assert redact("dsn ...s3cr%23t%20w1th%20space...") == "dsn ...***..."
    remember_secret("abc")  # too short to hide everywhere: only where shaped like a credential
    assert redact("abc def") == "abc def"


def test_secrets_of_every_url_form() -> None:
    assert secrets_of_url("postgresql+psycopg://u:p%40ss@h:5/db") == ["p%40ss"]
    assert secrets_of_url("postgresql+psycopg://u@h/db?password=topsecret&x=1") == ["topsecret"]
    assert secrets_of_url("sc://h:15002/;token=abcdef;user_id=x") == ["abcdef"]
    assert secrets_of_url("scott/tiger99@db:1521/svc") == ["tiger99"]
    assert secrets_of_url("sqlite:////tmp/app.db") == []


def test_tracebacks_are_redacted_by_the_formatter() -> None:
    formatter = RedactingFormatter("%(message)s")
    try:
        raise RuntimeError("connect to postgresql://u:hunter22@h/db failed")
    except RuntimeError:
        record = logging.LogRecord("gluon", logging.ERROR, __file__, 1, "boom", (), None)
        record.exc_info = sys.exc_info()
    formatted = formatter.format(record)
    assert "hunter22" not in formatted
    assert "postgresql://u:***@h/db" in formatted
