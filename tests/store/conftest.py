"""The conformance suite ships in aiden.testing: let pytest rewrite its asserts so failures show values."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "aiden.testing.conformance",
    "aiden.testing.conformance_commit",
    "aiden.testing.conformance_property",
    "aiden.testing.storekit",
)
