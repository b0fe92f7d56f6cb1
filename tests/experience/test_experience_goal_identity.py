"""A task's identity is its whole statement (r61-G): an agent that opens every task with the same
instructions or demonstration (SWE-agent) states different tasks, and one task's fix must neither
supersede another's nor be recalled for it. Also: a file at the root of a listing is no navigation
record ("setup.py is at setup.py" says nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.events import RETRACTS, SessionEvent
from aiden.experience.records import ExperienceRecord, record_id
from aiden.memory import Memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENV = "pydicom"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
# 60 distinct content words, the same before every task (instructions, a demonstration).
PREAMBLE = " ".join(f"instruction{n} means follow rule{n}." for n in range(30))
TASKS = {
    "A": (
        "Pixel Representation attribute should be optional for the numpy pixel data handler",
        "pytest tests/test_numpy_pixel_data.py --numpy",
        "pytest tests/test_numpy_pixel_data.py",
    ),
    "B": (
        "DA values with trailing spaces are not parsed by valuerep",
        "tox -e py39 -- tests/test_valuerep.py",
        "python -m pytest tests/test_valuerep.py -k DA",
    ),
}


async def call(memory: Memory, call_id: str, cmd: str, output: str) -> None:
    await memory.append(
        SessionEvent(type="tool_call", tool_name="bash", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd}))
    )
    await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))


async def fail_then_fix(memory: Memory, key: str, bad: str, good: str) -> None:
    await call(memory, f"{key}1", bad, "error: unrecognized arguments: --numpy")
    await call(memory, f"{key}2", good, "5 passed in 0.4s")
    await memory.commit_run(f"Task {key} fixed; the tests pass.", outcome="success")


def by_step(records: list[ExperienceRecord]) -> dict[str, tuple[str, str, str]]:
    """Each record's kind, status and body after the quoted goal (the steps it names)."""
    return {r.step: (r.kind, r.status, r.body.rsplit("'", 1)[-1]) for r in records}


@pytest.mark.parametrize("filler", [0, 2_500], ids=["within-2000-chars", "task-past-2000-chars"])
async def test_tasks_behind_one_preamble_keep_their_own_lessons(tmp_path: Path, filler: int) -> None:
    preamble = PREAMBLE + " " + "x" * filler  # the second case puts each task beyond the goal's first 2,000 chars
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        for key, (issue, bad, good) in TASKS.items():
            await memory.begin_run(f"{preamble}\n\nISSUE: {issue}", environment=ENV)
            await fail_then_fix(memory, key, bad, good)
            assert (await memory.learn_experience()).legacy == ()
        failed = " failed with: error: unrecognized arguments: --numpy\n\nWhat worked instead: "
        worked = " worked (output: 5 passed in 0.4s) after "
        verify = " failed. Verify against current observations before relying on it."
        assert by_step(await memory.experience_records(ENV)) == {
            f"bash {bad}": ("failure", "active", f", `bash {bad}`{failed}`bash {good}`.")
            for _, bad, good in TASKS.values()
        } | {
            f"bash {good}": ("procedure", "active", f", `bash {good}`{worked}`bash {bad}`{verify}")
            for _, bad, good in TASKS.values()
        }
        answer = json.loads(
            await memory.handle_tool_call(
                "recall_experience",
                {"query": "run the numpy pixel data tests for the Pixel Representation fix", "environment": ENV},
            )
        )
        assert [(r["kind"], r["title"].rsplit(": ", 1)[-1]) for r in answer["results"]][:2] == [
            ("procedure", "`bash pytest tests/test_numpy_pixel_data.py`"),
            ("failure", "`bash pytest tests/test_numpy_pixel_data.py --numpy` fails"),
        ]
        # The same task (the same whole statement) fixed a new way still supersedes its old fix.
        issue, bad, _ = TASKS["A"]
        await memory.begin_run(f"{preamble}\n\nISSUE: {issue}", environment=ENV)
        await fail_then_fix(memory, "A", bad, "pytest -p no:cacheprovider tests/test_numpy_pixel_data.py")
        await memory.learn_experience()
        statuses = {r.step: r.status for r in await memory.experience_records(ENV) if r.kind == "procedure"}
    assert statuses == {
        "bash pytest tests/test_numpy_pixel_data.py": "legacy",
        "bash pytest -p no:cacheprovider tests/test_numpy_pixel_data.py": "active",
        "bash python -m pytest tests/test_valuerep.py -k DA": "active",
    }


async def test_a_task_sent_after_a_demonstration_message_is_the_goal(tmp_path: Path) -> None:
    """SWE-agent's layout: the demonstration is the run's input, the issue the next user message
    (before any tool call). Both state the task, the issue first; nothing is a correction."""
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        for key, (issue, bad, good) in TASKS.items():
            await memory.begin_run(PREAMBLE, environment=ENV)
            await memory.append(SessionEvent(type="user_input", content=f"ISSUE: {issue}"))
            await fail_then_fix(memory, key, bad, good)
            assert (await memory.learn_experience()).legacy == ()
        records = await memory.experience_records(ENV)
    titles = sorted(r.title for r in records)
    assert titles == sorted(
        [f"ISSUE: {TASKS[k][0]} {PREAMBLE}"[:120] + f": `bash {TASKS[k][i]}`{' fails' if i == 1 else ''}"
         for k in TASKS for i in (1, 2)]
    )
    assert {r.status for r in records} == {"active"}


