"""The ``recall_experience`` agent tool: its JSON schema and its handler (seed 002 "Memory Recall").

Never injected into a prompt and never called for the model: no router, no
forced first call, no query rewriting. A normal recall returns only active,
unexpired, applicable records, at most five and about 4,800 characters of
JSON, and reports the ids it actually returned (the actor notes them on the
running episode). Bad arguments become ``{"error": "..."}``: the handler never
raises for the model's input; cancellation and programming errors propagate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from aiden.errors import AidenError
from aiden.experience.records import RECORD_KINDS, ExperienceRecord, RecordKind
from aiden.toolargs import ToolArgumentError as _Reject
from aiden.toolargs import decode_arguments

__all__ = [
    "EXPERIENCE_TOOL",
    "MAX_CHARS",
    "MAX_RESULTS",
    "TOOL_NAME",
    "ToolAnswer",
    "fit",
    "handle_experience_tool",
]

TOOL_NAME: Final = "recall_experience"
MAX_RESULTS: Final = 5
MAX_CHARS: Final = 4800
_MAX_ARGUMENT_CHARS: Final = 16_384
_MAX_QUERY_CHARS: Final = 2_000
_MAX_ERROR_CHARS: Final = 400
_MIN_BODY_CHARS: Final = 120
_HINT: Final = "Experience from earlier runs: a hint to verify against current observations, not state."

EXPERIENCE_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Look up what earlier runs learned by doing in this environment: procedures that worked, "
            "calibrated values, failures to avoid, facts observed, where things are (navigation: the "
            "path or URL of something an earlier run had to search for), each citing the episode and "
            "events that showed it. Call it when the task materially depends on how something was done "
            "before (a build flag, a working command, a known error, a version, where a file is). "
            "Recalled experience is a hint to verify against current observations and tool results, "
            "not state: the environment may have changed since."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you are trying to do, in words."},
                "environment": {
                    "type": "string",
                    "description": "The environment (repo, service, app) the task runs in, if known.",
                },
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(RECORD_KINDS)},
                    "description": "Only records of these kinds.",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": f"Maximum number of records (at most {MAX_RESULTS}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
"""OpenAI / litellm function-tool definition of ``recall_experience``."""


class _Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: str
    environment: str | None = None
    kinds: list[RecordKind] | None = None
    k: int | None = None


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """The JSON text for the model and the ids of the records it holds."""

    text: str
    ids: list[str]


Search = Callable[[str, str | None, list[str] | None, int], Awaitable[list[ExperienceRecord]]]
"""``search(query, environment, kinds, k)``: the best active, unexpired, applicable records."""

_decoder: Final = msgspec.json.Decoder(_Args)
_encoder: Final = msgspec.json.Encoder()


def _parse(arguments: str | Mapping[str, Any]) -> _Args:
    args = decode_arguments(
        arguments,
        _decoder,
        max_chars=_MAX_ARGUMENT_CHARS,
        empty="arguments must be a JSON object with 'query'",
    )
    if not args.query.strip():
        raise _Reject("query must not be empty")
    if len(args.query) > _MAX_QUERY_CHARS:
        raise _Reject(f"query longer than {_MAX_QUERY_CHARS} characters")
    if args.k is not None and not 1 <= args.k <= MAX_RESULTS:
        raise _Reject(f"k must be between 1 and {MAX_RESULTS}, got {args.k}")
    if args.environment is not None and len(args.environment) > 200:
        raise _Reject("environment longer than 200 characters")
    return args


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


def _error(message: str) -> str:
    return _dumps({"error": message[:_MAX_ERROR_CHARS]})


def _item(record: ExperienceRecord, body: str) -> dict[str, Any]:
    return {
        "id": record.id,
        "kind": record.kind,
        "title": record.title,
        "body": body,
        "environment": record.environment,
        "evidence": [{"episode_id": e.episode_id, "seqs": list(e.seqs)} for e in record.evidence[-3:]],
        "learned_at": record.updated_at,
    }


def fit(records: list[ExperienceRecord], max_results: int, max_chars: int) -> ToolAnswer:
    """The answer for ``records`` (best first) within ``max_results`` and ``max_chars`` of JSON.

    A record that does not fit whole gets its body cut (if at least a useful
    part fits); after that, nothing more is added.
    """
    items: list[dict[str, Any]] = []
    ids: list[str] = []

    def text() -> str:
        return _dumps({"note": _HINT, "results": items})

    for record in records[:max_results]:
        items.append(_item(record, record.body))
        if len(text()) <= max_chars:
            ids.append(record.id)
            continue
        items.pop()
        room = max_chars - len(text()) - len(_dumps(_item(record, ""))) - 8
        if room >= _MIN_BODY_CHARS:
            body = record.body[:room]
            items.append(_item(record, body + " ..."))
            while len(text()) > max_chars and len(body) > _MIN_BODY_CHARS:
                # Escapes (quotes, non-ASCII) make the JSON longer than the raw body.
                body = body[: len(body) - max(16, (len(text()) - max_chars))]
                items[-1] = _item(record, body + " ...")
            if len(text()) <= max_chars:
                ids.append(record.id)
            else:
                items.pop()
        break
    return ToolAnswer(text(), ids)


async def handle_experience_tool(
    arguments: str | Mapping[str, Any],
    *,
    search: Search,
    environment: str | None = None,
    max_results: int = MAX_RESULTS,
    max_chars: int = MAX_CHARS,
) -> ToolAnswer:
    """Run one ``recall_experience`` call; the JSON text and the ids of the records returned.

    ``environment`` is the run's environment, used when the model names none.
    Neither naming one ("" or None) searches every environment: the task's
    environment is unknown, not "none".
    """
    try:
        args = _parse(arguments)
        k = min(args.k or max_results, max_results)
        kinds = None if args.kinds is None else [str(kind) for kind in args.kinds]
        env = args.environment or environment or None
        found = await search(args.query, env, kinds, k)
        return fit(found, k, max_chars)
    except msgspec.ValidationError as exc:
        return ToolAnswer(_error(f"invalid arguments: {exc}"), [])
    except msgspec.DecodeError as exc:
        return ToolAnswer(_error(f"arguments are not valid JSON: {exc}"), [])
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return ToolAnswer(_error(str(exc) or type(exc).__name__), [])
