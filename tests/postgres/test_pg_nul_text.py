"""A NUL in an event on PostgreSQL: events are JSON in ``bytea`` and take it, but the summaries
and history records quoting it go to ``text`` columns, which refuse it. Written there it is U+FFFD,
so the session compacts (the commit, the running and session summaries, the history record).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from aiden import SessionEvent, open_memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SessionIds = Callable[[], str]

_EVENTS: dict[str, Callable[[int], SessionEvent]] = {
    "content": lambda i: SessionEvent(type="user_input", role="user", content=f"fix the bug {i}\x00 now"),
    "tool_args": lambda i: SessionEvent(
        type="tool_call", content="", tool_name="run", tool_call_id=f"c{i}", tool_args='{"cmd": "ls\x00"}'
    ),
    "tool_name": lambda i: SessionEvent(
        type="tool_call", content="", tool_name="ru\x00n", tool_call_id=f"c{i}", tool_args="{}"
    ),
}

# The text columns quoting the NUL: the extractive summaries keep tool calls in the chunk
# summary and the history record only, user text in the running and session summaries too.
_QUOTED = {
    "content": ["aiden_compaction", "aiden_lt_running", "aiden_lt_session_summaries", "aiden_lt_history"],
    "tool_args": ["aiden_compaction", "aiden_lt_history"],
    "tool_name": ["aiden_compaction", "aiden_lt_history"],
}

# Every text column a compaction and a close write derived text to: the session's rows of it.
_TEXT_ROWS = """
SELECT 'aiden_compaction', summary FROM aiden_compaction WHERE session_id = %(sid)s
UNION ALL SELECT 'aiden_lt_running', r.body
    FROM aiden_sessions s JOIN aiden_lt_running r USING (generation) WHERE s.session_id = %(sid)s
UNION ALL SELECT 'aiden_lt_session_summaries', body FROM aiden_lt_session_summaries WHERE namespace = %(sid)s
UNION ALL SELECT 'aiden_lt_history', content FROM aiden_lt_history WHERE namespace = %(sid)s
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("field", sorted(_EVENTS))
async def test_an_event_with_nul_compacts_and_the_text_columns_hold_u_fffd(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, field: str
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path, store=pg_dsn, session_id=sid) as memory:
        for i in range(20):
            await memory.append(_EVENTS[field](i))
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {i}"))
        outcome = await memory.maintain(manual=True)
        assert (outcome.compacted, outcome.reason) == (True, "manual")
        assert "\ufffd" in await memory.summary_md()
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(_TEXT_ROWS, {"sid": sid}).fetchall()
    assert [table for table, text in rows if "\ufffd" in text] == _QUOTED[field]
