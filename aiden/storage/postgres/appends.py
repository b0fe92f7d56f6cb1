"""The append path of the PostgreSQL session store: one transaction stores the events of one or many sessions.

One statement allocates the seqs and inserts the events, so an append without ids is one round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from itertools import accumulate

import msgspec

from aiden.errors import StorageError
from aiden.events import decode_event, encode_event
from aiden.storage.postgres.schema import Conn
from aiden.storage.protocol import PreparedEvent

__all__ = ["Decoded", "append_sessions", "decode_requests"]

Decoded = list[list[tuple[str | None, bytes]]]
"""Each request's ``(event_id, line)`` pairs, the lines as the server gets them."""


def decode_requests(requests: Sequence[Sequence[PreparedEvent]]) -> Decoded:
    """Every request's ``(event_id, line)`` pairs, each line decoded once (msgspec's error if not)."""
    return [[(p.event_id, _unsequenced(p.line)) for p in request] for request in requests]


def _unsequenced(line: bytes) -> bytes:
    """``line`` as the server gets it: an event's JSON object without a seq, which the server puts first."""
    event = decode_event(line)
    if event.seq == 0 and line.startswith(b"{"):
        return line
    return encode_event(msgspec.structs.replace(event, seq=0))


_LOCK_SESSIONS = """
SELECT session_id, generation FROM aiden_sessions WHERE session_id = ANY(%s::text[])
ORDER BY session_id FOR UPDATE
"""

# The events travel as one bytea (their lines end to end) plus the text of each line's end offset,
# the sessions' ids (which hold no comma), counts and first rows as comma-separated texts: psycopg
# dumps a list parameter element by element in Python, a bytes or str value whole. Session i's
# events are rows first+1 .. first+n; the server writes each one's seq as its first field.
_INSERT = """
WITH c AS (
    UPDATE aiden_sessions s SET next_seq = s.next_seq + v.n
    FROM unnest(
        string_to_array(%(sids)s, ','),
        string_to_array(%(counts)s, ',')::bigint[],
        string_to_array(%(firsts)s, ',')::bigint[]
    ) AS v(sid, n, first)
    WHERE s.session_id = v.sid
    RETURNING s.session_id, s.generation, s.next_seq - v.n AS base, v.first, v.n
), r AS (
    SELECT o, eid, stop, lag(stop, 1, 0::bigint) OVER (ORDER BY o) AS start
    FROM unnest(string_to_array(%(stops)s, ',')::bigint[], %(eids)s::text[])
        WITH ORDINALITY AS r(stop, eid, o)
), i AS (
    INSERT INTO aiden_events (generation, seq, event_id, payload)
    SELECT c.generation, c.base + r.o - c.first, r.eid,
        ('{"seq":' || (c.base + r.o - c.first) || ',')::bytea
        || substr(%(lines)s::bytea, r.start::integer + 2, (r.stop - r.start)::integer - 1)
    FROM c JOIN r ON r.o > c.first AND r.o <= c.first + c.n
)
SELECT session_id, base FROM c
"""

# One index probe per id: LIMIT 1 keeps the planner from scanning the whole generation
# (a generic plan of "event_id = ANY(...)" did).
_KNOWN_IDS_OF = """
SELECT k.generation, k.id, e.seq FROM unnest(%s::text[], %s::text[]) AS k(generation, id)
CROSS JOIN LATERAL (
    SELECT seq FROM aiden_events WHERE generation = k.generation AND event_id = k.id LIMIT 1
) AS e
"""


_STATEMENT_BYTES = 64 << 20
"""Most bytes of lines one :data:`_INSERT` carries (a statement's parameters must stay under 1 GB)."""


def _inserts(new: dict[str, list[tuple[str | None, bytes]]], with_ids: bool) -> Iterator[dict[str, object]]:
    """:data:`_INSERT`'s parameters for the sessions' new events, in order, in parts of its byte limit."""
    part: dict[str, list[tuple[str | None, bytes]]] = {}
    size = 0
    for sid, rows in new.items():
        for row in rows:
            if part and size + len(row[1]) > _STATEMENT_BYTES:
                yield _insert_params(part, with_ids)
                part, size = {}, 0
            part.setdefault(sid, []).append(row)
            size += len(row[1])
    if part:
        yield _insert_params(part, with_ids)


