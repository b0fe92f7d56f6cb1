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
