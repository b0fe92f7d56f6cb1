"""[Reliability] finding 9: temp files under long_term/ were never cleaned.

Recovery now removes the ones old enough to be a crash's leftover; a fresh one may be another
process's write in flight (the session locks do not cover long-term writers) and stays.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio


async def test_stale_long_term_temp_files_are_removed_at_recovery(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    (layout.long_term / "memories").mkdir(parents=True)
    (layout.long_term / ".git").mkdir()
    stale = [layout.long_term / ".aiden-tmp-digest.md.1.a", layout.long_term / "memories" / ".aiden-tmp-m1.md.2.b"]
    fresh = layout.long_term / "memories" / ".aiden-tmp-m2.md.3.c"
    untouched = [layout.long_term / ".git" / ".aiden-tmp-x.4.d", layout.long_term / "memories" / "m0.md"]
    for path in [*stale, fresh, *untouched]:
        path.write_text("partial")
    hour_ago = os.stat(fresh).st_mtime - 3600
    for path in [*stale, *untouched]:
        os.utime(path, (hour_ago, hour_ago))
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert memory.recovery.temp_files_removed == 2
    assert [p.exists() for p in stale] == [False, False]
    assert fresh.exists()
    assert all(p.exists() for p in untouched)


async def test_a_fresh_temp_file_in_memory_is_another_openers_write_and_stays(tmp_path: Path) -> None:
    # window.json and last_recovery.json are written there without the session locks: a second
    # opener of the root removing every temp made the first one's window.json replace fail.
    layout = Layout(tmp_path)
    layout.memory.mkdir(parents=True)
    stale, fresh = layout.memory / ".aiden-tmp-window.json.1.a", layout.memory / ".aiden-tmp-window.json.2.b"
    for path in (stale, fresh):
        path.write_text("partial")
    hour_ago = os.stat(fresh).st_mtime - 3600
    os.utime(stale, (hour_ago, hour_ago))
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert memory.recovery.temp_files_removed == 1
    assert (stale.exists(), fresh.exists()) == (False, True)