def _insert_params(part: dict[str, list[tuple[str | None, bytes]]], with_ids: bool) -> dict[str, object]:
    sids = list(part)
    batch = [row for sid in sids for row in part[sid]]
    return {
        "sids": ",".join(sids),
        "counts": ",".join(str(len(part[sid])) for sid in sids),
        "firsts": ",".join(map(str, accumulate((len(part[sid]) for sid in sids[:-1]), initial=0))),
        "stops": ",".join(map(str, accumulate(len(line) for _, line in batch))),
        "eids": [eid for eid, _ in batch] if with_ids else None,
        "lines": b"".join(line for _, line in batch),
    }


def append_sessions(conn: Conn, work: Sequence[tuple[str, Decoded]]) -> list[list[list[int]]]:
    """Store every session's requests in one transaction; each entry's seqs per request.

    Entries of the same session are stored in order, as one batch would be.
    The counter rows are locked first, in session id order (no deadlock cycle
    between processes), so seqs are gap-free in commit order and an
    ``event_id`` lookup sees every committed event. One session without ids
    skips that lock and the transaction block: its one ``UPDATE`` locks the row.
    """
    sessions = sorted({sid for sid, _ in work})
    ids: dict[str, set[str]] = {sid: set() for sid in sessions}
    for sid, decoded in work:
        ids[sid].update(eid for request in decoded for eid, _ in request if eid is not None)
    with_ids = any(ids.values())
    locked = len(sessions) > 1 or with_ids
    size = sum(len(line) for _, decoded in work for request in decoded for _, line in request)
    several = size > _STATEMENT_BYTES
    with conn.transaction() if locked or several else nullcontext():
        known: dict[str, dict[str, int]] = {sid: {} for sid in sessions}
        if locked:
            rows = conn.execute(_LOCK_SESSIONS, (sessions,)).fetchall()
            generations = {str(r[0]): str(r[1]) for r in rows}
            missing = [sid for sid in sessions if sid not in generations]
            if missing:
                raise StorageError(f"postgres: session {missing[0]!r} has no row")
            pairs = [(generations[sid], eid) for sid in sessions for eid in sorted(ids[sid])]
            if pairs:
                by_generation = {g: sid for sid, g in generations.items()}
                found = conn.execute(
                    _KNOWN_IDS_OF, ([g for g, _ in pairs], [eid for _, eid in pairs])
                ).fetchall()
                for g, eid, seq in found:
                    known[by_generation[str(g)]][str(eid)] = int(seq)
        # The new events of each session (ids seen once), in the order their seqs are handed out.
        new: dict[str, list[tuple[str | None, bytes]]] = {sid: [] for sid in sessions}
        stored_ids = {sid: set(known[sid]) for sid in sessions}
        for sid, decoded in work:
            stored = stored_ids[sid]
            for request in decoded:
                for eid, line in request:
                    if eid is None or eid not in stored:
                        new[sid].append((eid, line))
                        if eid is not None:
                            stored.add(eid)
        next_seq: dict[str, int] = {}
        for params in _inserts(new, with_ids):
            for sid, base in conn.execute(_INSERT, params).fetchall():
                next_seq.setdefault(str(sid), int(base))  # a later statement's seqs follow the first's
        growing = [sid for sid in sessions if new[sid]]
        if len(next_seq) != len(growing):
            lost = next(sid for sid in growing if sid not in next_seq)
            raise StorageError(f"postgres: session {lost!r} has no row")
    out: list[list[list[int]]] = []
    for sid, decoded in work:
        seen = known[sid]
        entry: list[list[int]] = []
        for request in decoded:
            seqs: list[int] = []
            for eid, _ in request:
                got = seen.get(eid) if eid is not None else None
                if got is not None:
                    seqs.append(-got)  # a dedupe hit: the caller reads the stored event back
                    continue
                next_seq[sid] += 1
                seqs.append(next_seq[sid])
                if eid is not None:
                    seen[eid] = next_seq[sid]
            entry.append(seqs)
        out.append(entry)
    return out
