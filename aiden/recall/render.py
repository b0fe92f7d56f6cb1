"""The recall answer an agent reads, and its one budget: serialized JSON within ``max_chars``.

Pure: no database, no I/O. :func:`fit_hits` is the only place the answer
budget is applied; the index calls it with ``config.recall_max_chars`` and
the tool encodes what it returns with :func:`encode_hits`, so the JSON the
model sees is the text that was measured.

A result is an event's verbatim text (content, tool name, tool arguments) with
what identifies it (chunk id, seq, type, role, time), or a chunk summary. The
answer is packed best first until the budget is full: short texts whole, a
long one cut to a window centred on the first match of a query term (so it
keeps its best part without crowding out the hits after it). Room that is
left widens the cut texts again, then shows one neighbouring event per hit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from aiden.events import SessionEvent
from aiden.recall.query import Term, match_finder, snippet, truncate
from aiden.recall.types import RecallContext, RecallHit

__all__ = ["encode_events", "encode_hits", "fit_hits", "hit_dict"]

_MIN_TEXT: Final = 120
"""A hit is dropped rather than shown in fewer characters than this."""
_MIN_CONTEXT: Final = 60
_LEAST_JSON: Final = len('{"chunk_id":"","text":""}')
"""Characters of a hit's JSON besides its chunk id and text, at the least."""
_ROLE_OF_TYPE: Final = {"user_input": "user", "assistant_output": "assistant", "tool_result": "tool"}
"""The role an event type implies (the role is shown only when it differs)."""
_encoder: Final = msgspec.json.Encoder()


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


def _when(ts: float) -> str:
    # Minutes in UTC: what an agent needs to place an event in time, in few characters.
    try:
        return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):
        return str(ts)


def _kind(out: dict[str, Any], type_: str | None, role: str | None) -> None:
    # The type, and the role only where the type does not already say it: every character
    # of an answer is one less for the next hit.
    if type_ is not None:
        out["type"] = type_
    if role is not None and _ROLE_OF_TYPE.get(type_ or "") != role:
        out["role"] = role


def hit_dict(hit: RecallHit) -> dict[str, Any]:
    """The JSON object of one hit, as the agent sees it (best first: no score is shown)."""
    out: dict[str, Any] = {"chunk_id": hit.chunk_id}
    if hit.source != "active":
        out["source"] = hit.source
    if hit.kind == "event":
        out["seq"] = hit.first_seq
        _kind(out, hit.type, hit.role)
        if hit.timestamp is not None:
            out["time"] = _when(hit.timestamp)
    else:
        out["summary_of"] = [hit.first_seq, hit.last_seq]
    out["text"] = hit.text
    if hit.truncated:
        out["truncated"] = True
    if hit.degraded:
        out["degraded"] = True
    if hit.context is not None:
        ctx = hit.context
        context: dict[str, Any] = {"seq": ctx.seq}
        _kind(context, ctx.type, ctx.role)
        context["text"] = ctx.text
        out["context"] = context
    return out


def encode_hits(hits: Sequence[RecallHit]) -> str:
    """The answer of a search or lookup: ``{"results": [...]}``, best first."""
    return _dumps({"results": [hit_dict(h) for h in hits]})


class _Finder:
    """The query's match finder, compiled on first use (most answers fit without a cut)."""

    def __init__(self, terms: Sequence[Term]) -> None:
        self._terms = terms
        self._find: Callable[[str], tuple[int, int] | None] | None = None

    def cut(self, hit: RecallHit, limit: int) -> RecallHit:
        if len(hit.text) <= limit:
            return hit
        if not self._terms:
            return msgspec.structs.replace(hit, text=truncate(hit.text, limit), truncated=True)
        if self._find is None:
            self._find = match_finder(self._terms)
        text = snippet(hit.text, self._terms, limit, finder=self._find)
        return msgspec.structs.replace(hit, text=text, truncated=True)


def _size(hit: RecallHit) -> int:
    return len(_dumps(hit_dict(hit)))


def _fit_one(hit: RecallHit, room: int, share: int, finder: _Finder) -> tuple[RecallHit, int] | None:
    """``hit`` whole if its text is at most ``share`` characters and its JSON fits in ``room``, else
    cut to ``share`` characters of text (at least :data:`_MIN_TEXT`) so that it fits, else ``None``.

    Escapes and cut markers can make the encoded text longer than its
    characters: the limit is lowered by the overshoot until the item fits.
    """
    if len(hit.chunk_id) + min(len(hit.text), _MIN_TEXT) + _LEAST_JSON > room:
        return None  # cannot fit even cut: no need to encode it
    if len(hit.text) <= share:
        size = _size(hit)
        if size <= room:
            return hit, size
    bare = _size(msgspec.structs.replace(hit, text="", truncated=True))
    limit = min(len(hit.text) - 1, room - bare, max(share, _MIN_TEXT))
    while limit >= _MIN_TEXT:
        cut = finder.cut(hit, limit)
        size = _size(cut)
        if size <= room:
            return cut, size
        limit -= size - room
    return None


