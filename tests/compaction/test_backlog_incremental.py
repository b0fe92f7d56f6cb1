"""A backlog drain does per-pass work in what changed, not in the whole hot window ([Reliability] finding 2).

Each pass of a drain snapshots the hot window and trims it; these tests pin
that a snapshot decodes only lines it has not decoded before, and that the
first append after this process's trim adopts the replaced file instead of
decoding the whole hot window under the events lock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden.storage.eventlog as eventlog_mod
import aiden.storage.jsonl as jsonl_mod
from aiden.config import Config
from aiden.events import SessionEvent, decode_event
from aiden.storage.eventlog import read_high_water
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from aiden.testing.storekit import commit_plan, compact, fill, plan, prepared, seqs_of, stored


def _store(root: Path) -> FileSessionStore:
    return FileSessionStore(Layout(root), Storage(), Config(durability="none"))


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_snapshot_decodes_only_lines_it_has_not_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    try:
        fill(store, 50)
        first = store.snapshot()
        decodes = _count_calls(monkeypatch, jsonl_mod, "decode_event")
        assert store.append([[prepared("e51")]]) == [[51]]
        second = store.snapshot()
        assert len(decodes) == 1  # only the new line
        assert second.events == [*first.events, stored("e51", 51)]
        assert all(a is b for a, b in zip(first.events, second.events, strict=False))
    finally:
        store.close()


def test_a_changed_line_is_decoded_again_and_a_bad_line_still_reported(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        fill(store, 3)
        store.snapshot()
        path = Layout(tmp_path).events
        lines = read_bytes(path).splitlines(keepends=True)
        path.write_bytes(lines[0] + b'{"seq":2,"type":"user_input","content":"other"}\n' + b"not json\n")
        snap = store.snapshot()
        assert snap.events == [stored("e1", 1), SessionEvent(type="user_input", content="other", seq=2)]
        assert snap.bad_lines == 1
    finally:
        store.close()


def test_scan_with_known_lines_equals_a_plain_scan() -> None:
    data = b'{"seq":1,"type":"user_input","content":"a"}\n{"seq":0}\nbad\n{"seq":2,"type":"user_input"}\n{"se'
    known: dict[bytes, SessionEvent] = {}
    warm = scan(data, remember=known)
    assert sorted(known) == [b'{"seq":1,"type":"user_input","content":"a"}', b'{"seq":2,"type":"user_input"}']
    again = scan(data, known=known, remember={})
    assert again == warm == scan(data)
    assert [e.seq for e in again.events] == [1, 2]
    assert [b.offset for b in again.bad_lines] == [44, 54]
    assert again.torn_tail == b'{"se'


def test_the_append_after_our_trim_does_not_rescan_the_hot_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    try:
        fill(store, 40)
        compact(store, 30)
        scans = _count_calls(monkeypatch, eventlog_mod, "scan_ids")
        assert store.append([[prepared("e41")], [prepared("e42")]]) == [[41], [42]]
        assert scans == []  # the writer adopted the trimmed file: no re-read under the lock
        hot = scan(read_bytes(Layout(tmp_path).events)).events
        assert seqs_of(hot) == list(range(31, 43))
        assert hot[-1] == stored("e42", 42)
    finally:
        store.close()


def test_two_trims_in_a_row_are_adopted_and_their_ids_still_dedupe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    try:
        fill(store, 40)
        assert store.append([[prepared("id5", event_id="id-41")]]) == [[41]]
        compact(store, 20)
        compact(store, 35)  # no append between: the second trim replaced the first one's file
        scans = _count_calls(monkeypatch, eventlog_mod, "scan_ids")
        assert store.append([[prepared("e42")], [prepared("id5", event_id="id-41")]]) == [[42], [-41]]
        assert scans == []  # both trims' notes lead from the cached file to this one
        compact(store, 41)  # the event with id-41 is compacted: its id still dedupes
        assert store.append([[prepared("id5", event_id="id-41")], [prepared("e43")]]) == [[-41], [43]]
        assert seqs_of(scan(read_bytes(Layout(tmp_path).events)).events) == [42, 43]
    finally:
        store.close()


def test_an_append_by_another_opener_before_the_trim_is_not_adopted_blindly(tmp_path: Path) -> None:
    ours, other = _store(tmp_path), _store(tmp_path)
    try:
        fill(ours, 20)
        assert other.append([[prepared("x21", event_id="id-21")]]) == [[21]]  # our cached end is stale
        compact(ours, 10)
        assert ours.append([[prepared("e22")], [prepared("x21", event_id="id-21")]]) == [[22], [-21]]
        hot = scan(read_bytes(Layout(tmp_path).events)).events
        assert seqs_of(hot) == list(range(11, 23))
        assert decode_event(read_bytes(Layout(tmp_path).events).splitlines()[-1]) == stored("e22", 22)
    finally:
        ours.close()
        other.close()


class _CountingDecoder:
    """Stands in for jsonl's seq-only decoder and counts the lines it reads."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.lines = 0

    def decode(self, line: bytes) -> object:
        self.lines += 1
        return self.real.decode(line)  # type: ignore[attr-defined]


def test_the_trim_reads_the_lines_a_chunk_may_cover_not_the_whole_hot_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    try:
        fill(store, 500)
        store.lock_compaction()
        try:
            p = plan(store.snapshot(), 20, kept=[7])
            # As another process's pass would: no line is known from this process's snapshot.
            monkeypatch.setattr(store, "_decoded", {})
            counting = _CountingDecoder(jsonl_mod._seq_decoder)
            monkeypatch.setattr(jsonl_mod, "_seq_decoder", counting)
            entry, kept = commit_plan(store, p)
        finally:
            store.unlock_compaction()
        # Lines 1-20 and the first above the chunk (where reading stops), and the high-water
        # mark's look at the last line: not the 480 lines kept as they are.
        assert counting.lines == 22
        assert (entry.first_seq, entry.last_seq, kept) == (1, 20, 481)
        hot = scan(read_bytes(Layout(tmp_path).events)).events
        assert seqs_of(hot) == [7, *range(21, 501)]
        assert store.append([[prepared("e501")]]) == [[501]]
        assert read_high_water(Layout(tmp_path)) == 500
    finally:
        store.close()


def test_the_first_append_after_open_does_not_read_the_hot_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _store(tmp_path)
    try:
        fill(first, 50)
    finally:
        first.close()
    store = _store(tmp_path)
    try:
        store.recover()  # what opening does: the appender learns the file here, under the lock
        scans = _count_calls(monkeypatch, eventlog_mod, "scan_ids")
        assert store.append([[prepared("e51")]]) == [[51]]
        assert scans == []
    finally:
        store.close()
