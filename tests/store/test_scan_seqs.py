"""scan_seqs (the compaction trim's reader) agrees with scan on every file, damaged ones included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.events import SessionEvent, encode_event
from aiden.storage.jsonl import scan, scan_seqs

_GARBAGE = st.sampled_from(
    [
        b"{not json",
        b'{"seq": "x", "type": "user_input"}',
        b'{"type": "user_input", "content": "no seq"}',
        b'{"seq": 0, "type": "user_input"}',
        b"\x00\xff\xfe",
        b"   ",
    ]
)


@st.composite
def files(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    lines: list[bytes] = []
    events: list[bytes] = []
    for seq in range(1, draw(st.integers(0, 30)) + 1):
        if draw(st.booleans()) and draw(st.booleans()):
            lines.append(draw(_GARBAGE))
        line = encode_event(SessionEvent(type="user_input", role="user", content=f"m{seq}", seq=seq))
        lines.append(line.rstrip(b"\n"))
        events.append(line.rstrip(b"\n"))
    data = b"".join(line + b"\n" for line in lines)
    tail = draw(st.sampled_from([b"", b'{"seq": 99, "type": "us', b"x"]))
    return data + tail, events


@settings(max_examples=200, deadline=None)
@given(files())
def test_scan_seqs_reads_what_scan_reads(sample: tuple[bytes, list[bytes]]) -> None:
    data, event_lines = sample
    full = scan(data)
    fast = scan_seqs(data)
    assert [seq for seq, _ in fast.lines] == [e.seq for e in full.events]
    assert [line for _, line in fast.lines] == event_lines  # verbatim, never re-encoded
    assert [(b.offset, b.raw) for b in fast.bad_lines] == [(b.offset, b.raw) for b in full.bad_lines]
    assert fast.torn_tail == full.torn_tail


def test_a_valid_json_line_with_a_seq_but_no_valid_event_is_kept_for_recovery() -> None:
    # The documented difference: scan_seqs reads seqs only; scan at the next open reports the line.
    line = b'{"seq": 5, "type": 17}'
    assert scan_seqs(line + b"\n").lines == [(5, line)]
    assert [b.raw for b in scan(line + b"\n").bad_lines] == [line]
