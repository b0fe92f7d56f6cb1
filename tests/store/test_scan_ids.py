"""scan_ids (the appender's resync after an open or a trim) reads the seqs and ids scan reads."""

from __future__ import annotations

from hypothesis import given, settings

from aiden.storage.jsonl import scan, scan_ids
from tests.store.test_scan_seqs import files


@settings(max_examples=200, deadline=None)
@given(files())
def test_scan_ids_reads_what_scan_reads(sample: tuple[bytes, list[bytes]]) -> None:
    data, _ = sample
    full = scan(data)
    fast = scan_ids(data)
    assert fast.ids == [(e.seq, e.event_id) for e in full.events]
    assert [(b.offset, b.raw) for b in fast.bad_lines] == [(b.offset, b.raw) for b in full.bad_lines]
    assert (fast.complete_end, fast.torn_tail) == (full.complete_end, full.torn_tail)


def test_scan_ids_reads_event_ids() -> None:
    lines = b'{"seq": 1, "type": "user_input", "content": "a", "event_id": "req-1"}\n{"seq": 2, "type": "user_input"}\n'
    assert scan_ids(lines).ids == [(1, "req-1"), (2, None)]
