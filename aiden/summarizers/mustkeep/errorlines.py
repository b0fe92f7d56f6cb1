"""Error-line detection in tool output: which lines report or mention an error."""

from __future__ import annotations

import re
from typing import Final

from aiden.policy.toolresult import OS_REFUSAL

_STRONG_ERROR: Final = re.compile(
    r"^\s*(?:(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)(?::\s|:?$)"
    r"|(?i:error|fatal|panic)(?::|\[)|FAILED\b|FAIL:|E {2,}\S|npm ERR!|ERROR\b|\[(?i:error)\]"
    r"|Segmentation fault|Killed$|.*: command not found$|.*: No such file or directory$)"
)
_TOOL_ERROR: Final = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|crash(?:ed)?|panic|fatal|segfault|"
    rf"{OS_REFUSAL}|timed out|not found|no such file|unable to)\b"
    r"|\b\w+(?:Error|Exception)\b|错误|报错|异常|失败|崩溃",
    re.IGNORECASE,
)
_CODE_LINE: Final = re.compile(
    r"^\s*(?:def|class|import|from|return|raise|except|try|if|elif|else|for|while|with|assert|async|await|"
    r"#|//|/\*|\*|function|const|let|var|public|private|catch|throw)\b|^\s*[\w.\[\]'\"]+\s*[:+\-*/]?=\s"
)


def is_strong_error_line(line: str) -> bool:
    """True for a line shaped like an error report: ``ValueError: ...``, ``error: ...``, ``FAILED``, ``npm ERR!``."""
    return _STRONG_ERROR.match(line) is not None


def looks_like_error_line(line: str) -> bool:
    """True for a line of tool output that reports or mentions an error (code lines excluded)."""
    if _STRONG_ERROR.match(line):
        return True
    return _TOOL_ERROR.search(line) is not None and _CODE_LINE.match(line) is None
