"""The hot window is read incrementally, and a read after any change of the window is exact (#35).

``GrowingFile`` parses only what was appended to ``events.jsonl`` since its last
read; the session reader sends the caller only the events after its copy. Both
must notice every other change: a compaction that drops events between kept ones
(root input and pins stay), a replaced file that reuses the inode, a torn tail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.events import encode_event
from aiden.storage.jsonl import GrowingFile, sealed

pytestmark = pytest.mark.anyio


def _line(seq: int, text: str = "") -> bytes:
    return sealed(encode_event(SessionEvent(type="user_input", content=text or f"event {seq}", seq=seq)))


def _seqs(f: GrowingFile) -> list[int]:
    return [e.seq for e in f.events()]


def test_appends_torn_tails_and_replaced_files_read_as_a_whole_read_would(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    f = GrowingFile(path)
    assert _seqs(f) == []
    path.write_bytes(_line(1) + _line(2))
    assert _seqs(f) == [1, 2]
    with open(path, "ab") as out:
        out.write(_line(3) + _line(4)[:10])  # the writer is mid-line: the torn part is not an event yet
    assert _seqs(f) == [1, 2, 3]
    with open(path, "ab") as out:
        out.write(_line(4)[10:] + _line(5))
    assert _seqs(f) == [1, 2, 3, 4, 5]
    # A compaction replaces the file: the kept first event, others dropped, same length of bytes.
    tmp = tmp_path / "new"
    tmp.write_bytes(_line(1) + _line(4) + _line(5) + _line(6) + _line(7))
    os.replace(tmp, path)
    assert _seqs(f) == [1, 4, 5, 6, 7]
    # The same inode rewritten in place with other events after the same first line.
    with open(path, "r+b") as out:
        out.truncate(0)
        out.write(_line(1) + _line(8, "x" * 300) + _line(9))
    assert _seqs(f) == [1, 8, 9]
    path.unlink()
    assert _seqs(f) == []


async def test_the_hot_window_after_a_compaction_that_keeps_the_root_input_holds_no_compacted_event(
    tmp_path: Path,
) -> None:
    cfg = Config(context_window=8000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.append(SessionEvent(type="user_input", content="Build the billing service.", pinned="goal"))
        for n in range(60):
            kind = "user_input" if n % 2 else "assistant_output"
            await memory.append(SessionEvent(type=kind, content=f"step {n} of the work " + "detail " * 40))
        before = await memory.hot_window()  # the reader's caller keeps this copy
        outcome = await memory.maintain(manual=True)
        after = await memory.hot_window()
        index = await memory.chunk_index()
        await memory.append(SessionEvent(type="user_input", content="next"))
        grown = await memory.hot_window()
    assert outcome.compacted
    assert before[0].seq == after[0].seq == 1  # the pinned root input stays first
    assert after[-1].seq == before[-1].seq
    compacted = {e.seq for e in before if any(c.covers(e.seq) for c in index.chunks)}
    assert compacted and not compacted & {e.seq for e in after}
    assert [e.seq for e in after] == [e.seq for e in before if e.seq not in compacted]
    assert [e.seq for e in grown] == [e.seq for e in after] + [after[-1].seq + 1]
