"""Credential redaction for experience episodes and records (issue #21), and DSN passwords in messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiden.policy.scrub import REDACTED, mask, redact_secrets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv", "export OPENAI_API_KEY=[redacted]"),
        ("key sk-ant-abcdefghijklmnopqrstuvwx used", "key [redacted] used"),
        (
            "git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/x",
            "git clone https://[redacted]@github.com/x",
        ),
        ("pat github_pat_abcdefghijklmnopqrstuvwxyz", "pat [redacted]"),
        ("slack xoxb-1234567890-abcdef", "slack [redacted]"),
        ("aws AKIAABCDEFGHIJKLMNOP here", "aws [redacted] here"),
        ("g AIzaSyA1234567890abcdefghijklmnopqrstu", "g [redacted]"),
        (
            "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc'",
            "curl -H 'Authorization: Bearer [redacted]'",
        ),
        ('db_password: "hunter22"', 'db_password: "[redacted]"'),
        ("psql postgresql://admin:s3cr3tpw@db:5432/app", "psql postgresql://admin:[redacted]@db:5432/app"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            f"-----{REDACTED} PRIVATE KEY-----",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIE truncated", f"-----{REDACTED} PRIVATE KEY-----"),
    ],
)
def test_credential_shapes_are_redacted(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "make build WITH_SSL=1",
        "token count: 12",
        "the password is wrong",
        "sha 0123456789abcdef0123",
        # Where a credential is kept is not the credential: the learned step must stay runnable.
        "API_TOKEN_FILE=file:///etc/delta/api_token_file ./bin/delta serve",
        "TOKEN_PATH=/etc/x/token app",
        "--secret-dir=/run/secrets",
    ],
)
def test_ordinary_text_is_returned_unchanged(text: str) -> None:
    assert redact_secrets(text) is text


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host=h password=s3cret user=u", "host=h password=*** user=u"),
        ("bad 'password = \"x\"' and password='a b'", "bad 'password = *** and password=***"),
        ("postgresql://me:s3cret@db:5432/x", "postgresql://me:***@db:5432/x"),
        ("postgresql://me@db:5432/x?sslmode=require", "postgresql://me@db:5432/x?sslmode=require"),
    ],
)
def test_a_dsn_shows_no_password(text: str, expected: str) -> None:
    assert mask(text) == expected
