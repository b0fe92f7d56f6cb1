"""Rows to values and back: the same msgspec encodings the filesystem store writes.

An event row's ``payload`` is exactly the JSON line :func:`~aiden.events.encode_event`
writes to ``events.jsonl``; a chunk's checksum is the sha256 of its events'
lines joined, as in a chunk file, so :func:`~aiden.storage.chunks.encode_chunk`
completes entries identically on every backend. Entries and the index are
msgspec JSON. A stored value that does not decode or verify is a
:class:`~aiden.errors.CorruptionError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import msgspec

from aiden.errors import CorruptionError
from aiden.events import SessionEvent, decode_event
from aiden.storage import chunks as cs

__all__ = [
    "EMPTY_INDEX",
    "chunk_from_rows",
    "decode_entry",
    "decode_index",
    "decode_payload",
    "encode_entry",
    "encode_index",
    "seal",
]

_json = msgspec.json.Encoder()
_entry_dec = msgspec.json.Decoder(cs.ChunkEntry)
_index_dec = msgspec.json.Decoder(cs.ChunkIndex)

EMPTY_INDEX: bytes = _json.encode(cs.ChunkIndex())
"""The ``index_doc`` of a generation without chunks."""


def encode_entry(entry: cs.ChunkEntry) -> bytes:
    """A chunk entry as stored in ``aiden_chunks.entry``."""
    return _json.encode(entry)


def decode_entry(raw: bytes) -> cs.ChunkEntry:
    """An ``aiden_chunks.entry`` value back (CorruptionError when it does not decode)."""
    try:
        return _entry_dec.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: chunk entry does not decode: {exc}") from exc


def encode_index(index: cs.ChunkIndex) -> bytes:
    """The live index as stored in ``aiden_compaction.index_doc``."""
    return _json.encode(index)


def decode_index(raw: bytes) -> cs.ChunkIndex:
    """An ``index_doc`` back (CorruptionError when it does not decode)."""
    try:
        return _index_dec.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: chunk index does not decode: {exc}") from exc


def decode_payload(raw: bytes, seq: int) -> SessionEvent:
    """The event of an ``aiden_events`` row (CorruptionError when it does not decode or names another seq)."""
    try:
        event = decode_event(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: event seq {seq} does not decode: {exc}") from exc
    if event.seq != seq:
        raise CorruptionError(f"postgres: the row of seq {seq} holds seq {event.seq}")
    return event


def chunk_from_rows(entry: cs.ChunkEntry, payloads: Iterable[tuple[int, bytes]]) -> cs.ChunkFile:
    """A chunk from its entry and its events' ``(seq, payload)`` rows in seq order, verified as a chunk file is."""
    rows = list(payloads)
    digest = hashlib.sha256(b"".join(p for _, p in rows)).hexdigest()
    if digest != entry.sha256 or len(rows) != entry.count:
        raise CorruptionError(f"postgres: chunk {entry.chunk_id}: checksum mismatch")
    return cs.ChunkFile(entry, [decode_payload(p, q) for q, p in rows])


def seal(index: cs.ChunkIndex, keep_live: int) -> cs.ChunkIndex:
    """Move the oldest live entries into segment references, as :func:`~aiden.storage.chunks.seal_segments` does.

    No segment files here: every entry stays a row of ``aiden_chunks``; the
    references (with the checksum the file would have) keep the index small
    and identical to the filesystem store's.
    """
    chunks: Sequence[cs.ChunkEntry] = list(index.chunks)
    segments = list(index.segments)
    while len(chunks) > keep_live + cs.SEGMENT_SIZE:
        sealed, chunks = chunks[: cs.SEGMENT_SIZE], chunks[cs.SEGMENT_SIZE :]
        body = b"".join(_json.encode(e) + b"\n" for e in sealed)
        segments.append(
            cs.SegmentRef(
                file=cs.segment_name(sealed[0].first_seq, sealed[-1].last_seq),
                chunks=len(sealed),
                first_seq=sealed[0].first_seq,
                last_seq=sealed[-1].last_seq,
                sha256=hashlib.sha256(body).hexdigest(),
            )
        )
    return msgspec.structs.replace(index, chunks=list(chunks), segments=segments)
