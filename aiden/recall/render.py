"""The recall answer an agent reads, and its one budget: serialized JSON within ``max_chars``.

Pure: no database, no I/O. :func:`fit_hits` is the only place the answer
budget is applied; the index calls it with ``config.recall_max_chars`` and
the tool encodes what it returns with :func:`encode_hits`, so the JSON the
model sees is the text that was measured.

A result is an event's verbatim text (content, tool name, tool arguments) or a
chunk summary. When everything does not fit, the longest texts are cut first,
to a window centred on the first match of a query term, so every hit keeps
its best part; only when even short windows do not fit are the lowest-ranked
hits dropped. Room that is left goes to one neighbouring event per hit.
"""

from __future__ import annotations

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
_encoder: Final = msgspec.json.Encoder()


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


def hit_dict(hit: RecallHit) -> dict[str, Any]:
    """The JSON object of one hit, as the agent sees it."""
    out: dict[str, Any] = {"chunk_id": hit.chunk_id, "source": hit.source}
    if hit.kind == "event":
        out["seq"] = hit.first_seq
        out["type"] = hit.type
        out["role"] = hit.role
    else:
        out["summary_of"] = [hit.first_seq, hit.last_seq]
    out["score"] = round(hit.score, 3)
    out["text"] = hit.text
    if hit.truncated:
        out["truncated"] = True
    if hit.degraded:
        out["degraded"] = True
    if hit.context is not None:
        ctx = hit.context
        out["context"] = {"seq": ctx.seq, "type": ctx.type, "role": ctx.role, "text": ctx.text}
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


def _water_level(lengths: Sequence[int], room: int) -> int:
    """The largest ``limit`` with ``sum(min(n, limit) for n in lengths) <= room``."""
    rest = len(lengths)
    for n in sorted(lengths):
        if n * rest > room:
            return room // rest
        room -= n
        rest -= 1
    return max(lengths, default=0)


def _cut_to_fit(hits: Sequence[RecallHit], max_chars: int, finder: _Finder) -> list[RecallHit] | None:
    """Every text cut to one common limit so that the answer fits, or ``None`` below :data:`_MIN_TEXT`.

    The limit starts at the water level of the raw lengths in the room the JSON
    around the texts leaves; escapes and cut markers can make the encoded text
    longer, so it is lowered by the overshoot until the answer fits.
    """
    bare = [msgspec.structs.replace(h, text="", truncated=True) for h in hits]
    limit = _water_level([len(h.text) for h in hits], max_chars - len(encode_hits(bare)))
    while limit >= _MIN_TEXT:
        trial = [finder.cut(h, limit) for h in hits]
        over = len(encode_hits(trial)) - max_chars
        if over <= 0:
            return trial
        cut = sum(1 for h in hits if len(h.text) > limit) or 1
        limit -= -(-over // cut)
    return None


def fit_hits(
    hits: Sequence[RecallHit],
    max_chars: int,
    terms: Sequence[Term] = (),
    contexts: Mapping[int, RecallContext] | None = None,
    context_chars: int = 240,
) -> list[RecallHit]:
    """Cut, then drop, hits until ``encode_hits`` of them is at most ``max_chars`` characters.

    ``contexts`` maps a hit's position to its neighbouring event (full text),
    attached in rank order, cut to ``context_chars``, while room is left.
    """
    kept = list(hits)
    finder = _Finder(terms)
    while kept and len(encode_hits(kept)) > max_chars:
        fitted = _cut_to_fit(kept, max_chars, finder)
        if fitted is not None:
            kept = fitted
            break
        kept.pop()
    if contexts:
        for i, hit in enumerate(kept):
            ctx = contexts.get(i)
            if ctx is None:
                continue
            room = max_chars - len(encode_hits(kept)) - 80
            if room < _MIN_CONTEXT:
                break
            shown = msgspec.structs.replace(ctx, text=truncate(ctx.text, min(room, context_chars)))
            trial = [*kept[:i], msgspec.structs.replace(hit, context=shown), *kept[i + 1 :]]
            if len(encode_hits(trial)) <= max_chars:
                kept = trial
    return kept


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