async def test_a_retracted_task_message_leaves_the_goal(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("build the acme repo", environment="acme")
        said = await memory.append(SessionEvent(type="user_input", content="with the WITHDRAWN-4711 profile"))
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: said.seq}))
        await fail_then_fix(memory, "c", "make build", "make build WITH_SSL=1")
        await memory.learn_experience()
        records = await memory.experience_records("acme")
    assert {(r.goal, r.tasks) for r in records} == {("acme build repo", ("build the acme repo",))}


async def test_a_short_task_keeps_the_goal_key_and_record_ids_it_had(tmp_path: Path) -> None:
    """Records learned before the key covered the whole statement keep being the ones updated."""
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("Build the acme repo", environment="acme")
        await fail_then_fix(memory, "c", "make build", "make build WITH_SSL=1")
        await memory.learn_experience()
        procedure = next(r for r in await memory.experience_records("acme") if r.kind == "procedure")
    assert (procedure.goal, procedure.id) == (
        "acme build repo",
        record_id("procedure", "acme", "acme build repo", "bash make build WITH_SSL=1"),
    )


async def test_a_file_at_the_root_of_a_listing_is_no_navigation_record(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("fix the version check in the marshmallow setup", environment="marshmallow")
        await call(memory, "c1", "ls -F", "AUTHORS.rst\nsetup.py\nsrc/\ntests/\n")
        await call(memory, "c2", "open setup.py", "[File: /marshmallow/setup.py (101 lines total)]")
        await call(memory, "c3", "find_file fields.py src", "Found 1 matches:\n/marshmallow/src/marshmallow/fields.py")
        await call(memory, "c4", "open src/marshmallow/fields.py", "[File: fields.py (1997 lines total)]")
        await memory.commit_run("Fixed.", outcome="success")
        await memory.learn_experience()
        titles = [r.title for r in await memory.experience_records("marshmallow") if r.kind == "navigation"]
    assert titles == ["fields.py is at src/marshmallow/fields.py"]


async def test_a_correction_before_the_first_action_stays_a_correction(tmp_path: Path) -> None:
    """'No wait, ...' before any tool call corrects the task (review of r61): it is not folded into the
    goal, and, corrected, the run teaches no first-try procedure."""
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("Deploy the api service to staging.", environment="ops")
        await memory.append(SessionEvent(type="user_input", content="No wait, deploy to production, not staging."))
        await call(memory, "c1", "make deploy ENV=production", "deployed")
        await memory.commit_run("Deployed to production.", outcome="success")
        assert (await memory.learn_experience()).records == ()
        assert await memory.experience_records("ops") == []


# Task statements that open like a correction but state the task (r61-R3 finding 2: SWE-bench titles such
# as "Wrong result of ..." were taken for corrections, left out of the goal, and tasks behind one preamble
# shared an identity again).
STATEMENTS = [
    "Wrong result of cross_val_predict with method=predict_proba.",
    "Wrong dtype returned by OneHotEncoder for sparse input.",
    "Wrong error message when the config file is missing.",
    "Not quite sure where to start, the bug is in parser.py.",
    "Correction of the timezone offset is broken in utils.py.",
    "Actually the docs build fails on Sphinx 7 with a KeyError.",
    "Wrongly parsed dates in DA values with trailing spaces.",
    "Not quite right: rounding in Decimal fields loses precision.",
    "Wait times are not respected by the retry decorator.",
    "No results are returned when the query has a trailing space.",
    "Nope is printed instead of False by the yes/no formatter.",
]
CORRECTIONS = [
    "No wait, deploy to production, not staging.",
    "No, deploy to production, not staging.",
    "Actually, deploy to production, not staging.",
    "Wait, deploy to production, not staging.",
    "Correction: deploy to production, not staging.",
    "I meant production, not staging.",
    "That's wrong, deploy to production.",
    "Wrong, deploy to production.",
]


async def test_a_task_statement_that_opens_like_a_correction_is_the_goal(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        for n, statement in enumerate(STATEMENTS):
            await memory.begin_run(PREAMBLE, environment=ENV)
            await memory.append(SessionEvent(type="user_input", content=statement))
            await fail_then_fix(memory, f"t{n}-", f"pytest tests/test_{n}.py --numpy", f"pytest tests/test_{n}.py")
            assert (await memory.learn_experience()).legacy == ()
        records = await memory.experience_records(ENV)
    # Each task keeps its own records, keyed by its statement.
    assert sorted((r.title, r.status) for r in records if r.kind == "procedure") == sorted(
        (f"{statement} {PREAMBLE}"[:120] + f": `bash pytest tests/test_{n}.py`", "active")
        for n, statement in enumerate(STATEMENTS)
    )


async def test_a_message_before_the_first_action_that_says_it_corrects_is_a_correction(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        for n, correction in enumerate(CORRECTIONS):
            await memory.begin_run("Deploy the api service to staging.", environment="ops")
            await memory.append(SessionEvent(type="user_input", content=correction))
            await call(memory, f"c{n}", "make deploy ENV=production", "deployed")
            await memory.commit_run("Deployed to production.", outcome="success")
            assert (await memory.learn_experience()).records == (), correction
        assert await memory.experience_records("ops") == []
