"""More of the shapes agents meet: a command that writes is a step (never dropped as a read), and a tool's
own verdict (ansible, dotnet test, the AWS CLI, jq, sed, awk) files a command as failed, while a run that
only got past a failure (ansible's ignored or rescued task) stays a working recipe."""

from __future__ import annotations

import json

import pytest

from aiden.events import SessionEvent
from aiden.policy.shell import command_words
from aiden.summarizers.extractive.tools import describe_call, is_read_only_command


def _read_only(command: str) -> bool:
    event = SessionEvent(type="tool_call", tool_name="bash", tool_call_id="c1", tool_args=json.dumps({"command": command}))
    return describe_call(event).read_only


# Each writes a file or runs a program beside a read: a step to redo, not a file read (each was read-only).
WRITES = [
    "find . -name '*.pyc' -fprintf out.txt '%p\\n'",
    "find . -type f -fprint0 files.bin",
    "find . -type f -fls listing.txt",
    "find . -name '*.pyc' -okdir rm {} ;",
    "git diff --output=patch.diff",
    "git diff main --output patch.diff",
    "git -C repo log -p --output=log.txt",
    "tree -o tree.txt",
    "tree -L 2 -o tree.txt",
    "ls & rm -rf build",
    "tail -f app.log & npm start",
]


@pytest.mark.parametrize("command", WRITES)
def test_a_command_that_writes_is_no_read(command: str) -> None:
    assert not _read_only(command)
    assert not is_read_only_command(f"$ {command}")


# Reads that look like the writes above: still reads.
READS = [
    "tail -f app.log &",
    "ls 2>&1 | head",
    "cat a.txt &> /dev/null",
    "find . -name '*.log' -newer stamp -print",
    "git diff --stat",
    "git log --oneline --no-merges",
    "tree -L 2 -I node_modules",
    "ls -la --sort=size -o",
    "grep -o 'error [0-9]*' app.log",
]


@pytest.mark.parametrize("command", READS)
def test_a_read_stays_a_read(command: str) -> None:
    assert _read_only(command)


def test_a_backgrounded_command_runs_beside_the_next() -> None:
    assert command_words("tail -f log & npm start") == [["tail", "-f", "log"], ["npm", "start"]]
    assert command_words("make 2>&1 | tee log") == [["make", "2>&1"], ["tee", "log"]]
    assert command_words("make &> log && ls") == [["make", "&>", "log"], ["ls"]]
