"""Tool-output stubs: the short text that stands in for a trimmed tool result in one prompt.

A stub names the tool and its arguments, the original size, a head/tail
excerpt, and the ``seq`` under which the verbatim output stays stored, so the
agent can re-run the tool or recall it. Stubs are deterministic: the same
event always renders the same stub, so a stubbed prefix stays cacheable.
"""

from __future__ import annotations

import json
import re
from typing import Final

from aiden.events import SessionEvent

__all__ = ["DEFAULT_HEAD_CHARS", "DEFAULT_TAIL_CHARS", "STUB_PREFIX", "render_stub", "stub_seq"]

STUB_PREFIX: Final = "[tool output trimmed, seq "
"""Every stub starts with this text followed by the seq of the stored original."""

DEFAULT_HEAD_CHARS: Final = 400
"""Characters of the original output's beginning a stub shows (snapped to a line end)."""

DEFAULT_TAIL_CHARS: Final = 200
"""Characters of the original output's end a stub shows (snapped to a line start)."""

_ELISION: Final = "\n[...]\n"
_STUB_SEQ: Final = re.compile(re.escape(STUB_PREFIX) + r"(\d+):")
_MAX_ARG_VALUE_CHARS: Final = 80
_MAX_ARGS_CHARS: Final = 200


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _render_args(tool_args: str | None) -> str:
    if not tool_args:
        return ""
    try:
        parsed = json.loads(tool_args)
    except ValueError:
        return _clip(" ".join(tool_args.split()), _MAX_ARGS_CHARS)
    if isinstance(parsed, dict):
        parts = [
            f"{key}={_clip(json.dumps(value, ensure_ascii=False), _MAX_ARG_VALUE_CHARS)}"
            for key, value in parsed.items()
        ]
        return _clip(", ".join(parts), _MAX_ARGS_CHARS)
    return _clip(json.dumps(parsed, ensure_ascii=False), _MAX_ARGS_CHARS)


def _excerpt(text: str, head_chars: int, tail_chars: int) -> str:
    """Head and tail of ``text``, cut at line ends when one is close, joined by an elision mark."""
    if len(text) <= head_chars + tail_chars + len(_ELISION):
        return text
    head = text[:head_chars]
    cut = head.rfind("\n")
    if cut >= head_chars // 2:
        head = head[:cut]
    tail = text[len(text) - tail_chars :] if tail_chars > 0 else ""
    cut = tail.find("\n")
    if 0 <= cut < tail_chars // 2:
        tail = tail[cut + 1 :]
    if not head and not tail:
        return ""
    return "\n".join(part for part in (head, "[...]", tail) if part)


def render_stub(
    result: SessionEvent,
    call: SessionEvent | None,
    *,
    tokens: int,
    head_chars: int = DEFAULT_HEAD_CHARS,
    tail_chars: int = DEFAULT_TAIL_CHARS,
) -> str:
    """The prompt text that stands in for ``result`` (a stored tool result) once it is trimmed.

    ``call`` is the tool call it answers (its name and arguments are shown),
    ``tokens`` the original content's estimated size. Deterministic: the same
    event always gives the same stub, so a stubbed prefix stays cacheable.
    """
    name = result.tool_name or (call.tool_name if call is not None else None) or "tool"
    args = _render_args(call.tool_args if call is not None else None)
    content = result.content
    header = (
        f"{STUB_PREFIX}{result.seq}: {name}({args}) returned {len(content):,} chars"
        f" ~{tokens:,} tokens. Re-run the tool, or call recall_session_chunks with"
        f" seqs=[{result.seq}], to see it in full.]"
    )
    excerpt = _excerpt(content, max(0, head_chars), max(0, tail_chars))
    return f"{header}\n{excerpt}" if excerpt else header


def stub_seq(content: str) -> int | None:
    """The seq a stub made by :func:`render_stub` names; None when ``content`` is not a stub."""
    match = _STUB_SEQ.match(content)
    return int(match.group(1)) if match else None
