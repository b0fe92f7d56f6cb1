"""One reading of a tool call's shell command, shared by recall and the summarizer (aiden.policy.shell)."""

from __future__ import annotations

import json

import pytest

from aiden.events import SessionEvent
from aiden.policy.shell import command_text, commands, program_words
from aiden.recall.commands import describe_call
from aiden.summarizers.extractive.tools import describe_call as summarizer_call


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({"command": "ls -la"}, "ls -la"),
        ({"cmd": "", "script": "make"}, "make"),
        ({"bash": "pytest -q"}, "pytest -q"),
        (["bash", "-lc", "ls -la"], "ls -la"),
        (["git", "status"], "git status"),
        ({"path": "a.py"}, ""),
        (42, ""),
    ],
)
def test_the_command_text_of_a_calls_arguments(args: object, text: str) -> None:
    assert command_text(args) == text


def test_commands_split_lists_never_quotes() -> None:
    assert commands("cd src && grep -rn 'a && b' . || echo none; ls\nmake") == [
        "cd src ", " grep -rn _ . ", " echo none", " ls", "make"
    ]
    assert commands("cat a | head -3") == ["cat a | head -3"]


def test_program_words_skip_wrappers_assignments_and_durations() -> None:
    assert program_words("sudo -E env DEBUG=1 timeout 60 pytest -q") == ["pytest", "-q"]
    assert program_words("  ") == []


def _call(args: dict[str, object], name: str = "bash") -> SessionEvent:
    return SessionEvent(type="tool_call", tool_name=name, tool_call_id="c1", tool_args=json.dumps(args))


@pytest.mark.parametrize("command", ["sudo cat /etc/hosts", "timeout 5 tail -n 20 app.log", "grep -n 'a|b' app.py"])
def test_a_reader_behind_a_wrapper_or_with_a_quoted_bar_only_reads(command: str) -> None:
    assert summarizer_call(_call({"command": command})).read_only is True


def test_both_readers_take_an_argument_vectors_script() -> None:
    call = _call({"command": ["bash", "-lc", "ls -la"]})
    assert summarizer_call(call).description == "$ ls -la"
    assert describe_call("shell", call.tool_args) == "list listing directory folder files"


@pytest.mark.parametrize(
    "command",
    [
        # a step after a reader's first line, a writer after an escaped quote: never dropped as a read
        "cd /app\nnpm install",
        "git status\ngit add -A\ngit commit -m wip",
        "grep -rln don\\'t docs/; sed -i \"s/don't/do not/g\" docs/guide.md",
        # a path named like a read subcommand, an arithmetic shift that is no here-document
        "git add -f log",
        "x=$((1<<SHIFT)); ls\nrm -rf cache",
        # a "<<EOF" in quotes is no here-document, an apostrophe in a comment opens no quote
        "grep -n '<<EOF' scripts/*.sh\nrm -f scripts/old_*.sh",
        "cat README.md # it's short\nsed -i 's/v1/v2/' README.md\ngrep -n 'v2' README.md",
        # a quoted " #" is no comment
        'grep -v "^ #" notes.md > clean.md',
        'git log --oneline --grep="fixes #12"; git revert --no-edit abc123',
        # a "<<EOF" in a comment is no here-document
        "ls /etc/app  # then cat <<EOF the new config\nrm -f /etc/app/old.conf",
    ],
)
def test_a_command_that_writes_after_a_reader_is_no_read(command: str) -> None:
    assert summarizer_call(_call({"command": command})).read_only is False


@pytest.mark.parametrize(
    "command",
    [
        "ls -la\n# show the config\ncat config.yml",
        "cat \\\n  config.yml",
        "git -C repo log -3",
        "sudo -u postgres cat /var/lib/postgresql/16/main/postgresql.auto.conf",
        # sudo's -n takes no value; a quoted here-document terminator
        "sudo -n cat /var/log/secure",
        "cat <<'EOF'\nUsage: deploy.sh ENV\nEOF",
    ],
)
def test_comments_continuations_and_options_leave_a_read_a_read(command: str) -> None:
    assert summarizer_call(_call({"command": command})).read_only is True


def test_a_here_documents_body_is_no_command() -> None:
    assert summarizer_call(_call({"command": "cat <<EOF\nrm -rf build\nEOF"})).read_only is True
