"""A flipped byte that leaves the JSON valid (a letter of an event's content, of a chunk summary)
is detected by a checksum and treated as corruption: reported, never served, nothing else lost.
Issue 18, finding 9. Files of older versions (no checksums) read as before."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml

import aiden
from aiden import SessionEvent
from aiden.doctor import check_events
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan, scan_ids, scan_seqs
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio

SUMMARY_WORD = b"summary of seq"
FLIPPED_WORD = b"summary pf seq"


async def compacted(root: Path) -> tuple[list[SessionEvent], cs.ChunkEntry]:
    """60 events, one compaction; every stored event (chunk and hot window) and the chunk's entry."""
    async with aiden.open_memory(root, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        for i in range(60):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"message {i} " * 8))
        assert (await memory.maintain(manual=True)).compacted is True
        stored = [await memory.read_event(seq) for seq in range(1, 61)]
    index = cs.load_index(Layout(root))
    assert index is not None and len(index.chunks) == 1
    return [e for e in stored if e is not None], index.chunks[0]


def flip(path: Path, old: bytes, new: bytes) -> int:
    """Replace the only occurrence of ``old`` in ``path``; its offset."""
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))
    return data.index(old)


async def test_flipped_letter_in_hot_event_content_is_quarantined_and_reported(tmp_path: Path) -> None:
    stored, _ = await compacted(tmp_path)
    layout = Layout(tmp_path)
    data = read_bytes(layout.events)
    line_start = data.index(b'{"seq":59,')
    line = data[line_start : data.index(b"\n", line_start)]
    flip(
        layout.events,
        b"message 58 message 58 message 58 message 58 message 58 message 58 message 58 message 58 ",
        b"message 58 message 58 messagf 58 message 58 message 58 message 58 message 58 message 58 ",
    )
    assert check_events(layout) == [
        f"events.jsonl: corrupt line at offset {line_start}: checksum mismatch (a damaged line)"
    ]
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        report = memory.recovery
        back = [await memory.read_event(seq) for seq in range(1, 61)]
        nxt = await memory.append(SessionEvent(type="user_input", content="after"))
    assert report.corrupt_lines_quarantined == 1
    assert report.hot_events_lost == 1
    assert report.unrecoverable == [
        f"events.jsonl: corrupt line at offset {line_start} quarantined",
        "events.jsonl: 1 events lost (seqs 59)",
    ]
    # The damaged event is never served; every other event is as stored.
    assert back == [None if e.seq == 59 else e for e in stored]
    assert nxt.seq == 61
    quarantined = read_bytes(layout.quarantine)
    assert (
        quarantined
        == f"# corrupt line at offset {line_start} ({len(line)} bytes)\n".encode()
        + line.replace(b"message 58 message 58 message 58", b"message 58 message 58 messagf 58", 1)
        + b"\n"
    )


def test_every_line_reader_rejects_a_line_failing_its_checksum() -> None:
    from aiden.events import encode_event
    from aiden.storage.eventlog import with_seq

    good = with_seq(encode_event(SessionEvent(type="user_input", content="alpha")), 1)
    bad = with_seq(encode_event(SessionEvent(type="user_input", content="bravo")), 2).replace(
        b"bravo", b"brave"
    )
    data = good + bad
    assert [e.seq for e in scan(data).events] == [1]
    assert [(b.offset, b.error) for b in scan(data).bad_lines] == [
        (len(good), "checksum mismatch (a damaged line)")
    ]
    assert [seq for seq, _ in scan_seqs(data).lines] == [1]
    assert [b.offset for b in scan_seqs(data).bad_lines] == [len(good)]
    assert scan_ids(data).ids == [(1, None)]
    assert [b.offset for b in scan_ids(data).bad_lines] == [len(good)]


