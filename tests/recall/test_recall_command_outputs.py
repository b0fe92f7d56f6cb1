"""Recall of a tool's output by what its command does.

A question about an agent's own work names the action, not the output: "what did the directory
listing show?" asks for the output of ``ls``, which holds no word of it. The index stores with each
tool result the words of what its call does (``ls`` lists a directory, ``python x.py`` runs a script
and prints, ``rg`` searches, ``cat`` shows a file, ``pytest`` runs the tests), never shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.events import SessionEvent
from aiden.recall.commands import describe_call
from tests.helpers import SMALL_MANUAL

# (assistant's words, tool, arguments, output): no output holds a word of the questions below.
STEPS = [
    ("Start by looking around.", "bash", {"command": "ls -la"},
     "total 16\ndrwxr-xr-x  4 dev dev 4096 .\n-rw-r--r--  1 dev dev  310 README.md\ndrwxr-xr-x  2 dev dev 4096 shop"),
    ("Now the migration.", "bash", {"command": "python3 scripts/migrate.py --dry"},
     "migrated 17 rows into orders_v2"),
    ("Where is the retry count set?", "bash", {"command": "cd shop && rg -n retries"},
     "shop/client.py:40:    retries = 3\nshop/worker.py:12:    retries = 5"),
    ("Check the packaging metadata.", "open_file", {"path": "setup.cfg"},
     "[metadata]\nname = shop\nversion = 2.4.1"),
    ("Run the suite.", "bash", {"command": "python -m pytest -q shop"},
     "....F\nFAILED shop/test_cart.py::test_total - assert 41 == 42\n1 failed, 4 passed in 0.21s"),
]
QUESTIONS = [
    ("what did the directory listing show?", 0),
    ("what did the migration script print?", 1),
    ("what did the search find?", 2),
    ("what did reading setup.cfg show?", 3),
    ("what did the test run report?", 4),
]
TAIL = ["ok", "sure", "right", "fine", "yes", "bye", "hm", "so", "well", "yep", "good", "later"]  # the hot window


async def _answers(root: Path) -> tuple[dict[str, list[int]], dict[int, str], list[int]]:
    """Each question's result seqs, each result's text by seq, and the seqs of the tool outputs."""
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        events = [SessionEvent(type="user_input", role="user", content="Please tidy up the shop package.")]
        for i, (words, tool, args, output) in enumerate(STEPS):
            events += [
                SessionEvent(type="assistant_output", role="assistant", content=words),
                SessionEvent(type="tool_call", role="assistant", tool_call_id=f"c{i}", tool_name=tool,
                             tool_args=json.dumps(args)),
                SessionEvent(type="tool_result", role="tool", tool_call_id=f"c{i}", content=output),
            ]
        events += [SessionEvent(type="user_input", role="user", content=t) for t in TAIL]
        stored = await memory.append_many(events)
        assert (await memory.maintain(manual=True)).compacted is True
        outputs = [e.seq for e in stored if e.type == "tool_result"]
        assert not {e.seq for e in await memory.hot_window()} & set(outputs)
        seqs: dict[str, list[int]] = {}
        texts: dict[int, str] = {}
        for question, _ in QUESTIONS:
            answer = json.loads(await memory.handle_recall_tool(json.dumps({"query": question})))
            seqs[question] = [r["seq"] for r in answer["results"] if "seq" in r]
            texts.update((r["seq"], r["text"]) for r in answer["results"] if "seq" in r)
    return seqs, texts, outputs


@pytest.mark.anyio
async def test_a_question_naming_the_action_finds_the_commands_output(tmp_path: Path) -> None:
    seqs, texts, outputs = await _answers(tmp_path)
    for question, step in QUESTIONS:
        # The output asked for is the best ranked of the outputs (another command of its kind may follow).
        assert [s for s in seqs[question] if s in outputs][:1] == [outputs[step]], question
    # The words searched are never shown: each output reads as the tool wrote it.
    assert {s: texts[s] for s in outputs} == {s: STEPS[i][3] for i, s in enumerate(outputs)}


def _call(i: int | None, tool: str, args: object) -> SessionEvent:
    return SessionEvent(type="tool_call", role="assistant", tool_call_id=None if i is None else f"k{i}",
                        tool_name=tool, tool_args=json.dumps(args))


def _result(i: int | None, output: str) -> SessionEvent:
    return SessionEvent(type="tool_result", role="tool", tool_call_id=None if i is None else f"k{i}", content=output)


async def _ask(root: Path, calls: list[tuple[SessionEvent, SessionEvent]], questions: list[str]) -> list[list[int]]:
    """Per question, the indexes (into ``calls``) of the tool outputs among its results, in answer order."""
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        events = [SessionEvent(type="user_input", role="user", content="Please look after the deploy.")]
        for n, pair in enumerate(calls):
            # Apart from each other by more than the neighbours a match lends its score to.
            events += [SessionEvent(type="assistant_output", role="assistant", content=f"Step {n}."), *pair,
                       SessionEvent(type="user_input", role="user", content=f"noted {n}")]
        stored = await memory.append_many([*events, *(SessionEvent(type="user_input", role="user", content=t)
                                                      for t in TAIL)])
        assert (await memory.maintain(manual=True)).compacted is True
        outputs = [e.seq for e in stored if e.type == "tool_result"]
        found = []
        for question in questions:
            answer = json.loads(await memory.handle_recall_tool(json.dumps({"query": question})))
            found.append([outputs.index(r["seq"]) for r in answer["results"] if r.get("seq") in outputs])
    return found


@pytest.mark.anyio
async def test_an_output_is_described_by_its_own_call_or_by_nothing(tmp_path: Path) -> None:
    # A shell command that is not known (cd, docker) tells nothing: not "script print" for the shell's name.
    # A call and its output without ids pair as adjacent (the nearest call before the output).
    calls = [
        (_call(0, "bash", {"command": "cd deploy"}), _result(0, "(no output)")),
        (_call(1, "bash", {"command": "docker ps"}), _result(1, "CONTAINER ID IMAGE web-1 up 3 hours")),
        (_call(None, "bash", {"command": "ls deploy"}), _result(None, "values.yaml chart.yaml")),
        (_call(3, "bash", {"command": "python3 render.py"}), _result(3, "rendered 4 manifests")),
    ]
    found = await _ask(tmp_path, calls, ["what did the script print?", "what did the directory listing show?"])
    assert found == [[3], [2]]


@pytest.mark.anyio
async def test_the_words_for_a_command_leave_its_outputs_score_for_other_words_alone(tmp_path: Path) -> None:
    # Two outputs holding "seconds" once each: the shorter ranks first, whatever its command was
    # (the grep output, shorter by one word, would lose its place if the words "search find" counted
    # into its length).
    calls = [
        (_call(0, "bash", {"command": "grep -rn TIMEOUT src"}), _result(0, "src/pay.py:42: TIMEOUT = 80 seconds")),
        (_call(1, "weather_report", {"city": "Oslo"}), _result(1, "the sensor answered in 12 seconds flat today")),
    ]
    assert await _ask(tmp_path, calls, ["how many seconds?"]) == [[0, 1]]


@pytest.mark.anyio
async def test_tools_that_act_on_no_file_are_not_described_by_their_verb(tmp_path: Path) -> None:
    calls = [
        (_call(0, "mcp__github__list_issues", {"repo": "acme/deploy"}), _result(0, "#12 flaky rollout, #15 chart typo")),
        (_call(1, "create_calendar_event", {"title": "rollout"}), _result(1, "event booked for Tuesday 10:00")),
        (_call(2, "read_email", {"id": 7}), _result(2, "Subject: rollout window approved")),
        (_call(3, "execute_sql", {"query": "select count(*) from pods"}), _result(3, "count: 12")),
        (_call(4, "bash", {"command": "cat <<'EOF' > notes.md\nrollout on Tuesday\nEOF"}), _result(4, "[exit code 0]")),
        (_call(5, "bash", {"command": "echo 'rollout && rm -rf build'"}), _result(5, "rollout && rm -rf build")),
        (_call(6, "shell", {"command": ["bash", "-lc", "ls -la deploy"]}), _result(6, "drwxr-xr-x chart")),
        (_call(7, "read_file", {"path": "chart.yaml"}), _result(7, "apiVersion: v2")),
    ]
    # (question, the output ranked first or None, an output that must not be found)
    questions = [
        ("what did the directory listing show?", 6, 0),  # the ls of an argument vector, not the issue list
        ("what did reading the file show?", 7, 2),  # read_file, not read_email
        ("what did the script print?", 5, 3),  # echo printed; the SQL query ran no script
        ("which new file did I create?", 4, 1),  # the heredoc's write, not the calendar event
        ("what did I remove?", None, 5),  # nothing: the rm was quoted text
    ]
    found = await _ask(tmp_path, calls, [q for q, _, _ in questions])
    got = [(f[:1], wrong in f) for f, (_, _, wrong) in zip(found, questions, strict=True)]
    assert got == [([] if first is None else [first], False) for _, first, _ in questions]


@pytest.mark.anyio
async def test_a_turn_holding_the_asked_words_stays_above_outputs_holding_none(tmp_path: Path) -> None:
    # Searches whose outputs hold no word of the question: the words for what their command did ("search
    # find") count less than the same words said in a turn, and the two adjacent are no phrase of theirs.
    searches = [
        ("grep -rn TODO src", "src/cart.py:12: # TODO rounding"), ("rg -l Decimal", "src/cart.py\nsrc/tax.py"),
        ("rg -g '*.cfg' --files", "./setup.cfg"), ("grep -c import src/tax.py", "7"),
        ("rg --files-with-matches vat", "(no output)"), ("egrep -l 'round|ceil' src/*.py", "src/tax.py"),
    ]
    statement = "I want the search on our shop to find products even when a customer types the brand name wrongly."
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        events = [SessionEvent(type="user_input", role="user", content="Please tidy up the shop package.")]
        for n, (command, output) in enumerate(searches):
            # The statement among the searches (a session's first words stay in its prompt, not in recall).
            events += [*([SessionEvent(type="user_input", role="user", content=statement)] if n == 3 else []),SessionEvent(type="assistant_output", role="assistant", content=f"Step {n}."),
                       _call(n, "bash", {"command": command}), _result(n, output),
                       SessionEvent(type="user_input", role="user", content=f"noted {n}")]
        stored = await memory.append_many([*events, *(SessionEvent(type="user_input", role="user", content=t)
                                                      for t in TAIL)])
        assert (await memory.maintain(manual=True)).compacted is True
        answer = json.loads(await memory.handle_recall_tool(json.dumps({"query": "what should the search find?"})))
    results = [r["seq"] for r in answer["results"] if "seq" in r]
    outputs = [e.seq for e in stored if e.type == "tool_result"]
    assert results[0] == next(e.seq for e in stored if e.content == statement)
    # The outputs still follow it: the question may be about what a search found.
    assert set(outputs) <= set(results)


def test_an_escaped_quote_does_not_end_a_quoted_argument() -> None:
    # `echo "say \"hi; rm -rf x\" now"` runs echo: the rm is text inside its argument (before the fix the
    # escaped quote ended the string and the rm was read as a command of its own).
    command = r'echo "say \"hi; rm -rf x\" now" && ls'
    assert describe_call("bash", json.dumps({"command": command})) == describe_call(
        "bash", json.dumps({"command": "echo hi && ls"})
    )
