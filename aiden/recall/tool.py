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
from aiden.recall.query import content_terms, truncate
from aiden.recall.render import encode_events, encode_hits, fit_hits
from aiden.recall.types import RecallHit
from aiden.toolargs import ToolArgumentError as _Reject
from aiden.toolargs import decode_arguments

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
            "chunk_id and seqs to read those events in full. Results with source 'pending' come "
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
    or ``{"error": "..."}``; it is at most ``max_chars`` characters of JSON
    (texts cut around the match, then the lowest-ranked results dropped, by
    :func:`~aiden.recall.render.fit_hits`, the same budget the index applies
    with ``config.recall_max_chars``), except that the bare envelope is
    always returned.
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
                return encode_events(chunk_id, events, args.seqs, max_chars)
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
            return encode_events("", events, args.seqs, max_chars)
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
        return encode_hits(fit_hits(hits, max_chars, content_terms(args.query)))
    except msgspec.ValidationError as exc:
        return _error(f"invalid arguments: {exc}")
    except msgspec.DecodeError as exc:
        return _error(f"arguments are not valid JSON: {exc}")
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return _error(str(exc) or type(exc).__name__)
