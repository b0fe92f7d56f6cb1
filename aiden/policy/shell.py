"""Reading the shell command a tool call ran (pure): its text, its commands, each one's program.

Two readers need the same reading of a call: recall describes what a command did (``ls`` lists a
directory) and the summarizer judges whether a command only read and whose words its output's last
lines are. Both take the command's text from the call's arguments with :func:`command_text`, see
the commands of a list or pipeline with :func:`commands`, and find each one's program with
:func:`program_words`; the summarizer reads a whole command as a script with :func:`script`
(here-documents, comments, continuations; recall reads its first line). So a wrapper (``sudo``, ``timeout 60``, ``env X=1``) or an argument vector
(``["bash", "-lc", "ls -la"]``) is read the same way by both.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["AMPERSAND", "QUOTED", "command_text", "command_words", "commands", "program_words", "script"]

_COMMAND_KEYS: Final = ("command", "cmd", "script", "shell", "bash")
"""The argument names under which agent tools pass a shell command."""
QUOTED: Final = re.compile(r"(?<!\\)'[^']*'|(?<!\\)\"(?:[^\"\\]|\\.)*\"")
"""A quoted argument: separators inside it are no list's (``echo 'a && rm x'`` runs no rm); an escaped
quote outside quotes (``grep don\\'t f``) starts none."""
# ... and a lone "&": what it backgrounds runs beside the next command (``tail -f log & npm start`` runs npm),
# not a redirect's ("2>&1", "&>", ">&2", "|&"), an escaped one ("AT\\&T"), one before "wait" or "sleep N", nor
# one inside "$(echo a & echo b)"
AMPERSAND: Final = r"(?<![&>|\\])&(?![&>])(?!\s*(?:wait|sleep)\b)(?![^()\n]{0,200}\))"
_SEPARATORS: Final = re.compile(rf"&&|\|\||{AMPERSAND}|[;\n]")
_HEREDOC: Final = re.compile(r"(?<![<\w])<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?")  # not "<<<", not "$((1<<N))"
_SCRIPT_CHARS: Final = 20_000
"""Most characters of a command read as a script (:func:`script`)."""
# Words before the command proper: wrappers, and (matched apart) their options, ``VAR=value``
# assignments and durations (``timeout 60 pytest``).
_PREFIXES: Final = frozenset({"sudo", "time", "timeout", "nohup", "env", "exec", "command", "xargs", "nice"})
_SKIPPED: Final = re.compile(r"-|[A-Za-z_][A-Za-z0-9_]*=|[\d.]+[smhd]?$")
# Each wrapper's options that take the next word as their value (sudo -u www-data, timeout -s KILL)
_VALUE_OPTIONS: Final = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "timeout": frozenset({"-s", "-k"}),
    "nice": frozenset({"-n"}),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"}),
}


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
    ``a & b``, one a line), each maybe a pipeline (``a | b``: split it at ``|``); quoted text is masked (``_``)."""
    return [part for part in _SEPARATORS.split(QUOTED.sub("_", text)) if part.strip()]


def program_words(command: str) -> list[str]:
    """One command's words from its program on: wrappers, their options (with a value: ``sudo -u www-data``),
    assignments and durations skipped."""
    words = command.split()
    wrapper = ""
    while words and (words[0] in _PREFIXES or _SKIPPED.match(words[0])):
        if words[0] in _PREFIXES:
            wrapper = words[0]
        words = words[2:] if words[0] in _VALUE_OPTIONS.get(wrapper, ()) else words[1:]
    return words


def command_words(text: str) -> list[list[str]]:
    """Each command's words from its program on, a pipeline's every command too (``cat a | grep b``: two)."""
    return [words for part in commands(text) for piece in part.split("|") if (words := program_words(piece))]


def script(text: str) -> str:
    """A shell command's text as its commands are read (its first 20,000 characters): here-document bodies
    dropped (data), line continuations joined, comments stripped, quoted text masked (``''``)."""
    text = _without_heredocs(text[:_SCRIPT_CHARS].replace("\\\n", " "))
    return QUOTED.sub("''", "\n".join(_without_comment(line) for line in text.splitlines()))


def _without_heredocs(command: str) -> str:
    """``command`` without its here-documents' bodies (the lines up to each one's terminator)."""
    kept: list[str] = []
    end = ""
    for line in command.split("\n"):
        if end:
            end = "" if line.strip() == end else end
            continue
        kept.append(line)
        code = _without_comment(line)  # (not a "<<EOF" in a comment or in quotes; "<<'EOF'" is one)
        quoted = [m.span() for m in QUOTED.finditer(code)]
        heredoc = next((h for h in _HEREDOC.finditer(code) if not any(a <= h.start() < b for a, b in quoted)), None)
        if heredoc:
            end = heredoc.group(1)
    return "\n".join(kept)


def _without_comment(line: str) -> str:
    """``line`` up to its comment: a ``#`` after a blank, outside quotes (an apostrophe in the comment,
    "# what's left", opens no quote; a quoted "^ #" is no comment)."""
    if "#" not in line:
        return line
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote and line[i - 1] != "\\" else quote
        elif char in "'\"" and (i == 0 or line[i - 1] != "\\"):
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line
