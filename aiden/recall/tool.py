"""What recall answers: the hit types, the answer's JSON and its one budget, and the ``recall_session_chunks`` tool.

Light (no sqlite3), so the memory imports the result types without loading the index. Pure but for
the tool handler. :func:`fit_hits` is the only place the budget (characters of serialized JSON)
is applied, and the tool sends what it returns encoded by :func:`encode_hits`, so the model sees the
text that was measured. The handler always answers with JSON the model can read: bad arguments and
recall failures become ``{"error": "..."}``; only aiden errors, ``ValueError`` and msgspec errors
are caught, so cancellation and programming errors still propagate.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from aiden.errors import AidenError
from aiden.events import EVENT_TYPES, MAX_SEQ, EventType, SessionEvent, validate_id
from aiden.recall.query import ELLIPSIS, Term, content_terms, match_finder, snippet, truncate
from aiden.tools import ToolArgumentError as _Reject
from aiden.tools import decode_arguments

__all__ = [
    "RECALL_TOOL",
    "TOOL_NAME",
    "RecallContext",
    "RecallHit",
    "RecallStats",
    "RecallTools",
    "encode_events",
    "encode_hits",
    "fit_hits",
    "handle_recall_tool",
    "hit_dict",
]


# --- the result types -------------------------------------------------------------
class RecallContext(msgspec.Struct, frozen=True, kw_only=True):
    """The event next to a hit (the turn before it, or the reply after a user's words)."""

    seq: int
    type: str
    role: str | None
    text: str
    """Verbatim text, cut with ``…`` to what the answer budget leaves."""


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recall result: a compacted event (``kind == "event"``) or a chunk summary (``"summary"``)."""

    chunk_id: str
    source: Literal["active", "pending"]
    """``active``: committed in index.yaml. ``pending``: a chunk file not (yet) in the index."""
    kind: Literal["event", "summary"]
    score: float
    """Relevance, higher is better: BM25 of the event (or summary) for the query, or with hybrid
    recall the fusion of its BM25 and vector scores; 0.0 for an exact lookup."""
    text: str
    """The event's verbatim text (content, tool name, tool arguments) or the chunk summary,
    cut around the match with ``…`` when the answer budget requires it (then ``truncated``)."""
    first_seq: int
    """The event's seq; for a summary, the chunk's first seq."""
    last_seq: int
    """The event's seq; for a summary, the chunk's last seq."""
    type: str | None = None
    """Event type (``None`` for a summary)."""
    role: str | None = None
    timestamp: float | None = None
    truncated: bool = False
    context: RecallContext | None = None
    degraded: bool = False
    """The chunk's summary is a raw breadcrumb written when summarization failed."""

    @property
    def seq(self) -> int | None:
        """The event's seq (``None`` for a summary)."""
        return self.first_seq if self.kind == "event" else None


class RecallStats(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry of one :class:`RecallIndex`."""

    recall_calls: int
    """search() and lookup() calls."""
    results_returned: int
    pending_chunks_recalled: int
    """Returned results whose ``source`` is ``"pending"`` (never inferred from ids)."""
    rebuilds: int
    """From-scratch builds of the database (including the first one)."""
    chunks_indexed: int
    problems: tuple[str, ...] = ()
    """Chunks that could not be indexed: committed ones since the last rebuild, then pending ones."""
    embedding_failures: int = 0
    """Catch-ups whose embedding failed (recall stayed lexical for the events left without vectors)."""


# --- the answer and its budget ---------------------------------------------------
_encoder: Final = msgspec.json.Encoder()


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


_MIN_TEXT: Final = 120
"""A hit is dropped rather than shown in fewer characters than this."""
_MIN_CONTEXT: Final = 60
_LEAST_JSON: Final = len('{"chunk_id":"","text":""}')
"""Characters of a hit's JSON besides its chunk id and text, at the least."""
_ROLE_OF_TYPE: Final = {"user_input": "user", "assistant_output": "assistant", "tool_result": "tool"}
"""The role an event type implies (the role is shown only when it differs)."""

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


_Cut = Callable[[RecallHit, int], RecallHit]


def _cutter(terms: Sequence[Term], stemmed: Callable[[RecallHit], Mapping[Term, float]] | None) -> _Cut:
    """Cuts a hit's text to a limit, around the region richest in matches (see :func:`match_finder`).

    ``stemmed`` gives the words of the hit that matched in the index, each with its weight: a query
    term weighs what its word does; where the text lacks every query term's spelling, the finder
    looks for those words instead.
    """
    find = match_finder(terms)
    spans: dict[tuple[str, str, int], tuple[int, int] | None] = {}

    def span(hit: RecallHit) -> tuple[int, int] | None:
        key = (hit.chunk_id, hit.kind, hit.first_seq)
        if key not in spans:  # a hit is cut several times while it is fitted
            if stemmed is None:
                spans[key] = find(hit.text)
            else:
                # The index is asked only for a hit with a choice to make (see match_finder).
                words = functools.cache(functools.partial(stemmed, hit))

                def weights() -> dict[str, float]:
                    return {t.text.casefold(): w for t, w in words().items()}

                spans[key] = match_finder(terms, weights)(hit.text) or match_finder(list(words()), weights)(hit.text)
        return spans[key]

    def cut(hit: RecallHit, limit: int) -> RecallHit:
        # Called only with a limit below the text's length (_fit_one).
        text = snippet(hit.text, terms, limit, finder=lambda _: span(hit)) if terms else truncate(hit.text, limit)
        return msgspec.structs.replace(hit, text=text, truncated=True)

    return cut


def _size(hit: RecallHit) -> int:
    return len(_dumps(hit_dict(hit)))


def _fit_one(hit: RecallHit, room: int, share: int, cut: _Cut) -> tuple[RecallHit, int] | None:
    """``hit`` whole if its text is at most ``share`` characters and its JSON fits in ``room``, else
    cut to ``share`` characters of text (at least :data:`_MIN_TEXT`) so that it fits, else ``None``.

    Escapes and cut markers make the encoded text longer: the limit drops by the overshoot until it fits.
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
        fitted = cut(hit, limit)
        size = _size(fitted)
        if size <= room:
            return fitted, size
        limit -= size - room
    return None


def _pack(hits: Sequence[RecallHit], max_chars: int, cut: _Cut) -> tuple[list[tuple[int, RecallHit]], int]:
    """The hits that fit, by position, best first (see :func:`fit_hits`), and the room left."""
    room = max_chars - len(encode_hits(()))
    kept: list[tuple[int, RecallHit, int]] = []  # (position, hit as packed, its JSON size)
    for i, hit in enumerate(hits):
        comma = 1 if kept else 0
        fitted = _fit_one(hit, room - comma, (room - comma) // 2, cut)
        if fitted is not None:
            kept.append((i, *fitted))
            room -= fitted[1] + comma
    for n, (i, hit, size) in enumerate(kept):
        if hit.truncated and room > 0 and (wider := _fit_one(hits[i], size + room, len(hit.text) + room, cut)):
            room -= wider[1] - size
            kept[n] = (i, *wider)
    return [(i, hit) for i, hit, _ in kept], room


def fit_hits(
    hits: Sequence[RecallHit],
    max_chars: int,
    terms: Sequence[Term] = (),
    contexts: Callable[[], Mapping[int, RecallContext]] | None = None,
    context_chars: int = 240,
    stemmed: Callable[[RecallHit], Mapping[Term, float]] | None = None,
) -> list[RecallHit]:
    """The hits, best first, packed so that ``encode_hits`` of them is at most ``max_chars`` characters.

    Each hit goes in whole while it fits; a longer one is cut around the match to half the room left
    (one long tool output cannot crowd out the hits after it), and one that cannot show
    :data:`_MIN_TEXT` characters is left out. Room left at the end widens the cut texts again, then
    adds ``contexts()`` (hit position -> neighbouring event; called only when there is room), cut to
    ``context_chars``, where the neighbour is not a hit itself. ``stemmed`` gives the words of a
    hit that matched ``terms`` in the index (which stems), each with its weight (rarity): a cut shows
    the region richest in them, not the first match of a common word.
    """
    # Texts alone over the budget: the whole answer cannot fit, no need to encode it.
    whole = len(encode_hits(hits)) if sum(len(h.text) for h in hits) <= max_chars else max_chars + 1
    if whole <= max_chars:
        # Everything fits (also: the tool re-checks what the index packed).
        kept = list(enumerate(hits))
        room = max_chars - whole
    else:
        kept, room = _pack(hits, max_chars, _cutter(terms, stemmed))
    if contexts is None or room < _MIN_CONTEXT:
        return [h for _, h in kept]
    shown = {h.first_seq for _, h in kept if h.kind == "event"}
    near = contexts()
    for n, (i, hit) in enumerate(kept):
        if room < _MIN_CONTEXT:
            break
        ctx = near.get(i)
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


def _show(item: dict[str, Any], parts: Sequence[tuple[str, str]], n: int) -> None:
    """Set ``item``'s text fields to the first ``n`` characters of ``parts``: a cut field ends with ``…``, later ones are left out."""
    for field, part in parts:
        if n < 0:
            item.pop(field, None)
        else:
            item[field] = part if n >= len(part) else part[:n] + ELLIPSIS
        n -= len(part)


def encode_events(
    chunk_id: str, events: Sequence[SessionEvent], seqs: Sequence[int], max_chars: int, *, offset: int = 0
) -> str:
    """Verbatim events as JSON within ``max_chars``: an event that does not fit has its text cut, later ones are omitted.

    An event's text is its ``content`` then its ``tool_args`` (a tool call's text is its arguments);
    the text of the event ``seqs[0]`` starts at character ``offset`` of the two read one after the
    other: a field read out is left out, a field cut ends with ``…``. When an event's text is cut
    (or events are left out for room), ``next`` holds the arguments that read on from there: every
    event not yet shown in full, the cut one first with its ``offset``. So following ``next`` shows
    each event once, whatever its length, one answer at a time. An event whose other fields alone
    do not fit in ``max_chars`` is answered with ``{"error": ...}``.
    """
    found = {e.seq for e in events}
    doc: dict[str, Any] = {"chunk_id": chunk_id, "events": []}
    if offset:
        doc["offset"] = offset
    missing = sorted({s for s in seqs if s not in found})
    if missing:
        doc["missing_seqs"] = missing
        if len(_dumps(doc)) > max_chars // 2:
            # The caller's own seqs echoed back must leave the events room: the first ones and how many.
            doc["missing_count"] = len(missing)
            room = max_chars // 2 - len(_dumps({**doc, "missing_seqs": []}))
            shown = list(itertools.takewhile(lambda n: n <= room, itertools.accumulate(len(f"{s},") for s in missing)))
            doc["missing_seqs"] = missing[: len(shown)]
    out: list[dict[str, Any]] = doc["events"]
    # ``offset`` reads on in the first seq asked for: the one ``next`` names first.
    first = seqs[0] if seqs else None
    texts: list[list[tuple[str, str]]] = []  # per event shown: (field, its text from offset), in reading order
    for event in events:
        item = msgspec.to_builtins(event)
        parts: list[tuple[str, str]] = []
        skip = offset if event.seq == first else 0
        for field in ("content", "tool_args"):
            value: str = getattr(event, field) or ""
            part = value[skip:]
            skip = max(0, skip - len(value))
            if part:
                parts.append((field, part))
            elif value:  # (a field read out is left out, as an empty one is by the event itself)
                del item[field]
        item.update(parts)
        out.append(item)
        texts.append(parts)
        if len(_dumps(doc)) > max_chars:
            break
    else:
        return _dumps(doc)
    # The last event does not fit: it is cut (or left out) and the ones after it are omitted; if the
    # fields saying so leave no room for it, the one before it is cut instead, and so on.
    doc["truncated"] = True
    read_on: dict[str, Any] = {"chunk_id": chunk_id} if chunk_id else {}

    def fits(k: int, n: int | None) -> bool:
        """Whether the answer fits with the first ``n`` characters of event ``k``'s text shown (``None``: events from ``k`` on left out)."""
        len_text = sum(len(part) for _, part in texts[k])
        if n is None:
            del out[k:]
        else:
            _show(out[k], texts[k], n)
        doc["omitted_events"] = len(events) - len(out)
        # Every event not yet shown in full, the cut one first: ``offset`` applies to it only.
        done = n == len_text
        rest = events[k + done :]
        if rest:
            start = offset if events[k].seq == first else 0
            doc["next"] = read_on | {"seqs": [e.seq for e in rest], "offset": 0 if done else start + (n or 0)}
        else:
            doc.pop("next", None)
        return len(_dumps(doc)) <= max_chars

    while out:
        k = len(out) - 1
        out[k].pop("meta", None)
        len_text = sum(len(part) for _, part in texts[k])
        if fits(k, len_text):
            return _dumps(doc)
        # Escaping makes a character cost 1 to 6 in the JSON: search the longest cut that fits.
        low, high = 0, min(len_text - 1, max_chars)  # every character shown costs at least one
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if fits(k, mid) else (low, mid - 1)
        if low and fits(k, low):
            return _dumps(doc)
        # Never send an answer that would show nothing new: an event that cannot show a character is
        # left out, to be read in an answer of its own when others came before it.
        if k and fits(k, None):
            return _dumps(doc)
        del out[k:]
    # Not even one event's fields besides its text fit in an answer: say so rather than show nothing.
    return _error(f"event {events[0].seq} does not fit in an answer (its fields besides the text are too long); ask for the other seqs without it")


# --- the tool ------------------------------------------------------------------
TOOL_NAME: Final = "recall_session_chunks"
"""The function name the model calls."""
_MAX_ARGUMENT_CHARS: Final = 65536
_MAX_SEQS: Final = 200
_MAX_K: Final = 10_000
"""Upper bound of ``k``: far above any configured cap, far below the 64-bit limit of the actor messages."""
_MAX_ERROR_CHARS: Final = 400
_MAX_OFFSET: Final = 2**63 - 1
"""Upper bound of ``offset``, like a seq's: what the answer's JSON can echo back."""

RECALL_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the compacted (older) part of this session's conversation. Older turns are "
            "summarized into chunks; this tool returns the verbatim text of the past events that "
            "best match a query, best first (with chunk_id, seq, type, time, and role where the "
            "type does not imply it), or a chunk summary where only the summary matched. Use it when you need a "
            "detail that is no longer in the conversation: an earlier decision, requirement, "
            "command, error or value. Long texts are cut around the match ('truncated'); pass "
            "chunk_id and seqs to read those events in full (offset to read on). Results with source 'pending' come "
            "from a compaction that is still being committed."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": (
                        "Words or a question (any language); events holding more of its words, "
                        "and rarer ones, rank first. Ignored when chunk_id is given (pass '')."
                    ),
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": _MAX_K,
                    "description": "Maximum number of results to return (capped by configuration).",
                },
                "chunk_id": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9_-]{1,64}$",
                    "description": "Exact chunk id from an earlier result or the session summary.",
                },
                "types": {
                    "type": "array",
                    "items": {"type": "string", "enum": sorted(EVENT_TYPES)},
                    "description": "Only match events of these types.",
                },
                "roles": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only match events with these roles (e.g. 'user', 'assistant', 'tool').",
                },
                "seqs": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": MAX_SEQ},
                    "maxItems": _MAX_SEQS,
                    "description": (
                        "Return these events verbatim (seq numbers; with chunk_id, events of that "
                        "chunk). An event too long for one answer is cut and later ones left out: the "
                        "answer's 'next' gives the seqs and offset to pass to read on."
                    ),
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": _MAX_OFFSET,
                    "description": (
                        "With seqs: start the text (content, then tool_args) of the first seq listed "
                        "at this character; the others are read from their start (from 'next')."
                    ),
                },
                "since": {"type": "number", "description": "Only events at or after this Unix time."},
                "until": {"type": "number", "description": "Only events at or before this Unix time."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
"""OpenAI / litellm function-tool definition of ``recall_session_chunks``."""


class _Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: str = ""
    k: int | None = None
    chunk_id: str | None = None
    types: list[EventType] | None = None
    roles: list[str] | None = None
    seqs: list[int] | None = None
    offset: int = 0
    since: float | None = None
    until: float | None = None


_args_decoder: Final = msgspec.json.Decoder(_Args)


def _parse(arguments: str | Mapping[str, Any]) -> _Args:
    args = decode_arguments(arguments, _args_decoder, max_chars=_MAX_ARGUMENT_CHARS, empty="arguments must be a JSON object with at least 'query'")
    if args.seqs is not None and len(args.seqs) > _MAX_SEQS:
        raise _Reject(f"seqs: at most {_MAX_SEQS} values")
    # Every number is bounded here, before any request is made: an out-of-range int
    # would otherwise surface as OverflowError from encoding a message or the answer.
    if args.k is not None and args.k < 1:
        raise _Reject("k must be >= 1")
    if args.k is not None and args.k > _MAX_K:
        raise _Reject(f"k must be <= {_MAX_K}, got {args.k}")
    if not 0 <= args.offset <= _MAX_OFFSET:
        raise _Reject(f"offset must be in 0..{_MAX_OFFSET}, got {args.offset}")
    if args.offset and args.seqs is None:
        raise _Reject("offset needs seqs: it says where to start reading those events")
    for seq in args.seqs or ():
        if not 0 <= seq <= MAX_SEQ:
            raise _Reject(f"seqs: {seq} is outside 0..{MAX_SEQ}")
    for name, bound in (("since", args.since), ("until", args.until)):
        # JSON has no inf/nan, but a decoded mapping can carry them.
        if bound is not None and not math.isfinite(bound):
            raise _Reject(f"{name} must be a finite number, got {bound}")
    return args


def _error(message: str) -> str:
    return _dumps({"error": truncate(message, _MAX_ERROR_CHARS)})


_Search = Callable[..., Awaitable[list[RecallHit]]]
_Lookup = Callable[[str], Awaitable[RecallHit | None]]
_Rehydrate = Callable[[str, Sequence[int] | None], Awaitable[list[SessionEvent]]]
_ReadEvents = Callable[[Sequence[int]], Awaitable[list[SessionEvent]]] | None


async def handle_recall_tool(
    arguments: str | Mapping[str, Any],
    *,
    search: _Search,
    lookup: _Lookup,
    rehydrate: _Rehydrate,
    max_chars: int,
    read_events: _ReadEvents = None,
) -> str:
    """Run one ``recall_session_chunks`` call and return its JSON result text.

    ``search``, ``lookup`` and ``rehydrate`` are the recall index's operations (async). The answer
    is ``{"results": [...]}`` for a search or lookup, ``{"chunk_id": ..., "events": [...]}`` for a
    rehydration, or ``{"error": "..."}``, at most ``max_chars`` characters of JSON except the bare
    envelope. With ``read_events``, ``seqs`` without ``chunk_id`` returns those events verbatim from
    wherever they are stored (hot window or chunks). ``offset`` pages through a long event (see
    :func:`encode_events`).
    """
    try:
        args = _parse(arguments)
        if args.chunk_id is not None:
            chunk_id = validate_id(args.chunk_id, what="chunk_id")
            if args.seqs is not None:
                if not args.seqs:
                    raise _Reject("seqs must list at least one seq (omit it to get the chunk summary)")
                events = await rehydrate(chunk_id, list(args.seqs))
                return encode_events(chunk_id, events, args.seqs, max_chars, offset=args.offset)
            hit = await lookup(chunk_id)
            if hit is None:
                raise _Reject(f"no chunk {chunk_id!r} in this session")
            return encode_hits(fit_hits([hit], max_chars))
        if args.seqs is not None:
            if read_events is None:
                raise _Reject("seqs needs chunk_id: pass the chunk whose events you want")
            if not args.seqs:
                raise _Reject("seqs must list at least one seq")
            # Seqs alone (e.g. from a trimmed tool output's stub): wherever those events live.
            events = await read_events(list(args.seqs))
            return encode_events("", events, args.seqs, max_chars, offset=args.offset)
        if not args.query.strip():
            raise _Reject("query must not be empty")
        hits = await search(
            args.query, k=args.k, types=args.types, roles=args.roles, since=args.since, until=args.until
        )
        return encode_hits(fit_hits(hits, max_chars, content_terms(args.query)))
    except msgspec.ValidationError as exc:
        return _error(f"invalid arguments: {exc}")
    except msgspec.DecodeError as exc:
        return _error(f"arguments are not valid JSON: {exc}")
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return _error(str(exc) or type(exc).__name__)


class RecallTools:
    """``recall_session_chunks`` as a :class:`~aiden.tools.ToolSet` (arguments: :func:`handle_recall_tool`'s)."""

    def __init__(
        self,
        *,
        search: _Search,
        lookup: _Lookup,
        rehydrate: _Rehydrate,
        max_chars: int,
        read_events: _ReadEvents = None,
    ) -> None:
        self._handle = functools.partial(
            handle_recall_tool,
            search=search,
            lookup=lookup,
            rehydrate=rehydrate,
            max_chars=max_chars,
            read_events=read_events,
        )

    @property
    def schemas(self) -> Sequence[Mapping[str, Any]]:
        return (RECALL_TOOL,)

    def handles(self, name: str) -> bool:
        return name == TOOL_NAME

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        return await self._handle(arguments)
