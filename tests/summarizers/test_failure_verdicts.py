"""A command whose output says it failed is a failed approach, never a working recipe.

Shapes of real agent-tool output that carry no error word, or only a weak one: a harness's "EXECUTION
TIMED OUT" and refused edit, perror's "strings: 'x.img': No such file", dash's "sh: 1: foo: not found",
curl's "(6) Could not resolve host", a compiler's "a.c:3:5: error: ..." with its source line, pytest's
closing tally. And successful outputs with failure-shaped lines (container noise, retries that then
succeeded, validation tests, logs, diffs and fixtures being read), which stay recipes: a filed failure
says "do not repeat", so a false one costs more than a missed one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, ExtractiveSummarizer
from aiden.events import SessionEvent
from aiden.summarizers.protocol import SummaryRequest
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
    ("foo --version", "zsh: command not found: foo\n", "zsh: command not found: foo"),
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


@pytest.mark.parametrize(("command", "output", "error"), FAILURES, ids=[f[2][:40] for f in FAILURES])
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
    # container noise: sudo without a resolvable host name, a shell without a locale or a terminal
    ("sudo systemctl restart nginx", "sudo: unable to resolve host 3f2a1b9c: Name or service not known\n"),
    ("sudo -u postgres psql -c 'CREATE DATABASE app;'", "sudo: unable to resolve host 3f2a1b9c: Name or service not known\nCREATE DATABASE\n"),
    ("sudo mkdir -p /opt/app && echo ok", "sudo: unable to resolve host devbox: Name or service not known\nok\n"),
    ("ssh deploy@10.0.0.5 'df -h /'", "bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)\nFilesystem Size\n/dev/sda1 50G\n"),
    ("python3 -c 'import app; print(app.__version__)'", "/bin/bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)\n1.4.2\n"),
    ("bash -ic 'node -v'", "bash: cannot set terminal process group (1): Inappropriate ioctl for device\nbash: no job control in this shell\nv18.19.0\n"),
    ("apt-get install -y -qq jq > /dev/null", "debconf: falling back to frontend: Teletype\ndpkg-preconfigure: unable to re-open stdin: \n"),
    ("apt-get install -y redis-server", "Setting up redis-server (5:6.0.16-1ubuntu1) ...\ninvoke-rc.d: could not determine current runlevel\nProcessing triggers for libc-bin (2.35-0ubuntu3.1) ...\n"),
    ("apt-get update", "Reading package lists... Done\nW: Failed to fetch http://ppa.launchpad.net/old/InRelease  Temporary failure resolving 'ppa.launchpad.net'\n"),
    ("lsof -t -i:8000", "lsof: WARNING: can't stat() fuse.gvfsd-fuse file system /run/user/1000/gvfs\n      Output information may be incomplete.\n48213\n"),
    ("mkdir out; python gen.py --out out", "mkdir: cannot create directory 'out': File exists\nwrote 3 files\n"),
    # a retry or fallback, then success; a log being read
    ("for i in $(seq 1 20); do curl -sS localhost:8000/health && break; sleep 1; done", "curl: (7) Failed to connect to localhost port 8000 after 0 ms: Couldn't connect to server\n{\"status\":\"ok\"}\n"),
    ("python migrate.py", "Connection refused, retrying in 1s (1/10)\nConnected to postgres at db:5432\nApplied 3 migrations\n"),
    ("python sync.py", "Connection timed out, retrying (attempt 2/5)\nConnected to s3.amazonaws.com\nSynced 120 objects\n"),
    ("python fetch_data.py", "Mirror A timed out, falling back to mirror B\nDownloaded 3 files (41.2 MB)\nDone\n"),
    ("docker logs api --tail 3", "api: failed to connect to redis at redis:6379, retrying in 2s\napi: connected to redis\napi: listening on :8080\n"),
    ("kubectl logs deploy/web --tail=3", "web: could not load optional plugin 'metrics': plugin not installed\nweb: ready, serving on :3000\n"),
    ("nohup python server.py > server.log 2>&1 & sleep 2; tail -2 server.log", "server: could not read ~/.serverrc, using defaults\nserver: listening on 0.0.0.0:8000\n"),
    # a validation test: the program rightly rejects bad input
    ("echo 'abc' | python validate_age.py", "Invalid input\n"),
    ("curl -s -X POST localhost:8000/login -d 'pw=wrong'", "Invalid credentials\n"),
    ("python check_password.py hunter2", "Incorrect password.\n"),
    ("python cli.py --port 99999; python cli.py --port 8080", "Invalid port number!\nListening on 8080\n"),
    # a checker run on a case that should fail (no compiler source line after the diagnostic)
    ("python -m mylint tests/fixtures/bad_return.py", "tests/fixtures/bad_return.py:3: error: missing return statement\n"),
    # failure words in a successful program's own report
    ("python bench.py --n 1000", "1000 requests, 3 errors in 12.5s\np50=8ms p99=41ms\n"),
    ("python tools/fmt.py --dry-run", "3 files would be reformatted\nChanges not applied (--dry-run)\n"),
    ("python -m unittest -v tests.test_net", "test_ok ... ok\nConnection timed out is retried once. ... ok\n\nOK\n"),
    ("timeout 5 python server.py; echo smoke done", "Serving on 0.0.0.0:8000\nTimed out after 5s (expected: smoke run)\nsmoke done\n"),
]


@pytest.mark.parametrize(("command", "output"), SUCCESSES, ids=[s[0][:40] for s in SUCCESSES])
def test_a_successful_output_that_mentions_errors_stays_a_working_recipe(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == [f"$ {command}"]
    assert sections["FAILED APPROACHES"] == ["(none)"]


# Commands that only read (a log, commit subjects, a fixture, a diff): never a recipe, and no failure either.
READS = [
    ("tail -3 /var/log/app/worker.log", "2024-06-01T12:00:01: error fetching page 3, will retry\n2024-06-01T12:00:03: fetched page 3\n"),
    ("git log -1 --format=%s", "net: cannot reconnect after timeout (fix #812)\n"),
    ("git log --format='%s' -3 origin/main", "docs: update README\nparser: failed to handle empty input\nci: pin node 18\n"),
    ("cat tests/ui/missing_semicolon.stderr", "missing_semicolon.c:3:5: error: expected ';' before '}' token\n"),
    ("git diff tests/ui/", "--- a/tests/ui/x.stderr\n+++ b/tests/ui/x.stderr\n@@ -1 +1 @@\n-x.c:3:5: error: expected ';'\n+x.c:3:9: error: expected ';'\n"),
]


@pytest.mark.parametrize(("command", "output"), READS, ids=[r[0][:40] for r in READS])
def test_a_read_commands_failure_shaped_content_is_no_failed_approach(command: str, output: str) -> None:
    assert _session(command, output)["FAILED APPROACHES"] == ["(none)"]


def test_a_read_files_failure_shaped_line_is_no_error() -> None:
    """Only a command's output has a verdict: a chat transcript read is content, not a failure."""
    events = [
        SessionEvent(type="user_input", content="Summarize the notes."),
        SessionEvent(type="tool_call", tool_name="read_file", tool_call_id="c1", tool_args='{"path": "transcript.txt"}'),
        SessionEvent(
            type="tool_result",
            tool_name="read_file",
            tool_call_id="c1",
            content="Caroline: I went to the support group yesterday.\nCaroline: Can't wait to go again next week!\n",
        ),
    ]
    request = SummaryRequest(purpose="history", events=tuple(events), max_tokens=BUDGET)
    text = ExtractiveSummarizer().summarize_sync(request).text
    assert "Errors:" not in text
    assert "Can't wait" not in text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_project_memory_lists_a_timed_out_command_as_failed_not_as_a_recipe(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none")) as memory:
        await memory.begin_run("Find the flag in flash.img and submit it.")
        await memory.append_many(
            [
                *_ran("strings flash.img", "strings: 'flash.img': No such file", "a"),
                *_ran("unzip flash.zip", "Archive:  flash.zip\n  inflating: flash.img", "b"),
                *_ran("./rock", "EXECUTION TIMED OUT", "c"),
                *_ran("sudo ./setup.sh", "sudo: unable to resolve host 3f2a1b9c: Name or service not known\nready", "d"),
            ]
        )
        await memory.commit_run("The binary hangs.")
        await memory.begin_run("Next task.", new_session=True)  # the flag session is summarized at rotation
        await memory.commit_run("Noted.")
        layer = memory.long_term_layer
    failed = layer.split("FAILED APPROACHES (do not repeat)\n", 1)[1].split("\n\n", 1)[0]
    recipes = layer.split("WORKING RECIPES\n", 1)[1].split("\n\n", 1)[0]
    assert failed.splitlines() == [
        "- $ strings flash.img failed: strings: 'flash.img': No such file",
        "- $ ./rock failed: EXECUTION TIMED OUT",
    ]
    assert recipes.splitlines() == ["- $ unzip flash.zip", "- $ sudo ./setup.sh"]
