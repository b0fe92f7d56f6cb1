"""What a person resuming does not need (#19): read-only calls, and tool-output lines shaped like noise.

A read-only call (``read_file(path=...)``, ``$ cat x``, ``search(pattern=...)``)
changes nothing and is never a step to redo: its file is under ``Files:``
already, its result is what mattered. Output lines shaped like log records,
code, docstrings, structured-data fragments or numbered file views are
content the agent looked at, not a finding. Pure functions of text.
"""

from __future__ import annotations

import re
from typing import Final

from aiden.summarizers.mustkeep import find_paths

# A tool whose name reads like one of these verbs, and none of the writing ones, only looks.
_READ_VERBS: Final = frozenset(
    {
        "read", "view", "open", "cat", "show", "list", "ls", "search", "grep", "find", "glob",
        "locate", "stat", "head", "tail", "inspect", "goto", "scroll", "tree", "recall",
    }
)  # fmt: skip
_WRITE_VERBS: Final = frozenset(
    {
        "write", "edit", "create", "delete", "remove", "rm", "run", "exec", "execute", "apply",
        "patch", "replace", "insert", "move", "mv", "rename", "update", "set", "install",
        "commit", "push", "submit", "save", "append", "str", "make", "mkdir", "touch",
    }
)  # fmt: skip
# Shell programs (and SWE-agent's file-viewer commands) that only print.
_READ_PROGRAMS: Final = frozenset(
    {
        "cat", "head", "tail", "less", "more", "ls", "ll", "tree", "find", "grep", "egrep",
        "fgrep", "rg", "ag", "ack", "wc", "file", "stat", "du", "pwd", "which", "whereis", "cd",
        "nl", "open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file",
    }
)  # fmt: skip
_GIT_READS: Final = frozenset({"status", "log", "diff", "show", "blame", "ls-files", "grep"})
_SHELL_SEPARATOR: Final = re.compile(r"&&|\|\||[;|\n]")
_SHELL_WRITES: Final = re.compile(r">|\s-(?:delete|exec|execdir|ok|fprint)\b")
_HARMLESS_REDIRECT: Final = re.compile(r"\d?>&\d|\d?>\s*/dev/null")
_NAME_WORDS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_TOOL_LINE: Final = re.compile(r"^(?P<name>[\w.-]+)\((?P<args>.*)\)$", re.DOTALL)


def is_read_only_tool(name: str) -> bool:
    """True for a tool named like a reader (``read_file``, ``search``, ``listDir``), never for a writer."""
    words = {w.casefold() for w in _NAME_WORDS.findall(name)}
    return bool(words & _READ_VERBS) and not words & _WRITE_VERBS


def is_read_only_shell(command: str) -> bool:
    """True for a shell command whose every part only prints (``cat a.py | head``, ``git diff``)."""
    if _SHELL_WRITES.search(_HARMLESS_REDIRECT.sub(" ", command)):
        return False
    parts = [p.split() for p in _SHELL_SEPARATOR.split(command)]
    parts = [p for p in parts if p]
    if not parts:
        return False
    for words in parts:
        program = words[0].rsplit("/", 1)[-1]
        if program == "git":
            if len(words) < 2 or words[1] not in _GIT_READS:
                return False
        elif program not in _READ_PROGRAMS:
            return False
    return True


def is_read_only_command(line: str) -> bool:
    """True for a rendered ``Commands:`` line (``$ cmd`` or ``tool(args)``) that only reads."""
    if line.startswith("$ "):
        return is_read_only_shell(line[2:])
    match = _TOOL_LINE.match(line)
    return match is not None and is_read_only_tool(match.group("name"))


def command_targets(line: str) -> list[str]:
    """The file paths a rendered command line names."""
    return find_paths(line[2:] if line.startswith("$ ") else line)


# A numbered line of a file view: "273:", "  12 | ...", cat -n.
_VIEW_LINE: Final = re.compile(r"^\s*\d+(?::(?!\d)|\s*[|\u2502\t])")
_LOG_RECORD: Final = re.compile(
    r"^\s*(?:[\[(]?\d{4}-\d\d-\d\d(?:[T ][\d:.,]+\S*)?[\])]?\s+)?(?:[\[(]\s*)?"
    r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING)\b"
)
_CODE_SHAPED: Final = re.compile(
    r"^\s*(?:\"\"\"|'''|#|//|/\*|\*|<!--|```)"  # docstrings, comments, fences
    r"|^\s*(?:def|class|import|from|return|raise|async|await|function|const|let|var|public|private|package)\b"
    r"|^\s*[\w.\[\]'\"]+\s*[:+\-*/]?=\s"  # assignments
    r"|^\s*\"[^\"]*\"\s*:"  # a JSON key (a search hit's "path": ...)
    r"|^\s*[\[{]"  # the start of structured data
    rf"|{_VIEW_LINE.pattern}"
    r"|^\[File: .*\]$"  # SWE-agent's file-view header
)


def is_noise_shaped(line: str) -> bool:
    """True for an output line that is content looked at, not a finding: a log record below error level,
    code, a docstring or comment, a structured-data fragment, a numbered file-view line."""
    return _LOG_RECORD.match(line) is not None or _CODE_SHAPED.match(line) is not None


def is_file_view_line(line: str) -> bool:
    """True for a numbered line of a file view (``273: raise ValueError(``): file content, not output."""
    return _VIEW_LINE.match(line) is not None


_NEGATED: Final = re.compile(
    r"\b(?:no|0|zero|without)\s+(?:errors?|failures?|exceptions?|problems?)\b|\b0 (?:failed|errors?)\b"
    r"|\berror[- ]free\b|\bsuccessfully\b",
    re.IGNORECASE,
)


def negates_error(text: str) -> bool:
    """True for text that mentions errors only to deny them ("completed successfully, no errors")."""
    return _NEGATED.search(text) is not None
