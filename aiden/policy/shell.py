"""Reading the shell command a tool call ran (pure): its text, its commands, each one's program.

Two readers need the same reading of a call: recall describes what a command did (``ls`` lists a
directory) and the summarizer judges whether a command only read and whose words its output's last
lines are. Both take the command's text from the call's arguments with :func:`command_text`, see
the commands of a list or pipeline with :func:`commands`, and find each one's program with
:func:`program_words`, so a wrapper (``sudo``, ``timeout 60``, ``env X=1``) or an argument vector
(``["bash", "-lc", "ls -la"]``) is read the same way by both.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["QUOTED", "command_text", "commands", "program_words"]

_COMMAND_KEYS: Final = ("command", "cmd", "script", "shell", "bash")
"""The argument names under which agent tools pass a shell command."""
QUOTED: Final = re.compile(r"(?<!\\)'[^']*'|(?<!\\)\"(?:[^\"\\]|\\.)*\"")
"""A quoted argument: separators inside it are no list's (``echo 'a && rm x'`` runs no rm); an escaped
quote outside quotes (``grep don\\'t f``) starts none."""
_SEPARATORS: Final = re.compile(r"&&|\|\||[;\n]")
# Words before the command proper: wrappers, and (matched apart) their options, ``VAR=value``
# assignments and durations (``timeout 60 pytest``).
_PREFIXES: Final = frozenset({"sudo", "time", "timeout", "nohup", "env", "exec", "command", "xargs", "nice"})
_SKIPPED: Final = re.compile(r"-|[A-Za-z_][A-Za-z0-9_]*=|[\d.]+[smhd]?$")
# The wrappers' options that take the next word as their value (sudo -u/-g, env -u, timeout -s/-k, nice -n,
# xargs -a/-d/-I/-L/-n/-P)
_VALUE_OPTIONS: Final = frozenset({"-u", "-g", "-s", "-k", "-n", "-a", "-d", "-I", "-L", "-P"})


def command_text(args: object) -> str:
    """The shell command a call's parsed arguments carry: the value of its first command key, a whole
    argument vector's words, or an argument vector's script (``["bash", "-lc", "ls -la"]``, as Codex
    sends it); ``""`` when they carry none."""
    if isinstance(args, dict):
        args = next((v for k in _COMMAND_KEYS if isinstance(v := args.get(k), str | list) and v), "")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        args = args[-1] if args[-2:-1] in (["-c"], ["-lc"]) else " ".join(args)
    return args if isinstance(args, str) else ""


def commands(text: str) -> list[str]:
    """The commands of a shell command's text, in order: those of a list (``a && b``, ``a; b``, ``a || b``,
    one a line), each maybe a pipeline (``a | b``: split it at ``|``); quoted text is masked (``_``)."""
    return [part for part in _SEPARATORS.split(QUOTED.sub("_", text)) if part.strip()]


def program_words(command: str) -> list[str]:
    """One command's words from its program on: wrappers, their options (with a value: ``sudo -u www-data``),
    assignments and durations skipped."""
    words = command.split()
    while words and (words[0] in _PREFIXES or _SKIPPED.match(words[0])):
        words = words[2:] if words[0] in _VALUE_OPTIONS and len(words) > 1 else words[1:]
    return words

