"""Long-term memory tests run on trio with a MockClock (virtual time, no sleeps).

Tests that open a real runtime (threads, sockets) override ``anyio_backend``
with ``@pytest.mark.parametrize("anyio_backend", ["asyncio"])``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trio.testing import MockClock

from aiden.storage.fs import Storage
from aiden.storage.layout import Layout


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    lay = Layout(tmp_path)
    lay.session.mkdir(parents=True)
    return lay


@pytest.fixture
def storage() -> Storage:
    return Storage()
