"""The long-term conformance suite on the file backend (the same checks run on PostgreSQL in tests/postgres)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from aiden.testing.conformance_longterm import CHECKS
from aiden.testing.ltkit import FileLongTermKit, LongTermKit

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    # Real threads and real time: workers are stood in for by threads holding real locks.
    return "asyncio"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
async def test_conformance(tmp_path: Path, check: Callable[[LongTermKit], Awaitable[None]]) -> None:
    await check(FileLongTermKit(tmp_path))
