"""Reading tool calls and tool output: a call's description and paths, an output's error lines.

Pure functions of one event's text and metadata; nothing here touches a collector.
"""

from __future__ import annotations

import json
import re
from typing import Final

from aiden.events import SessionEvent
from aiden.policy.toolresult import reported_failure
from aiden.summarizers.extractive.items import _TOOL_NOTE_CHARS
from aiden.summarizers.mustkeep import (
    clip,
    find_paths,
    is_strong_error_line,
    looks_like_error_line,
    normalize,
)

_ERROR_CHARS: Final = 200
_ERRORS_PER_RESULT: Final = 2
_SCAN_HEAD_LINES: Final = 4000
_SCAN_TAIL_LINES: Final = 1000

_COMMAND_KEYS: Final = ("command", "cmd", "script", "shell", "bash")
_EXCEPTION_LINE: Final = re.compile(
    r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::.*)?$"
)
_NOISE_LINE: Final = re.compile(r"^[\W_]+$")
_TRACEBACK_HEAD: Final = "traceback (most recent call last)"
_FILE_LINE: Final = re.compile(r'^\s*File "([^"]+)", line \d+')


def _describe_call(event: SessionEvent) -> tuple[str, bool, list[str]]:
    """``(description, is_shell_command, paths)`` of a tool_call event."""
    name = event.tool_name or "tool"
    raw = (event.tool_args or "").strip()
    args: object
    try:
        args = json.loads(raw) if raw else {}
    except ValueError:
        args = raw
    paths: list[str] = []
    if isinstance(args, dict):
        for key in _COMMAND_KEYS:
            value = args.get(key)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = " ".join(value)
            if isinstance(value, str) and value.strip():
                command = clip(value, 240)
                return f"$ {command}", True, find_paths(value)
        code = args.get("code")
        if isinstance(code, str) and code.strip():
            # Code execution: its output is scanned like a command's.
            return clip(f"{name}(code={clip(code, 80)})", 240), True, []
        parts: list[str] = []
        for key, value in args.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if isinstance(value, str) and ("path" in key.casefold() or "file" in key.casefold()):
                if value.strip():
                    paths.append(value.strip())
            else:
                paths.extend(find_paths(shown) if isinstance(value, str) else [])
            parts.append(f"{key}={clip(shown, 80)}")
        return clip(f"{name}({', '.join(parts)})", 240), False, paths
    text = clip(str(args), 160)
    return (f"{name}({text})" if text else f"{name}()"), False, find_paths(str(args))


def _error_lines(content: str, *, executed: bool) -> list[tuple[str, bool]]:
    """The informative error lines of one tool output: at most two ``(line, strong)`` pairs.

    A *strong* line starts like an error report (an exception class,
    ``error:``, ``FAILED``, ``npm ERR!``); a *weak* one merely mentions an
    error, as log lines do. Weak lines count only for tools that executed
    something (``executed``), and only when there is no strong one: in a file
    read or a search result they are just text that contains the word.
    """
    lines = content.splitlines()
    if len(lines) > _SCAN_HEAD_LINES + _SCAN_TAIL_LINES:
        lines = lines[:_SCAN_HEAD_LINES] + lines[-_SCAN_TAIL_LINES:]
    scored: list[tuple[int, int, str]] = []
    for position, line in enumerate(lines):
        stripped = line.strip()
        if (
            len(stripped) < 4
            or stripped.casefold().startswith(_TRACEBACK_HEAD)
            or _FILE_LINE.match(line)
            or not looks_like_error_line(stripped)
        ):
            continue
        strong = is_strong_error_line(stripped) or _EXCEPTION_LINE.match(stripped) is not None
        if strong or executed:
            scored.append((1 if strong else 0, position, stripped))
    strong_lines = [t for t in scored if t[0] == 1]
    pool = strong_lines or scored
    # The first error says what broke, the last one is usually the cause
    # ("npm ERR! code ERESOLVE" ... / a traceback's final exception line).
    ordered = [pool[0], pool[-1], *reversed(pool[1:-1])] if pool else []
    picked: list[tuple[int, str]] = []
    for _strength, position, stripped in ordered:
        candidate = clip(stripped, _ERROR_CHARS)
        if all(_digitless(candidate) != _digitless(p) for _, p in picked):
            picked.append((position, candidate))
            if len(picked) >= _ERRORS_PER_RESULT:
                break
    picked.sort()
    strong = bool(strong_lines)
    return [(text, strong) for _, text in picked]


def _digitless(text: str) -> str:
    # Log lines differ only in timestamps and counters; compare without digits.
    return re.sub(r"\d+", "#", normalize(text))


def _first_meaningful_line(content: str) -> str:
    for line in content[:20_000].splitlines()[:200]:
        stripped = line.strip()
        if len(stripped) >= 3 and not _NOISE_LINE.match(stripped):
            return clip(stripped, _TOOL_NOTE_CHARS)
    return ""


def _is_error_result(event: SessionEvent) -> bool:
    return reported_failure(event.meta) is True
