"""reported_failure: one reading of a tool result's metadata for the summarizer and the experience learner."""

from __future__ import annotations

from typing import Any

import pytest

from aiden.policy.toolresult import reported_failure


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"is_error": True}, True),
        ({"error": "boom"}, True),
        ({"error": ""}, None),
        ({"error": False}, None),
        ({"status": "error"}, True),
        ({"status": "ok"}, None),
        ({"exit_code": 2}, True),
        ({"returncode": 0}, False),
        ({"status_code": 404}, True),
        ({"status_code": 200}, False),
        ({"exit_code": True}, None),  # a bool is not an exit code
        ({"exit_code": "1"}, None),
        ({}, None),
    ],
)
def test_reported_failure(meta: dict[str, Any], expected: bool | None) -> None:
    assert reported_failure(meta) is expected
