"""A command whose output says it failed is a failed approach, never a working recipe.

Shapes of real agent-tool output that carry no error word, or only a weak one: a CTF checker's
"Wrong flag!", a harness's "EXECUTION TIMED OUT", perror's "strings: 'x.img': No such file", dash's
"sh: 1: foo: not found", a compiler's "a.c:3:5: error: ...", pytest's closing tally. And the
successful outputs that merely mention an error, which stay recipes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config
from aiden.events import SessionEvent
from tests.summarizers.sections import session_sections

BUDGET = 2000


def _ran(command: str, output: str, call_id: str = "c1") -> list[SessionEvent]:
    return [
        SessionEvent(type="tool_call", tool_name="bash", tool_call_id=call_id, tool_args=f'{{"command": "{command}"}}'),
        SessionEvent(type="tool_result", tool_name="bash", tool_call_id=call_id, content=output),
    ]


def _session(command: str, output: str) -> dict[str, list[str]]:
    events = [SessionEvent(type="user_input", content="Find the flag in the image and submit it."), *_ran(command, output)]
    return session_sections(events, BUDGET)


# (command, output, the error line the failure is filed with). Each was a WORKING RECIPE before.
FAILURES = [
    # SWE-agent's CTF checker (held-out ctf-eps, ctf-katy, ctf-rock)
    ("submit flag{wrong}", "Wrong flag!\n", "Wrong flag!"),
    # SWE-agent's harness (ctf-rock, ctf-katy), and its long form with the advice after it (ctf-BabyTimeCapsule)
    ("./rock", "EXECUTION TIMED OUT\n", "EXECUTION TIMED OUT"),
    (
        "python attack.py",
        "[*] Performing lehmer attack.\n"
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 60.0 SECONDS.\n"
        "PLEASE REFINE YOUR RUNNING COMMAND SO IT WILL PRODUCE OUTPUT IN THE SPECIFIED TIME FRAME.",
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 60.0 SECONDS.",
    ),
    # perror shapes without "or directory" at the end (ctf-flash, ctf-eps)
    ("strings x.img", "strings: 'x.img': No such file\n", "strings: 'x.img': No such file"),
    (
        "file ~/ctf_files/*",
        "/root/ctf_files/*: cannot open `/root/ctf_files/*' (No such file or directory)\n",
        "/root/ctf_files/*: cannot open `/root/ctf_files/*' (No such file or directory)",
    ),
    ("foo --version", "sh: 1: foo: not found\n", "sh: 1: foo: not found"),
    ("curl http://nope.invalid", "curl: (6) Could not resolve host: nope.invalid\n", "curl: (6) Could not resolve host: nope.invalid"),
    # SWE-agent's refused edit whose lint finding has no error word (ctf-BabyEncryption)
    (
        "edit 2:2",
        "Your proposed edit has introduced new syntax error(s).\n\nERRORS:\n- F821 undefined name 'binascii'\n\n"
        "Your changes have NOT been applied. Please fix your edit command and try again.\n"
        "DO NOT re-run the same failed edit command. Running it again will lead to the same error.",
        "Your changes have NOT been applied. Please fix your edit command and try again.",
    ),
    # a compiler's diagnostic ends in source context, not in an error line
    (
        "gcc a.c",
        "a.c: In function 'main':\na.c:3:5: error: expected ';' before '}' token\n    3 | int x\n      |     ^",
        "a.c:3:5: error: expected ';' before '}' token",
    ),
    ("pytest -q", "..F.\n1 failed, 3 passed in 0.05s\n", "1 failed, 3 passed in 0.05s"),
]


@pytest.mark.parametrize(("command", "output", "error"), FAILURES, ids=[f[0] for f in FAILURES])
def test_a_command_whose_output_says_it_failed_is_a_failed_approach(command: str, output: str, error: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == ["(none)"]
    assert sections["FAILED APPROACHES"] == [f"$ {command} failed: {error}"]


SUCCESSES = [
    ("python reproduce_bug.py", "Script completed successfully, no errors. Result: True"),
    ("pytest -q tests/test_io.py", "tests/test_io.py::test_no_such_file PASSED\ntests/test_io.py::test_timed_out PASSED\n2 passed in 0.01s"),
    ("mypy src", "Success: no issues found in 12 source files\n0 errors"),
    ("python tools/find_refs.py", "src/app.py:88:        raise FileNotFoundError('No such file')\nsrc/log.py:12:    logger.error('timed out')"),
    ("python client.py", "Timeout set to 30s\nconnected"),
    ("python sync.py", "2024-01-01 12:00:01 WARNING retrying after error: timed out\n2024-01-01 12:00:02 INFO connected\ndone"),
    ("python exploit.py", "Warning: _curses.error: setupterm: could not find terminfo database\nFLAG{LET_US_BEGIN}"),
    (
        "decompile rock",
        "Function main not found! Instead, here is the decompilation of equivalent function FUN_1:\nint FUN_1(void)\n{\n  return 0;\n}",
    ),
    ("python stats.py", "Invalid entries: 0"),
]


@pytest.mark.parametrize(("command", "output"), SUCCESSES, ids=[s[0] for s in SUCCESSES])
def test_a_successful_output_that_mentions_errors_stays_a_working_recipe(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == [f"$ {command}"]
    assert sections["FAILED APPROACHES"] == ["(none)"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_project_memory_lists_a_rejected_flag_as_failed_not_as_a_recipe(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none")) as memory:
        await memory.begin_run("Find the flag in flash.img and submit it.")
        await memory.append_many(
            [
                *_ran("strings flash.img", "strings: 'flash.img': No such file", "a"),
                *_ran("unzip flash.zip", "Archive:  flash.zip\n  inflating: flash.img", "b"),
                *_ran("submit flag{b3l0w}", "Wrong flag!", "c"),
            ]
        )
        await memory.commit_run("The flag was rejected.")
        await memory.begin_run("Next task.", new_session=True)  # the flag session is summarized at rotation
        await memory.commit_run("Noted.")
        layer = memory.long_term_layer
    failed = layer.split("FAILED APPROACHES (do not repeat)\n", 1)[1].split("\n\n", 1)[0]
    recipes = layer.split("WORKING RECIPES\n", 1)[1].split("\n\n", 1)[0]
    assert failed.splitlines() == [
        "- $ strings flash.img failed: strings: 'flash.img': No such file",
        "- $ submit flag{b3l0w} failed: Wrong flag!",
    ]
    assert recipes.splitlines() == ["- $ unzip flash.zip"]

