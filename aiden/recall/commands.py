"""What a tool call does, in the words a question about it uses: indexed (hidden) with its tool result.

An agent's question about its own work asks in words for what it did with commands: "what did the
directory listing show?" (the output of ``ls``), "what did the script print?" (of ``python x.py``),
"what did the search find?" (of ``grep``). Such an output holds none of those words, and its call
(``{"command": "ls -F"}``) only a command name. :func:`describe_call` names the kind of each
command of a call by what the common shell and agent tools do (general knowledge of the tools,
not of any session), and the index stores those words beside the result
(:func:`~aiden.recall.query.index_text`): never shown, only searched. Pure.
"""

from __future__ import annotations

import json
import re
from typing import Final

from aiden.policy.shell import command_text, commands, program_words

__all__ = ["describe_call"]

_LIST: Final = "list listing directory folder files"
_SHOW: Final = "view read file content"
_SEARCH: Final = "search find found match"
_RUN: Final = "script program print"
_TEST: Final = "test tests testing"
_INSTALL: Final = "install package dependency"
_EDIT: Final = "edit change modify file"
_CREATE: Final = "create new file"
_REMOVE: Final = "remove delete"
_BUILD: Final = "build compile"
_LINT: Final = "lint check"
_FETCH: Final = "download fetch request response"

