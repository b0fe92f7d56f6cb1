"""OpenAI chat-completions format in: messages, responses and usage to aiden events and numbers.

Pure functions, no I/O. Every field is read as a mapping key or, failing that, as an
attribute, so the objects litellm and the ``openai`` SDK return work without importing either.
Content given as a list of parts is joined with newlines (an image part becomes ``[image]``,
an audio part ``[audio]``, a file part ``[file <filename>]``: their bytes are never stored).
A bad shape raises :class:`~aiden.errors.InvalidEventError` before any event exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiden.errors import InvalidEventError
from aiden.events import EventType, SessionEvent

__all__ = ["events_from_message", "events_from_response", "resolve_usage", "usage_numbers"]

_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS: Final = frozenset({"image_url", "input_image", "image"})
_TEXT_EVENTS: Final[dict[str, EventType]] = {
    "user": "user_input",
    "system": "system_event",
    "developer": "system_event",
}
_ROLES: Final = ("user", "assistant", "tool", "system", "developer")


def _get(obj: object, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _is_record(obj: object) -> bool:
    """A mapping or an object (pydantic model, namespace); not a scalar or a sequence."""
    if isinstance(obj, Mapping):
        return True
    return not isinstance(obj, str | bytes | bytearray | int | float | Sequence) and obj is not None


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        raise InvalidEventError(f"{where}: content must be a string or a list of parts, got {type(content).__name__}")
    texts: list[str] = []
    for n, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = _get(part, "type") if _is_record(part) else None
        if isinstance(kind, str) and (kind in _TEXT_PARTS or kind == "refusal"):  # a list is no type
            value = _get(part, "text" if kind != "refusal" else "refusal")
            if not isinstance(value, str):
                raise InvalidEventError(f"{where}: content part {n} of type {kind!r} has no text string")
            texts.append(value)
        elif isinstance(kind, str) and kind in _IMAGE_PARTS:
            texts.append("[image]")
        elif kind == "input_audio":
            texts.append("[audio]")
        elif kind == "file":
            file = _get(part, "file")
            name = _get(file, "filename") if _is_record(file) else None
            texts.append(f"[file {name}]" if isinstance(name, str) and name else "[file]")
        else:
            raise InvalidEventError(
                f"{where}: content part {n} has unsupported type {kind!r}; "
                f"expected one of {sorted(_TEXT_PARTS | _IMAGE_PARTS | {'refusal', 'input_audio', 'file'})}"
            )
    return "\n".join(texts)


def _tool_call(call: object, n: int, meta: dict[str, Any]) -> SessionEvent:
    where = f"assistant message tool_calls[{n}]"
    if not _is_record(call):
        raise InvalidEventError(f"{where}: expected a mapping or object, got {type(call).__name__}")
    kind = _get(call, "type")
    if kind not in (None, "function"):
        raise InvalidEventError(f"{where}: unsupported tool call type {kind!r}; expected 'function'")
    call_id = _get(call, "id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidEventError(f"{where}: 'id' must be a non-empty string, got {call_id!r}")
    function = _get(call, "function")
    name = _get(function, "name") if _is_record(function) else None
    if not isinstance(name, str) or not name:
        raise InvalidEventError(f"{where}: 'function.name' must be a non-empty string, got {name!r}")
    arguments = _get(function, "arguments")
    if arguments is None:
        arguments = "{}"
    elif isinstance(arguments, Mapping):
        try:
            arguments = json.dumps(dict(arguments), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidEventError(f"{where}: 'function.arguments' is not JSON: {exc}") from None
    elif not isinstance(arguments, str):
        raise InvalidEventError(f"{where}: 'function.arguments' must be a JSON string, got {type(arguments).__name__}")
    return SessionEvent(
        type="tool_call", role="assistant", tool_call_id=call_id, tool_name=name, tool_args=arguments, meta=dict(meta)
    )


def _tool_call_id(message: object) -> str:
    call_id = _get(message, "tool_call_id")
    if call_id is None:
        # SWE-agent trajectories carry a one-element ``tool_call_ids`` list instead.
        ids = _get(message, "tool_call_ids")
        if isinstance(ids, Sequence) and not isinstance(ids, str) and len(ids) == 1:
            call_id = ids[0]
    if not isinstance(call_id, str) or not call_id:
        raise InvalidEventError(f"tool message: 'tool_call_id' must be a non-empty string, got {call_id!r}")
    return call_id


def _events(message: object, meta: dict[str, Any]) -> list[SessionEvent]:
    if not _is_record(message):
        raise InvalidEventError(
            f"expected a chat-completions message (a mapping or an object with .role), got {type(message).__name__}"
        )
    role = _get(message, "role")
    # The role as spelled here, not the object given: a str subclass or str Enum (read from a dataframe,
    # an SDK's enum) is equal to it but would reach the stored event and its JSON as itself.
    text_role = next((known for known in _TEXT_EVENTS if isinstance(role, str) and role == known), None)
    if text_role is not None:
        content = _text(_get(message, "content"), f"{text_role} message")
        return [SessionEvent(type=_TEXT_EVENTS[text_role], role=text_role, content=content, meta=dict(meta))]
    if role == "tool":
        name = _get(message, "name")
        return [
            SessionEvent(
                type="tool_result",
                role="tool",
                tool_call_id=_tool_call_id(message),
                tool_name=name if isinstance(name, str) and name else None,
                content=_text(_get(message, "content"), "tool message"),
                meta=dict(meta),
            )
        ]
    if role == "assistant":
        return _assistant(message, meta)
    if role == "function":
        raise InvalidEventError("role 'function' (the legacy function-calling API) is not supported; use tool messages")
    raise InvalidEventError(f"unknown message role {role!r}; expected one of {list(_ROLES)}")


def _assistant(message: object, meta: dict[str, Any]) -> list[SessionEvent]:
    if _get(message, "function_call") is not None and not _get(message, "tool_calls"):
        raise InvalidEventError("assistant message: legacy 'function_call' is not supported; use 'tool_calls'")
    content = _get(message, "content")
    text = _text(content, "assistant message")
    refusal = _get(message, "refusal")
    if not text and isinstance(refusal, str):
        text = refusal
    calls = _get(message, "tool_calls") or []
    if not isinstance(calls, Sequence) or isinstance(calls, str | bytes):
        raise InvalidEventError(f"assistant message: 'tool_calls' must be a list, got {type(calls).__name__}")
    events: list[SessionEvent] = []
    if text or not calls:
        events.append(SessionEvent(type="assistant_output", role="assistant", content=text, meta=dict(meta)))
    events.extend(_tool_call(call, n, meta) for n, call in enumerate(calls))
    return events


def events_from_message(message: Mapping[str, Any] | object) -> list[SessionEvent]:
    """The aiden events of one chat-completions message (a dict or a litellm/OpenAI message object).

    ``user`` gives ``user_input``; ``assistant`` its text as ``assistant_output`` (omitted when
    it only calls tools), then one ``tool_call`` per entry of ``tool_calls``; ``tool`` a
    ``tool_result``; ``system``/``developer`` a ``system_event``. Raises
    :class:`~aiden.errors.InvalidEventError` for an unknown role or shape. The events are not
    yet appended (``seq`` 0).
    """
    return _events(message, {})


def events_from_response(response: object) -> list[SessionEvent]:
    """The aiden events of a chat-completions response's first choice (dict or ``litellm.ModelResponse``).

    Each event carries the choice's ``finish_reason`` in ``meta["finish_reason"]``
    when the response gives one. A streamed chunk (``delta`` instead of
    ``message``) or a response without choices raises
    :class:`~aiden.errors.InvalidEventError`.
    """
    if not _is_record(response):
        raise InvalidEventError(f"expected a chat-completions response, got {type(response).__name__}")
    choices = _get(response, "choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        raise InvalidEventError("chat-completions response has no choices")
    choice = choices[0]
    message = _get(choice, "message") if _is_record(choice) else None
    if message is None:
        if _is_record(choice) and _get(choice, "delta") is not None:
            raise InvalidEventError(
                "got a streamed chunk (choices[0].delta); assemble the stream first "
                "(e.g. litellm.stream_chunk_builder) and pass the full response"
            )
        raise InvalidEventError("chat-completions response: choices[0] has no message")
    finish = _get(choice, "finish_reason")
    return _events(message, {"finish_reason": finish} if isinstance(finish, str) else {})


def _count(usage: object, key: str) -> int | None:
    value = _get(usage, key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidEventError(f"usage {key} must be a non-negative int, got {value!r}")
    return value


def usage_numbers(usage: Mapping[str, Any] | object) -> tuple[int | None, int | None, int | None]:
    """``(prompt_tokens, completion_tokens, cached_prompt_tokens)`` of a provider usage (dict or object).

    Understands the chat-completions, Responses API and Anthropic shapes (Anthropic's
    ``input_tokens`` *excludes* cache reads and writes, so the prompt is their sum). A number
    the usage does not give is None; cached tokens are capped at the prompt. A value that is
    not a non-negative int raises :class:`~aiden.errors.InvalidEventError`.
    """
    if not _is_record(usage):
        raise InvalidEventError(f"usage must be a mapping or a usage object, got {type(usage).__name__}")
    details = _get(usage, "prompt_tokens_details")
    detail_cached = _count(details, "cached_tokens") if _is_record(details) else None
    read = _count(usage, "cache_read_input_tokens")
    prompt = _count(usage, "prompt_tokens")
    completion = _count(usage, "completion_tokens")
    if prompt is None and completion is None:
        prompt, completion = _count(usage, "input_tokens"), _count(usage, "output_tokens")
        input_details = _get(usage, "input_tokens_details")
        if _is_record(input_details):  # the Responses API: input_tokens includes the cached ones
            detail_cached = _count(input_details, "cached_tokens")
        elif prompt is not None:  # Anthropic: input_tokens counts only the uncached part
            prompt += (read or 0) + (_count(usage, "cache_creation_input_tokens") or 0)
    cached = max((n for n in (detail_cached, read) if n is not None), default=None)
    if cached is not None and prompt is not None:
        cached = min(cached, prompt)
    return prompt, completion, cached


def resolve_usage(
    usage: Mapping[str, Any] | object | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cached_tokens: int | None,
) -> tuple[int | None, int | None, int | None]:
    """The numbers ``Memory.record_usage`` reports: from ``usage``, else the explicit ones (both: ``TypeError``)."""
    if usage is None:
        return prompt_tokens, completion_tokens, cached_tokens
    if prompt_tokens is not None or completion_tokens is not None or cached_tokens is not None:
        raise TypeError("record_usage: pass usage= or prompt_tokens/completion_tokens/cached_tokens, not both")
    return usage_numbers(usage)
