"""The bodies :class:`~aiden.testing.FakeLLMServer` sends: chat completions (JSON or SSE), embeddings, errors.

Pure functions of a reply description and the request body, so every reply is
byte-for-byte deterministic; the server module only routes and transports.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping
from typing import Any, Final

from aiden.testing.embedding import hashing_embedding

__all__ = ["error_reply", "render_chat", "render_embeddings"]

# A fixed creation time keeps responses byte-for-byte deterministic.
_CREATED: Final = 1_700_000_000


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _message_chars(body: Mapping[str, Any]) -> str:
    parts: list[str] = []
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, Mapping):
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
                elif content is not None:
                    parts.append(json.dumps(content))
    return "\n".join(parts)


def error_reply(status: int, message: str, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """An OpenAI-style error reply: ``(status, headers, body)``."""
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    out = {"Content-Type": "application/json"}
    out.update(headers or {})
    return status, out, json.dumps(body).encode()


def render_chat(
    reply: Mapping[str, Any], body: Mapping[str, Any], number: int
) -> tuple[int, dict[str, str], bytes]:
    """The chat-completions reply for a :data:`~aiden.testing.Responder` mapping (``number`` names the completion)."""
    status = int(reply.get("status", 200))
    extra_headers = {str(k): str(v) for k, v in dict(reply.get("headers", {})).items()}
    if "raw" in reply:
        headers = {"Content-Type": "application/json", **extra_headers}
        return status, headers, str(reply["raw"]).encode()
    if "json" in reply:
        headers = {"Content-Type": "application/json", **extra_headers}
        return status, headers, json.dumps(reply["json"]).encode()
    if status >= 400:
        return error_reply(status, str(reply.get("error", f"scripted HTTP {status}")), extra_headers)

    content = reply.get("content", "")
    tool_calls = reply.get("tool_calls")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    finish = str(reply.get("finish_reason", "tool_calls" if tool_calls else "stop"))
    prompt_tokens = _estimate(_message_chars(body))
    completion_text = (content or "") + (json.dumps(tool_calls) if tool_calls else "")
    completion_tokens = _estimate(completion_text)
    overrides = dict(reply.get("usage", {}))
    prompt_tokens = int(overrides.get("prompt_tokens", prompt_tokens))
    completion_tokens = int(overrides.get("completion_tokens", completion_tokens))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": int(overrides.get("cached_tokens", 0))},
    }
    model = str(body.get("model", "test-model"))
    completion_id = f"chatcmpl-fake-{number}"

    if body.get("stream") is True:
        return status, {"Content-Type": "text/event-stream", **extra_headers}, _sse(
            completion_id, model, message, finish, usage
        )
    payload = {
        "id": completion_id,
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return status, {"Content-Type": "application/json", **extra_headers}, json.dumps(payload).encode()


def render_embeddings(
    scripted: str | Mapping[str, Any] | None, body: Mapping[str, Any]
) -> tuple[int, dict[str, str], bytes]:
    """The ``/v1/embeddings`` reply: :func:`hashing_embedding` vectors unless ``scripted`` overrides the body."""
    if isinstance(scripted, Mapping) and any(key in scripted for key in ("status", "raw", "json")):
        return render_chat(scripted, body, 0)
    raw_input = body.get("input")
    texts = [raw_input] if isinstance(raw_input, str) else raw_input
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return error_reply(400, "'input' must be a string or a list of strings")
    dims = body.get("dimensions")
    dims = dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else 64
    as_base64 = body.get("encoding_format") == "base64"
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector = hashing_embedding(text, dims)
        encoded: Any = vector
        if as_base64:
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(_estimate(t) for t in texts)
    payload = {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "test-embedding")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _sse(
    completion_id: str, model: str, message: Mapping[str, Any], finish: str, usage: Mapping[str, Any]
) -> bytes:
    def chunk(delta: Mapping[str, Any], finish_reason: str | None, with_usage: bool) -> str:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        }
        if with_usage:
            data["usage"] = dict(usage)
        return f"data: {json.dumps(data)}\n\n"

    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if "tool_calls" in message:
        delta["tool_calls"] = [
            {"index": i, **call} for i, call in enumerate(message["tool_calls"])
        ]
    text = chunk(delta, None, False) + chunk({}, finish, True) + "data: [DONE]\n\n"
    return text.encode()
