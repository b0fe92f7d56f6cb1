"""The ``recall_session_chunks`` agent tool: its JSON schema and its handler.

The handler turns the model's arguments into a search, an exact lookup or a
rehydration, and always answers with a JSON string the model can read: bad
arguments (invalid JSON, wrong types, unknown fields, hostile ids) and recall
failures become ``{"error": "..."}``. Only aiden errors, ``ValueError`` and
msgspec errors are caught, so cancellation and programming errors still
propagate to the agent loop.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from aiden.errors import AidenError
from aiden.events import EVENT_TYPES, EventType, SessionEvent, validate_id
from aiden.recall.query import truncate
from aiden.recall.types import RecallHit

__all__ = ["RECALL_TOOL", "TOOL_NAME", "handle_recall_tool"]

TOOL_NAME: Final = "recall_session_chunks"
"""The function name the model calls."""
_MAX_ARGUMENT_CHARS: Final = 65536
_MAX_SEQS: Final = 200
_MAX_K: Final = 10_000
"""Upper bound of ``k``: far above any configured cap, far below the 64-bit limit of the
actor messages (a ``k`` of 2**64 made msgspec raise OverflowError instead of an answer)."""
_MAX_SEQ: Final = 2**63 - 1
"""Largest seq: seqs are stored as signed 64-bit JSON ints."""
_MAX_ERROR_CHARS: Final = 400
_SUMMARY_FLOOR: Final = 160
"""Summaries are cut down to this many characters before any result is dropped."""

RECALL_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the compacted (older) part of this session's conversation. Older turns are "
            "summarized into chunks; this tool finds the chunks matching a query and returns their "
            "summaries with snippets of the matching events (seq ranges). Use it when you need a "
            "detail that is no longer in the conversation: an earlier decision, requirement, "
            "command, error or value. To read a chunk exactly, pass its chunk_id (and seqs to get "
            "those events verbatim). Results with source 'pending' come from a compaction that is "
            "still being committed."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": (
                        "Words to search for (any language; all words must match, else the best "
                        "partial matches are returned). Ignored when chunk_id is given (pass '')."
                    ),
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": _MAX_K,
                    "description": "Maximum number of chunks to return (capped by configuration).",
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
                    "items": {"type": "integer", "minimum": 0, "maximum": _MAX_SEQ},
                    "maxItems": _MAX_SEQS,
                    "description": "With chunk_id: return these events of the chunk verbatim (seq numbers).",
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
    since: float | None = None
    until: float | None = None


_args_decoder: Final = msgspec.json.Decoder(_Args)
_encoder: Final = msgspec.json.Encoder()


class _Reject(ValueError):
    """Arguments that parse but make no request."""


def _parse(arguments: str | Mapping[str, Any]) -> _Args:
    if isinstance(arguments, str):
        if len(arguments) > _MAX_ARGUMENT_CHARS:
            raise _Reject(f"arguments longer than {_MAX_ARGUMENT_CHARS} characters")
        if not arguments.strip():
            raise _Reject("arguments must be a JSON object with at least 'query'")
        args = _args_decoder.decode(arguments)
    elif isinstance(arguments, Mapping):
        args = msgspec.convert(dict(arguments), _Args, strict=True)
    else:
        raise _Reject(f"arguments must be a JSON object, got {type(arguments).__name__}")
    if args.seqs is not None and len(args.seqs) > _MAX_SEQS:
        raise _Reject(f"seqs: at most {_MAX_SEQS} values")
    # Every number is bounded here, before any request is made: an out-of-range int
    # would otherwise surface as OverflowError from encoding a message or the answer.
    if args.k is not None and args.k < 1:
        raise _Reject("k must be >= 1")
    if args.k is not None and args.k > _MAX_K:
        raise _Reject(f"k must be <= {_MAX_K}, got {args.k}")
    for seq in args.seqs or ():
        if not 0 <= seq <= _MAX_SEQ:
            raise _Reject(f"seqs: {seq} is outside 0..{_MAX_SEQ}")
    for name, bound in (("since", args.since), ("until", args.until)):
        # JSON has no inf/nan, but a decoded mapping can carry them.
        if bound is not None and not math.isfinite(bound):
            raise _Reject(f"{name} must be a finite number, got {bound}")
    return args


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


def _error(message: str) -> str:
    return _dumps({"error": truncate(message, _MAX_ERROR_CHARS)})


def _hit_dict(hit: RecallHit) -> dict[str, Any]:
    out: dict[str, Any] = {
        "chunk_id": hit.chunk_id,
        "source": hit.source,
        "score": round(hit.score, 4),
        "first_seq": hit.first_seq,
        "last_seq": hit.last_seq,
        "summary": hit.summary,
        "matches": [
            {
                "seqs": [s.first_seq, s.last_seq],
                "type": s.type,
                "role": s.role,
                "snippet": s.snippet,
            }
            for s in hit.spans
        ],
    }
    if hit.matched_events > len(hit.spans):
        out["matched_events"] = hit.matched_events
    if hit.degraded:
        out["degraded"] = True
    return out


def _render_hits(hits: Sequence[RecallHit], max_chars: int) -> str:
    """Encode hits, shedding detail until the text fits ``max_chars``.

    Long summaries are cut first (longest first, down to
    :data:`_SUMMARY_FLOOR` characters) so every hit stays; then the
    lowest-ranked snippets and hits are dropped.
    """
    items = [_hit_dict(h) for h in hits]
    doc: dict[str, Any] = {"results": items}
    text = _dumps(doc)
    while len(text) > max_chars and items:
        longest = max(items, key=lambda item: len(item["summary"]))
        length = len(longest["summary"])
        if length <= _SUMMARY_FLOOR:
            break
        doc["truncated"] = True
        over = len(text) - max_chars + len(',"truncated":true')
        longest["summary"] = truncate(longest["summary"], max(_SUMMARY_FLOOR, length - over))
        text = _dumps(doc)
    while len(text) > max_chars and items:
        doc["truncated"] = True
        last = items[-1]
        if last["matches"]:
            last["matches"].pop()
        elif len(items) > 1:
            items.pop()
        elif last["summary"]:
            over = len(text) - max_chars
            last["summary"] = truncate(last["summary"], max(0, len(last["summary"]) - over - 1))
        else:
            items.pop()
        text = _dumps(doc)
    return text


def _render_events(
    chunk_id: str, events: Sequence[SessionEvent], seqs: Sequence[int], max_chars: int
) -> str:
    """Encode verbatim events; an event that does not fit has its text cut, later ones are omitted."""
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


async def handle_recall_tool(
    arguments: str | Mapping[str, Any],
    *,
    search: Callable[..., Awaitable[list[RecallHit]]],
    lookup: Callable[[str], Awaitable[RecallHit | None]],
    rehydrate: Callable[[str, Sequence[int] | None], Awaitable[list[SessionEvent]]],
    max_chars: int,
    read_events: Callable[[Sequence[int]], Awaitable[list[SessionEvent]]] | None = None,
) -> str:
    """Run one ``recall_session_chunks`` call and return its JSON result text.

    ``arguments`` is the tool call's JSON text (or an already decoded mapping).
    ``search(query, k=, types=, roles=, since=, until=)``, ``lookup(chunk_id)``
    and ``rehydrate(chunk_id, seqs)`` are the recall index's operations (the
    recall actor's async wrappers). The answer is ``{"results": [...]}`` for a
    search or lookup, ``{"chunk_id": ..., "events": [...]}`` for a rehydration,
    or ``{"error": "..."}``; it is at most ``max_chars`` characters (lowest
    ranked details are dropped, marked ``"truncated": true``), except that the
    bare envelope is always returned. The index already bounds summaries plus
    snippets by ``config.recall_max_chars``; ``max_chars`` bounds the whole JSON
    text, so give it room for the JSON around them (about
    ``recall_max_chars + 2000`` keeps every result of a full answer).
    With ``read_events``, ``seqs`` without ``chunk_id`` returns those events
    verbatim from wherever they are stored (hot window or chunks).
    """
    try:
        args = _parse(arguments)
        if args.chunk_id is not None:
            chunk_id = validate_id(args.chunk_id, what="chunk_id")
            if args.seqs is not None:
                if not args.seqs:
                    raise _Reject("seqs must list at least one seq (omit it to get the chunk summary)")
                events = await rehydrate(chunk_id, list(args.seqs))
                return _render_events(chunk_id, events, args.seqs, max_chars)
            hit = await lookup(chunk_id)
            if hit is None:
                raise _Reject(f"no chunk {chunk_id!r} in this session")
            return _render_hits([hit], max_chars)
        if args.seqs is not None:
            if read_events is None:
                raise _Reject("seqs needs chunk_id: pass the chunk whose events you want")
            if not args.seqs:
                raise _Reject("seqs must list at least one seq")
            # Seqs alone (e.g. from a trimmed tool output's stub): wherever those events live.
            events = await read_events(list(args.seqs))
            return _render_events("", events, args.seqs, max_chars)
        if not args.query.strip():
            raise _Reject("query must not be empty")
        hits = await search(
            args.query,
            k=args.k,
            types=args.types,
            roles=args.roles,
            since=args.since,
            until=args.until,
        )
        return _render_hits(hits, max_chars)
    except msgspec.ValidationError as exc:
        return _error(f"invalid arguments: {exc}")
    except msgspec.DecodeError as exc:
        return _error(f"arguments are not valid JSON: {exc}")
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return _error(str(exc) or type(exc).__name__)