def test_lines_and_index_without_checksums_read_as_before(tmp_path: Path) -> None:
    # As written by older versions: no "crc" field in a line, no summary checksums in index.yaml.
    old_line = b'{"seq":1,"type":"user_input","content":"old","meta":{"crc":5}}\n'
    assert scan(old_line).events == [SessionEvent(type="user_input", content="old", seq=1, meta={"crc": 5})]
    layout = Layout(tmp_path)
    layout.chunks.mkdir(parents=True)
    entry = cs.ChunkEntry(
        chunk_id="chunk_a", first_seq=1, last_seq=1, count=1, sha256="x", summary="old summary"
    )
    layout.index.write_text(
        yaml.safe_dump(msgspec.to_builtins(cs.ChunkIndex(rolling_summary="r", chunks=[entry])))
    )
    assert cs.load_index(layout) == cs.ChunkIndex(rolling_summary="r", chunks=[entry])


async def test_flipped_letter_in_index_summary_rebuilds_the_index_from_the_chunk(tmp_path: Path) -> None:
    stored, entry = await compacted(tmp_path)
    layout = Layout(tmp_path)
    flip(layout.index, SUMMARY_WORD, FLIPPED_WORD)
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        report = memory.recovery
        back = [await memory.read_event(seq) for seq in range(1, 61)]
    assert report.index_rebuilt is True
    assert report.unrecoverable == [
        "index.yaml was corrupt and was rebuilt from chunk files: "
        f"index.yaml: the summary of chunk {entry.chunk_id} failed its checksum"
    ]
    index = cs.load_index(layout)
    assert index is not None and [e.summary for e in index.chunks] == [entry.summary]
    assert FLIPPED_WORD not in read_bytes(layout.summary) and SUMMARY_WORD in read_bytes(layout.summary)
    assert back == stored


async def test_flipped_letter_in_chunk_header_summary_is_restored_from_the_index(tmp_path: Path) -> None:
    stored, entry = await compacted(tmp_path)
    layout = Layout(tmp_path)
    flip(layout.chunk_file(entry.chunk_id), SUMMARY_WORD, FLIPPED_WORD)
    damaged = cs.read_chunk(layout, entry.chunk_id)
    assert damaged.summary_damaged is True and damaged.entry.degraded is True
    assert FLIPPED_WORD.decode() not in damaged.entry.summary  # never served as it reads
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        report = memory.recovery
        back = [await memory.read_event(seq) for seq in range(1, 61)]
    assert report.index_rebuilt is False
    assert report.unrecoverable == [
        f"chunk {entry.chunk_id}: its summary failed its checksum; restored from the index"
    ]
    chunk = cs.read_chunk(layout, entry.chunk_id)
    assert (chunk.summary_damaged, chunk.entry) == (False, entry)
    assert back == stored
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        assert memory.recovery.unrecoverable == []  # repaired once, not reported again


async def test_summary_flipped_in_index_and_header_is_degraded_then_resummarized(tmp_path: Path) -> None:
    stored, entry = await compacted(tmp_path)
    layout = Layout(tmp_path)
    flip(layout.index, SUMMARY_WORD, FLIPPED_WORD)
    flip(layout.chunk_file(entry.chunk_id), SUMMARY_WORD, FLIPPED_WORD)
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=ScriptedSummarizer()) as memory:
        report = memory.recovery
        index = cs.load_index(layout)
        assert index is not None
        placeholder = index.chunks[0]
        back = [await memory.read_event(seq) for seq in range(1, 61)]
        assert (await memory.maintain()).compacted is False  # a quiet pass repairs one degraded chunk
    assert report.unrecoverable == [
        "index.yaml was corrupt and was rebuilt from chunk files: "
        f"index.yaml: the summary of chunk {entry.chunk_id} failed its checksum",
        f"chunk {entry.chunk_id}: its summary failed its checksum; no intact copy; marked degraded to be re-summarized",
    ]
    assert placeholder.degraded is True
    assert placeholder.summary == (
        f"[summary lost: it failed its checksum; seq {entry.first_seq}-{entry.last_seq}; recall the chunk for details]"
    )
    assert back == stored
    repaired = cs.load_index(layout)
    assert repaired is not None and repaired.chunks[0].degraded is False
    assert repaired.chunks[0].summary == entry.summary  # the same summarizer, the same events