# A command's first word (or a tool's name, or a word of it) -> what it does.
_KINDS: Final = {
    **dict.fromkeys(("ls", "dir", "tree", "exa", "eza", "list"), _LIST),
    **dict.fromkeys(("cat", "head", "tail", "less", "more", "bat", "nl", "open", "view", "read", "goto"), _SHOW),
    **dict.fromkeys(("scroll_up", "scroll_down", "xxd", "hexdump", "strings", "od"), _SHOW),
    **dict.fromkeys(("grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "search", "glob"), _SEARCH),
    **dict.fromkeys(("pytest", "tox", "nox", "unittest", "jest", "mocha", "vitest", "test", "tests"), _TEST),
    **dict.fromkeys(("edit", "str_replace", "replace", "insert", "patch", "apply_patch", "write", "sed"), _EDIT),
    **dict.fromkeys(("create", "touch", "mkdir"), _CREATE),
    **dict.fromkeys(("rm", "rmdir", "unlink", "delete"), _REMOVE),
    **dict.fromkeys(("make", "cmake", "gcc", "g++", "clang", "javac", "tsc", "build", "compile"), _BUILD),
    **dict.fromkeys(("flake8", "ruff", "mypy", "pylint", "eslint", "pyright", "lint"), _LINT),
    **dict.fromkeys(("curl", "wget", "http", "fetch"), _FETCH),
    **dict.fromkeys(("python", "python3", "node", "ruby", "perl", "php", "java", "deno", "bun"), _RUN),
    **dict.fromkeys(("bash", "sh", "zsh"), _RUN),  # with a script to run (``bash build.sh``)
    "echo": "print",
    "printf": "print",
    "wc": "count lines",
    "diff": "diff difference",
    "submit": "submit diff patch",
}
# A tool's name (``read_file``, ``search_dir``) or an agent command (``find_file``) is described by its
# verb only when it names what it acts on: ``read_email`` or ``list_issues`` reads or lists no file.
_OBJECTS: Final = frozenset({"file", "files", "dir", "directory", "folder", "path", "paths"})
_ANY_OBJECT: Final = frozenset({_SEARCH, _REMOVE, _FETCH, _TEST})
"""Kinds whose words fit whatever a tool acts on (``search_flights`` searches)."""
_PIP: Final = {"install": _INSTALL, "list": "list installed package version", "show": "package version"}
# A program whose next word (its subcommand, or the module after ``-m``) says what it does.
_SUBCOMMANDS: Final = {
    "pip": _PIP,
    "pip3": _PIP,
    "git": {
        "diff": "diff change", "log": "history commit", "status": "status change", "show": "commit",
        "grep": _SEARCH, "blame": "blame history", "checkout": "checkout branch", "apply": "apply patch",
    },
    "npm": {"install": _INSTALL, "test": _TEST, "run": _RUN},
    "yarn": {"add": _INSTALL, "install": _INSTALL, "test": _TEST},
    "cargo": {"test": _TEST, "build": _BUILD, "run": _RUN, "add": _INSTALL},
    "go": {"test": _TEST, "build": _BUILD, "run": _RUN, "get": _INSTALL},
    "poetry": {"install": _INSTALL, "add": _INSTALL, "run": _RUN},
    "uv": {"pip": _INSTALL, "add": _INSTALL, "run": _RUN},
    "conda": {"install": _INSTALL},
    "apt": {"install": _INSTALL},
    "apt-get": {"install": _INSTALL},
    "brew": {"install": _INSTALL},
    "gem": {"install": _INSTALL},
}
_WRITE: Final = re.compile(r"(?<![\d&])>(?!&)")
"""A redirect of the output to a file (not ``2>``, ``&>`` or ``>&2``)."""
_LINE_CHARS: Final = 200
"""Most characters of a call's command read (of its first line: not a heredoc's body)."""
_MAX_COMMANDS: Final = 8


def describe_call(tool_name: str | None, tool_args: str | None) -> str:
    """Words telling what a tool call does (``"list listing directory folder files"`` for ``ls -F``).

    ``tool_name`` and ``tool_args`` as a tool call event carries them (arguments as JSON text, or
    any text). A shell command (``{"command": "cd src && grep -rn foo ."}``) is described by the
    commands of its first line; a tool of its own (``find_file``, ``open``) by its name's words, or
    its ``command`` argument (``str_replace_editor``'s ``view``). Only the kinds, never the
    command's own words: those are in the call, and on every output of a command run often (``git``)
    they would make each of them match a question naming it. Empty when nothing is known.
    """
    # Of a pipeline only the first command is described: the rest filter its output.
    kinds = [k for command in commands(_arguments(tool_args))[:_MAX_COMMANDS] if (k := _kind(command.split("|", 1)[0]))]
    if tool_name and not kinds:
        # A tool of its own (``find_file``, ``open``), never a generic shell's name (``bash``): a command
        # it ran that is not known is no script print.
        kinds = [k for k in (_named(tool_name.lower()),) if k]
    return " ".join(dict.fromkeys(word for kind in kinds for word in kind.split()))


def _named(name: str) -> str:
    """What a tool or agent command named ``name`` does: a known name, else a verb of the name that fits
    what it acts on (``search_flights``, ``read_file``: not ``read_email``); ``""`` for one that runs something."""
    words = re.split(r"[\W_]+", name)
    on_files = _OBJECTS.intersection(words)
    known = [_KINDS.get(name, ""), *(k for w in words if (k := _KINDS.get(w, "")) and (on_files or k in _ANY_OBJECT))]
    return next((k for k in known if k and k != _RUN), "")


def _arguments(tool_args: str | None) -> str:
    """The first line of the call's command (``""`` if its arguments carry none)."""
    if not tool_args:
        return ""
    try:
        args = json.loads(tool_args)
    except ValueError:
        args = tool_args
    return command_text(args).strip().split("\n", 1)[0][:_LINE_CHARS]


def _kind(command: str) -> str:
    """What one command does: ``""`` when unknown."""
    words = program_words(command)
    if not words:
        return ""
    program = words[0].rsplit("/", 1)[-1].lower()
    if program.startswith("python") and len(words) > 2 and words[1] == "-m":
        # ``python -m pytest``, ``python -m pip install``: the module is the command.
        words = words[2:]
        program = words[0].lower()
    elif re.fullmatch(r"python[\d.]*", program):
        program = "python"
    rest = [w for w in words[1:] if not w.startswith("-")]
    if program in _SUBCOMMANDS:
        return _SUBCOMMANDS[program].get(rest[0].lower(), "") if rest else ""
    if program in ("cat", "echo", "printf") and _WRITE.search(command):
        return _CREATE  # cat <<EOF > x.py, echo text >> x: writes a file
    if program == "sed" and not any(w.startswith("-i") for w in words[1:]):
        return _SHOW  # sed -n '10,20p' file: prints lines; only -i edits
    if program in ("bash", "sh", "zsh") and not rest:
        return ""
    if words[0].startswith("./") or program.endswith((".py", ".sh", ".js")):
        return _RUN
    return _KINDS.get(program) or _named(program)