def _pack(hits: Sequence[RecallHit], max_chars: int, finder: _Finder) -> tuple[list[tuple[int, RecallHit]], int]:
    """The hits that fit, by position, best first (see :func:`fit_hits`), and the room left."""
    room = max_chars - len(encode_hits(()))
    kept: list[tuple[int, RecallHit]] = []
    sizes: list[int] = []
    for i, hit in enumerate(hits):
        comma = 1 if kept else 0
        fitted = _fit_one(hit, room - comma, (room - comma) // 2, finder)
        if fitted is not None:
            kept.append((i, fitted[0]))
            sizes.append(fitted[1])
            room -= fitted[1] + comma
    for n, (i, hit) in enumerate(kept):
        if hit.truncated and room > 0:
            wider = _fit_one(hits[i], sizes[n] + room, len(hit.text) + room, finder)
            if wider is not None:
                room -= wider[1] - sizes[n]
                kept[n] = (i, wider[0])
    return kept, room


def fit_hits(
    hits: Sequence[RecallHit],
    max_chars: int,
    terms: Sequence[Term] = (),
    contexts: Mapping[int, RecallContext] | None = None,
    context_chars: int = 240,
) -> list[RecallHit]:
    """The hits, best first, packed so that ``encode_hits`` of them is at most ``max_chars`` characters.

    Each hit goes in whole while it fits; a longer one is cut around the match
    to half the room left (so one long tool output cannot crowd out the hits
    after it), and one that cannot show :data:`_MIN_TEXT` characters is left
    out (a shorter one after it may still fit). Room left at the end first
    widens the cut texts again, best first, then gives ``contexts`` (a hit's
    position -> its neighbouring event, full text) to the hits in rank order,
    cut to ``context_chars``, unless that neighbour is already a hit.
    """
    # Texts alone over the budget: the whole answer cannot fit, no need to encode it.
    whole = len(encode_hits(hits)) if sum(len(h.text) for h in hits) <= max_chars else max_chars + 1
    if whole <= max_chars:
        # Everything fits (also: the tool re-checks what the index packed).
        kept = list(enumerate(hits))
        room = max_chars - whole
    else:
        kept, room = _pack(hits, max_chars, _Finder(terms))
    if contexts is None or room < _MIN_CONTEXT:
        return [h for _, h in kept]
    shown = {h.first_seq for _, h in kept if h.kind == "event"}
    for n, (i, hit) in enumerate(kept):
        if room < _MIN_CONTEXT:
            break
        ctx = contexts.get(i)
        if ctx is None or ctx.seq in shown:
            continue
        bare = _size(msgspec.structs.replace(hit, context=msgspec.structs.replace(ctx, text=""))) - _size(hit)
        text = truncate(ctx.text, min(room - bare, context_chars))
        if len(text) < min(len(ctx.text), _MIN_CONTEXT):
            continue
        with_context = msgspec.structs.replace(hit, context=msgspec.structs.replace(ctx, text=text))
        grown = _size(with_context) - _size(hit)
        if grown <= room:
            room -= grown
            kept[n] = (i, with_context)
    return [h for _, h in kept]


def encode_events(chunk_id: str, events: Sequence[SessionEvent], seqs: Sequence[int], max_chars: int) -> str:
    """Verbatim events as JSON within ``max_chars``: an event that does not fit has its text cut, later ones are omitted."""
    found = {e.seq for e in events}
    doc: dict[str, Any] = {"chunk_id": chunk_id, "events": []}
    missing = sorted({s for s in seqs if s not in found})
    if missing:
        doc["missing_seqs"] = missing
    out: list[dict[str, Any]] = doc["events"]
    for event in events:
        item = msgspec.to_builtins(event)
        out.append(item)
        text = _dumps(doc)
        if len(text) <= max_chars:
            continue
        doc["truncated"] = True
        over = len(text) - max_chars + len(',"truncated":true') + len(',"omitted_events":000')
        for field in ("content", "tool_args"):
            value = item.get(field)
            if isinstance(value, str) and over > 0 and value:
                keep = max(0, len(value) - over - 1)
                item[field] = truncate(value, keep)
                over -= len(value) - len(item[field])
        item.pop("meta", None)
        if len(_dumps(doc)) > max_chars:
            out.pop()
        doc["omitted_events"] = len(events) - len(out)
        if len(_dumps(doc)) > max_chars:
            del out[:]
            doc["omitted_events"] = len(events)
        break
    return _dumps(doc)
