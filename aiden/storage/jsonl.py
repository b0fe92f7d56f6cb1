"""Reading ``events.jsonl``-style files: complete lines, torn tails, corrupt lines.

A last line without ``\\n`` was never acknowledged, so it is a *torn tail*:
quarantined, and the file cut back to the last newline. A corrupt line is
reported and quarantined, never silently dropped.

A line ends in a CRC-32 field, ``..., "crc":<n>}``, over every byte before
``,"crc":``, so a flipped byte that leaves the JSON valid makes the line
corrupt, not another event (a line without it, from an older version, reads as
before). It is the object's last field, so no other key can end a line that
way (meta, the only free-form one, ends in ``}}``); the event decoder ignores it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import msgspec

from aiden.events import SessionEvent, decode_event
from aiden.storage.fs import Storage

__all__ = [
    "BadLine",
    "GrowingFile",
    "IdScan",
    "Scan",
    "SeqScan",
    "append_synced",
    "quarantine",
    "read_bytes",
    "repair_torn_tail",
    "scan",
    "scan_ids",
    "scan_seqs",
    "sealed",
]

_CRC_KEY = b',"crc":'
_CRC_TAIL = len(_CRC_KEY) + 10 + 1  # the key, at most 10 digits of a 32-bit value, "}"


def sealed(line: bytes, prefix: bytes = b"{") -> bytes:
    """``line`` (an encoded JSON object ending in ``}\\n``) with ``prefix`` for its ``{`` and its CRC field added."""
    body = memoryview(line)[1:-2]
    crc = zlib.crc32(body, zlib.crc32(prefix))
    return b"".join((prefix, body, b',"crc":%d}\n' % crc))


def _crc_error(line: bytes) -> str | None:
    """Why ``line`` fails its CRC field; None when it matches or has none (an older version's line)."""
    at = line.rfind(_CRC_KEY, max(0, len(line) - _CRC_TAIL))
    if at < 0 or not line.endswith(b"}"):
        return None
    digits = line[at + len(_CRC_KEY) : -1]
    if not digits.isdigit() or int(digits) == zlib.crc32(memoryview(line)[:at]):
        return None
    return "checksum mismatch (a damaged line)"


class BadLine(msgspec.Struct, frozen=True):
    """A line that did not decode as an event."""

    offset: int
    raw: bytes
    error: str


class Scan(msgspec.Struct, frozen=True):
    """The result of scanning bytes of a JSONL event file."""

    events: list[SessionEvent]
    bad_lines: list[BadLine]
    complete_end: int
    """Offset just past the last ``\\n`` (relative to the scanned bytes' start)."""
    torn_tail: bytes
    """Bytes after the last ``\\n`` (empty when the data ends cleanly)."""


def scan(
    data: bytes,
    *,
    base_offset: int = 0,
    known: dict[bytes, SessionEvent] | None = None,
    remember: dict[bytes, SessionEvent] | None = None,
) -> Scan:
    """Split ``data`` into decoded events, bad lines and a torn tail.

    ``known`` maps line bytes to their decoded event, which is not decoded
    again (equal bytes decode equal). ``remember`` receives every event line
    of ``data``: the next scan's ``known``, so a compaction pass re-reading the
    hot window decodes only what was appended since the last.
    """
    events: list[SessionEvent] = []
    bad: list[BadLine] = []
    for pos, line in _lines(data):
        event = known.get(line) if known is not None else None
        if event is None:
            if (damaged := _crc_error(line)) is not None:
                bad.append(BadLine(base_offset + pos, line, damaged))
                continue
            if not line.strip():
                continue
            try:
                event = decode_event(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                bad.append(BadLine(base_offset + pos, line, str(exc)))
                continue
            # Every stored event has a seq >= 1; a line without one (e.g. a
            # damaged "seq" key read as an unknown field) is corrupt, not an event.
            if event.seq < 1:
                bad.append(BadLine(base_offset + pos, line, "missing or invalid seq"))
                continue
        events.append(event)
        if remember is not None:
            remember[line] = event
    end = data.rfind(b"\n") + 1
    return Scan(events, bad, end, bytes(data[end:]))


def _lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset, line without its newline)`` of every complete line of ``data``."""
    pos, end = 0, data.rfind(b"\n") + 1
    while pos < end:
        nl = data.index(b"\n", pos)
        yield pos, data[pos:nl]
        pos = nl + 1


def _rescan(line: bytes, offset: int, bad: list[BadLine]) -> list[SessionEvent]:
    """A line a head-only reader cannot vouch for, read as :func:`scan` reads it (its error into ``bad``)."""
    full = scan(line + b"\n", base_offset=offset)
    bad.extend(full.bad_lines)
    return full.events


class _Parsed(msgspec.Struct, frozen=True):
    ino: int
    head: bytes
    """The file's first line with its newline: a replaced file starts with another event."""
    end: int
    """Offset just past the last complete line parsed."""
    last: bytes
    """The line ending at ``end``, with its newline."""
    events: tuple[SessionEvent, ...]


class GrowingFile:
    """The events of a file that only grows at its end until it is replaced whole, parsed once.

    Each :meth:`events` call parses only the bytes appended since the last,
    after checking that the file is the one parsed before: same inode, first
    line and line before the old end (an inode number can be reused). Anything
    else is read whole. Thread-safe: the parse is one immutable value replaced whole.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._parsed: _Parsed | None = None

    def events(self) -> list[SessionEvent]:
        """Every event the file holds now, in file order (bad lines and a torn tail left out)."""
        try:
            with open(self._path, "rb") as f:
                parsed: _Parsed | None = self._read(f, self._parsed)
        except FileNotFoundError:
            parsed = None
        self._parsed = parsed
        return list(parsed.events) if parsed is not None else []

    @staticmethod
    def _grown(f: BinaryIO, st: os.stat_result, old: _Parsed) -> bool:
        """True if ``f`` is the file ``old`` parsed, grown (``f`` is then at ``old.end``)."""
        if not (old.end and old.ino == st.st_ino and st.st_size >= old.end and f.read(len(old.head)) == old.head):
            return False
        f.seek(old.end - len(old.last))
        return f.read(len(old.last)) == old.last

    @staticmethod
    def _read(f: BinaryIO, old: _Parsed | None) -> _Parsed:
        st = os.fstat(f.fileno())
        if old is None or not GrowingFile._grown(f, st, old):
            old = None
            f.seek(0)
        data = f.read()
        base = old.end if old is not None else 0
        new = scan(data, base_offset=base)
        end = new.complete_end
        if old is not None and not end:
            return old
        # ``data`` starts at a line boundary, so its last complete line starts after the
        # newline before its end, or at 0.
        last = data[data.rfind(b"\n", 0, end - 1) + 1 : end] if end else b""
        if old is None:
            return _Parsed(st.st_ino, data[: data.find(b"\n") + 1] if end else b"", end, last, tuple(new.events))
        return _Parsed(old.ino, old.head, base + end, last, old.events + tuple(new.events))


class SeqScan(msgspec.Struct, frozen=True):
    """Lines of a JSONL event file by seq, undecoded: what a rewrite that keeps lines verbatim needs."""

    lines: list[tuple[int, bytes]]
    """``(seq, line without its newline)`` of every line that scans as an event, in file order."""
    bad_lines: list[BadLine]
    torn_tail: bytes
    stopped_at: int = -1
    """With ``after_seq``: the offset (relative to the scanned bytes) of the first line not read; else -1."""


class _SeqOnly(msgspec.Struct):
    seq: int = 0


_seq_decoder = msgspec.json.Decoder(_SeqOnly)


def scan_seqs(
    data: bytes,
    *,
    base_offset: int = 0,
    known: Mapping[bytes, SessionEvent] | None = None,
    after_seq: int | None = None,
) -> SeqScan:
    """Like :func:`scan`, reading only each line's seq (a few times faster).

    A line whose seq does not read, or whose CRC does not match, goes through
    the full decoder and is reported as :func:`scan` would; JSON with a valid
    seq but not a valid event is kept (recovery reports it). A line in ``known``
    is not read again. With ``after_seq``, reading stops at the first line whose
    seq is above it (``stopped_at``; the torn tail is then not looked at).
    """
    lines: list[tuple[int, bytes]] = []
    bad: list[BadLine] = []
    for pos, line in _lines(data):
        hit = known.get(line) if known is not None else None
        if hit is not None:
            seq = hit.seq
        elif not line.strip():
            continue
        else:
            try:
                seq = _seq_decoder.decode(line).seq
            except (msgspec.DecodeError, msgspec.ValidationError):
                seq = 0
            if seq < 1 or _crc_error(line) is not None:
                lines.extend((e.seq, line) for e in _rescan(line, base_offset + pos, bad))
                continue
        if after_seq is not None and seq > after_seq:
            return SeqScan(lines, bad, b"", stopped_at=pos)
        lines.append((seq, line))
    end = data.rfind(b"\n") + 1
    return SeqScan(lines, bad, bytes(data[end:]), stopped_at=end if after_seq is not None else -1)


class IdScan(msgspec.Struct, frozen=True):
    """Seqs and event ids of a JSONL event file: what the appender's resync needs."""

    ids: list[tuple[int, str | None]]
    """``(seq, event_id)`` of every line that scans as an event, in file order."""
    bad_lines: list[BadLine]
    complete_end: int
    torn_tail: bytes


class _SeqId(msgspec.Struct):
    seq: int = 0
    event_id: str | None = None


_seq_id_decoder = msgspec.json.Decoder(_SeqId)


def scan_ids(data: bytes, *, base_offset: int = 0) -> IdScan:
    """Like :func:`scan`, reading only each line's seq and event_id (a few times faster).

    A line whose seq does not read, or whose CRC does not match, goes through
    the full decoder, so it is reported as :func:`scan` would.
    """
    ids: list[tuple[int, str | None]] = []
    bad: list[BadLine] = []
    for pos, line in _lines(data):
        if not line.strip():
            continue
        try:
            head = _seq_id_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            head = _SeqId()
        if head.seq >= 1 and _crc_error(line) is None:
            ids.append((head.seq, head.event_id))
        else:
            ids.extend((e.seq, e.event_id) for e in _rescan(line, base_offset + pos, bad))
    end = data.rfind(b"\n") + 1
    return IdScan(ids, bad, end, bytes(data[end:]))


def read_bytes(path: Path, offset: int = 0) -> bytes:
    """Read ``path`` from ``offset``; a missing file reads as empty."""
    try:
        with open(path, "rb") as f:
            if offset:
                f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


def append_synced(storage: Storage, path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created if missing), durably."""
    fd = storage.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        storage.write(fd, data)
        storage.fsync(fd)
    finally:
        storage.close(fd)


def quarantine(storage: Storage, path: Path, what: str, raw: bytes) -> None:
    """Append ``raw`` to the quarantine file with a header line, durably."""
    append_synced(storage, path, f"# {what} ({len(raw)} bytes)\n".encode() + raw + b"\n")


def repair_torn_tail(
    storage: Storage, fd: int, quarantine_path: Path, complete_end: int, tail: bytes
) -> None:
    """Quarantine ``tail`` (durably, first: a crash repeats the copy, never loses it), then cut back to ``complete_end``."""
    quarantine(storage, quarantine_path, f"torn tail at offset {complete_end}", tail)
    storage.checkpoint("repair.after_quarantine")
    storage.truncate(fd, complete_end)
    storage.fsync(fd)
