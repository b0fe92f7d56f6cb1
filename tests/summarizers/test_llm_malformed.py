"""What small models answer, through litellm's real HTTP client and FakeLLMServer (issue #19).

Each malformed shape a 0.3B model produces is either read correctly or
answered by the counted extractive fallback: never a crash, never a lost
fact. And a compaction makes one model call by default (three with
``one_call_per_compaction=False``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import aiden
from aiden.config import Config
from aiden.errors import InvalidSummaryError, SummarizerError
from aiden.events import SessionEvent
from aiden.storage.layout import Layout
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    SummaryRequest,
    SummaryResult,
)
from aiden.testing import FailingSummarizer, FakeLLMServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("litellm_ready"), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    """trio on the real clock: a memory's summarizer deadline must not jump while HTTP runs in a thread."""
    return "trio"


GOAL = "Migrate the billing service to Postgres 16 without downtime."
DEADLINE = "The cutover must finish before 2026-12-11."
RULE = "Never run migrations against prod directly."
EVENTS = (
    SessionEvent(type="user_input", seq=1, content=f"{GOAL} {DEADLINE}"),
    SessionEvent(
        type="assistant_output",
        seq=2,
        content="I decided to use logical replication because it allows a zero-downtime cutover.",
    ),
    SessionEvent(type="tool_call", seq=3, tool_name="shell", tool_args='{"cmd": "pytest tests/billing"}'),
    SessionEvent(
        type="tool_result", seq=4, tool_name="shell", content="ImportError: No module named 'psycopg'"
    ),
    SessionEvent(
        type="assistant_output", seq=5, content="Fixed the ImportError by installing psycopg[binary]."
    ),
    SessionEvent(
        type="user_input", seq=6, content=f"{RULE} Now write the cutover runbook in docs/cutover.md."
    ),
)
HISTORY = SummaryRequest(purpose="history", events=EVENTS)
SESSION = SummaryRequest(purpose="session_summary", events=EVENTS)

GOOD: dict[str, Any] = {
    "user_goal": GOAL,
    "decisions": [{"what": "use logical replication", "why": "it allows a zero-downtime cutover"}],
    "constraints": [DEADLINE],
    "user_preferences": [RULE],
    "errors": [
        {"error": "ImportError: No module named 'psycopg'", "resolution": "installed psycopg[binary]"}
    ],
    "open_threads": ["write the cutover runbook in docs/cutover.md"],
    "files_touched": ["docs/cutover.md"],
}
GOOD_STRUCTURED = StructuredSummary(
    user_goal=GOAL,
    decisions=(Decision(what="use logical replication", why="it allows a zero-downtime cutover"),),
    constraints=(DEADLINE,),
    user_preferences=(RULE,),
    errors=(
        ErrorResolution(
            error="ImportError: No module named 'psycopg'", resolution="installed psycopg[binary]"
        ),
    ),
    open_threads=("write the cutover runbook in docs/cutover.md",),
    files_touched=("docs/cutover.md",),
)
# The facts a person resuming needs; every answer, parsed or fallen back, must carry them.
KEY_FACTS = ("2026-12-11", "docs/cutover.md", "logical replication", "psycopg", "prod directly")


def one_call(server: FakeLLMServer) -> LiteLLMSummarizer:
    # No flag: one call per compaction is the default.
    return LiteLLMSummarizer(
        "openai/test-model", config=Config(summarizer_retries=0), api_base=server.base_url, api_key="sk-test"
    )


async def answer(
    *replies: str | dict[str, Any], request: SummaryRequest = HISTORY
) -> tuple[SummaryResult, Any, int]:
    """(result, stats, requests the server saw) for the scripted replies."""
    with FakeLLMServer(script=list(replies)) as server:
        summarizer = one_call(server)
        result = await summarizer.summarize(request)
        assert server.handler_errors == []
        count = len(server.requests)
    return result, summarizer.stats(), count


def assert_no_lost_facts(result: SummaryResult) -> None:
    lost = [fact for fact in KEY_FACTS if fact not in result.text]
    assert lost == []


# --- shapes that are read correctly -------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(GOOD),
        "Sure! Here is the summary you asked for:\n" + json.dumps(GOOD) + "\nLet me know if you need more.",
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "Here it is:\n```\n" + json.dumps(GOOD) + "\n```\nDone.",
        "```yaml\n" + yaml.safe_dump(GOOD, sort_keys=False) + "```",
        yaml.safe_dump(GOOD, sort_keys=False),
    ],
    ids=["bare-json", "prose-around-json", "json-fence", "plain-fence-and-prose", "yaml-fence", "bare-yaml"],
)
async def test_wrapped_answers_are_read_whole(reply: str) -> None:
    result, stats, requests = await answer(reply)
    assert result.structured == GOOD_STRUCTURED
    assert result.text == (
        f"Goal: {GOAL}\nConstraints:\n- {DEADLINE}\nPreferences:\n- {RULE}\n"
        "Decisions:\n- use logical replication (it allows a zero-downtime cutover)\n"
        "Errors:\n- ImportError: No module named 'psycopg' \u2192 fixed: installed psycopg[binary]\n"
        "Open thread:\n- write the cutover runbook in docs/cutover.md\nFiles: docs/cutover.md"
    )
    assert (requests, stats.fallbacks, stats.repair_retries, stats.must_keep_added) == (1, 0, 0, 0)


def _trailing_commas(text: str) -> str:
    return re.sub(r'(["\]}])(\n\s*[\]}])', r"\1,\2", text)


def _commented(text: str) -> str:
    return "\n".join(
        f"{line}  // {i}" if line.endswith(",") else line for i, line in enumerate(text.splitlines())
    )


HALF = dict(list(GOOD.items())[:3])


@pytest.mark.parametrize(
    "reply",
    [
        _trailing_commas(json.dumps(GOOD, indent=2)),
        repr(GOOD),  # a Python dict: single quotes
        repr({**GOOD, "outcome": None}),  # Python literals
        _commented(json.dumps(GOOD, indent=2)),
        json.dumps(HALF) + "\n" + json.dumps({k: v for k, v in GOOD.items() if k not in HALF}),
        "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in GOOD.items()) + "}",  # bare keys
    ],
    ids=["trailing-commas", "python-dict", "python-literals", "comments", "two-objects", "bare-keys"],
)
async def test_loose_json_is_read_whole(reply: str) -> None:
    result, stats, requests = await answer(reply)
    assert result.structured == GOOD_STRUCTURED
    assert (requests, stats.fallbacks, stats.repair_retries, stats.must_keep_added) == (1, 0, 0, 0)


async def test_missing_sections_get_the_lost_facts_back_as_atomic_facts() -> None:
    partial = {"user_goal": GOAL, "decisions": GOOD["decisions"]}
    result, stats, requests = await answer(json.dumps(partial))
    assert result.structured.user_goal == GOAL
    assert result.structured.decisions == GOOD_STRUCTURED.decisions
    assert result.structured.facts == (
        DEADLINE,
        RULE,
        "Fixed the ImportError by installing psycopg[binary].",
        "docs/cutover.md",
    )
    assert (requests, stats.must_keep_added, stats.fallbacks) == (1, 4, 0)
    assert "prod directly" in result.text and "2026-12-11" in result.text


async def test_a_missing_goal_is_filled_from_the_range_and_counted() -> None:
    """A small model often leaves the goal out; the rules find it in the range's first user input."""
    no_goal = {k: v for k, v in GOOD.items() if k != "user_goal"}
    result, stats, _ = await answer(json.dumps(no_goal))
    assert result.structured.user_goal == f"{GOAL} {DEADLINE}"
    assert (stats.must_keep_added, stats.fallbacks) == (1, 0)
    # In the session summary, next to the model's outcome, as the "Goal:" line PROJECT MEMORY leads with.
    result, _, _ = await answer(json.dumps({**no_goal, "outcome": "runbook drafted"}), request=SESSION)
    assert result.text.startswith("## OUTCOME\n- runbook drafted\n")
    assert f"## PROJECT FACTS\n- Goal: {GOAL} {DEADLINE}\n" in result.text


async def test_repeated_keys_are_merged_not_overwritten() -> None:
    first = json.dumps(GOOD["decisions"])
    second = json.dumps([{"what": "keep the old primary read-only", "why": "rollback stays possible"}])
    body = json.dumps({k: v for k, v in GOOD.items() if k != "decisions"})[1:-1]
    reply = '{"decisions": ' + first + ", " + body + ', "decisions": ' + second + "}"
    result, stats, _ = await answer(reply)
    assert result.structured.decisions == (
        Decision(what="use logical replication", why="it allows a zero-downtime cutover"),
        Decision(what="keep the old primary read-only", why="rollback stays possible"),
    )
    assert (stats.fallbacks, stats.misfiled_moved) == (0, 0)
    assert_no_lost_facts(result)


async def test_repeated_plain_text_sections_are_merged() -> None:
    reply = (
        f"Goal: {GOAL}\nDecisions:\n- use logical replication because it allows a zero-downtime cutover\n"
        f"Constraints:\n- {DEADLINE}\nDecisions:\n- use logical replication because it allows a zero-downtime cutover\n"
        "- keep the old primary read-only\n"
    )
    result, stats, _ = await answer(reply)
    assert result.structured.decisions == (
        Decision(what="use logical replication", why="it allows a zero-downtime cutover"),
        Decision(what="keep the old primary read-only"),
    )
    assert (stats.fallbacks, stats.misfiled_moved) == (0, 0)
    assert result.structured.constraints == (DEADLINE,)
    assert_no_lost_facts(result)


async def test_a_question_filed_as_a_decision_becomes_an_open_thread() -> None:
    question = "Should we use pglogical or native logical replication?"
    reply = json.dumps({**GOOD, "decisions": [{"what": question}, *GOOD["decisions"]]})
    result, stats, _ = await answer(reply)
    assert result.structured.decisions == GOOD_STRUCTURED.decisions
    assert result.structured.open_threads == (*GOOD_STRUCTURED.open_threads, question)
    assert stats.misfiled_moved == 1
    decisions = result.text.split("Decisions:\n", 1)[1].split("\nErrors:", 1)[0]
    assert decisions == "- use logical replication (it allows a zero-downtime cutover)"


async def test_a_request_filed_as_an_error_becomes_an_open_thread() -> None:
    request = "Please fix the failing billing tests"
    reply = json.dumps({**GOOD, "errors": [*GOOD["errors"], {"error": request}]})
    result, stats, _ = await answer(reply)
    assert result.structured.errors == GOOD_STRUCTURED.errors
    assert result.structured.open_threads[-1] == request
    assert stats.misfiled_moved == 1


async def test_wrong_headings_and_case_are_read_by_meaning() -> None:
    reply = (
        f"## goal\n{GOAL}\n\n**DECISIONS**\n- use logical replication because it allows a zero-downtime cutover\n"
        f"CONSTRAINTS:\n- {DEADLINE}\n### User Preferences\n* {RULE}\n"
        "errors:\n- ImportError: No module named 'psycopg' -> installed psycopg[binary]\n"
        "Next Steps:\n1. write the cutover runbook in docs/cutover.md\nfiles: docs/cutover.md\n"
    )
    result, stats, _ = await answer(reply)
    assert result.structured == GOOD_STRUCTURED
    assert (stats.fallbacks, stats.misfiled_moved) == (0, 0)
    assert_no_lost_facts(result)


async def test_a_session_answer_with_wrong_headings_is_rendered_with_the_real_ones() -> None:
    reply = "## Outcome\n- runbook drafted\n\n## project facts\n- logical replication chosen\n"
    result, _, _ = await answer(reply, request=SESSION)
    headings = [line for line in result.text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## OUTCOME",
        "## WORKING RECIPES",
        "## FAILED APPROACHES",
        "## USER PREFERENCES",
        "## PROJECT FACTS",
    ]
    assert "- runbook drafted" in result.text and "- logical replication chosen" in result.text
    assert_no_lost_facts(result)  # the must-keep facts of the range were appended as project facts


@pytest.mark.parametrize("finish_reason", ["length", "stop"])
async def test_a_json_answer_cut_off_keeps_its_complete_fields_and_gets_the_rest_as_facts(
    finish_reason: str,
) -> None:
    """The output cap hit inside the constraints: goal, decision and the first constraint survive."""
    cut = json.dumps(GOOD).index(RULE) + 5  # inside the user_preferences list
    reply = {"content": json.dumps(GOOD)[:cut], "finish_reason": finish_reason}
    result, stats, requests = await answer(reply)
    assert result.structured.user_goal == GOAL
    assert result.structured.decisions == GOOD_STRUCTURED.decisions
    assert result.structured.constraints == (DEADLINE,)
    assert result.structured.user_preferences == ()  # the list being written when the cut came
    assert result.structured.facts == (
        RULE,
        "Fixed the ImportError by installing psycopg[binary].",
        "docs/cutover.md",
    )
    assert (requests, stats.truncations_repaired, stats.must_keep_added, stats.fallbacks) == (1, 1, 3, 0)
    assert (stats.repair_retries, stats.invalid_outputs, result.degraded) == (0, 0, False)
    assert_no_lost_facts(result)


async def test_a_text_only_answer_is_read_by_its_headings_and_checked() -> None:
    """A JSON object with only "text" (the per-request prompt's shape) in the one-call mode."""
    reply = json.dumps({"text": f"Goal: {GOAL}\nConstraints:\n- {DEADLINE}"})
    result, stats, _ = await answer(reply)
    assert (result.structured.user_goal, result.structured.constraints) == (GOAL, (DEADLINE,))
    assert result.structured.facts == (
        RULE,
        "I decided to use logical replication because it allows a zero-downtime cutover.",
        "Fixed the ImportError by installing psycopg[binary].",
        "docs/cutover.md",
    )
    assert (stats.must_keep_added, stats.fallbacks) == (4, 0)
    assert_no_lost_facts(result)


async def test_prose_without_headings_is_kept_as_facts_in_the_session_summary() -> None:
    reply = "The team is moving billing to Postgres 16.\nReplication lag is under 3 s."
    result, stats, _ = await answer(reply, request=SESSION)
    facts = result.text.split("## PROJECT FACTS\n", 1)[1]
    assert facts.startswith("- The team is moving billing to Postgres 16.\n- Replication lag is under 3 s.\n")
    assert (stats.fallbacks, stats.invalid_outputs) == (0, 0)
    assert_no_lost_facts(result)


async def test_overlong_fields_are_cut_to_their_bounds() -> None:
    from aiden.summarizers.llm.schema import ITEM_CHARS, LIST_ITEMS, SCALAR_CHARS

    wordy = {
        **GOOD,
        "user_goal": GOAL + " " + "and keep every consumer happy " * 40,
        "constraints": [DEADLINE, "The rollout plan: " + "stage, verify, " * 60],
        "facts": [f"fact number {i}" for i in range(30)],
    }
    result, stats, _ = await answer(json.dumps(wordy))
    structured = result.structured
    assert structured.user_goal.startswith(GOAL) and len(structured.user_goal) <= SCALAR_CHARS
    assert structured.constraints[0] == DEADLINE
    assert structured.constraints[1].startswith("The rollout plan: stage, verify,")
    assert len(structured.constraints[1]) <= ITEM_CHARS
    # The model's first LIST_ITEMS facts, then the must-keep facts its answer lacked.
    assert structured.facts[:LIST_ITEMS] == tuple(f"fact number {i}" for i in range(LIST_ITEMS))
    assert stats.clipped_items == 2 + (30 - LIST_ITEMS)
    assert_no_lost_facts(result)


# --- shapes that fall back ------------------------------------------------------------------------


# What Gemma 3 270M did: cut off at the output cap inside its first field, nothing complete.
TRUNCATED = {"content": json.dumps(GOOD)[:30], "finish_reason": "length"}


@pytest.mark.parametrize(
    "bad",
    [
        TRUNCATED,
        {"content": json.dumps(GOOD)[:30]},  # cut off without saying so
        {"content": f"Goal: {GOAL}\nDecisions:\n- use logical", "finish_reason": "length"},
        "",
        "   \n",
        "I'm sorry, but I cannot summarize this conversation.",
        json.dumps({k: "" for k in GOOD}),
    ],
    ids=[
        "truncated-length",
        "truncated-stop",
        "truncated-text",
        "empty",
        "whitespace",
        "refusal",
        "empty-fields",
    ],
)
async def test_an_unusable_answer_is_retried_strictly_then_falls_back(bad: str | dict[str, Any]) -> None:
    with FakeLLMServer(script=[bad, bad]) as server:
        summarizer = one_call(server)
        result = await summarizer.summarize(HISTORY)
        retry_prompt = server.requests[1].body["messages"][-1]["content"]
    stats = summarizer.stats()
    assert "Your previous answer could not be used (" in retry_prompt
    assert (stats.provider_requests, stats.repair_retries, stats.fallbacks, stats.invalid_outputs) == (
        2,
        1,
        1,
        2,
    )
    assert (stats.failures, stats.breaker, stats.successes) == (0, "closed", 1)
    assert stats.first_error.startswith("InvalidSummaryError: summarizer ")
    assert result.degraded is True
    assert_no_lost_facts(result)


async def test_a_good_answer_after_the_strict_retry_is_used() -> None:
    result, stats, requests = await answer(TRUNCATED, json.dumps(GOOD))
    assert result.structured == GOOD_STRUCTURED
    assert (requests, stats.repair_retries, stats.fallbacks, result.degraded) == (2, 1, 0, False)
    assert stats.first_error == (
        "InvalidSummaryError: summarizer output was truncated (finish_reason=length) before any complete field"
    )


async def test_without_the_one_call_mode_an_unusable_answer_raises_and_counts() -> None:
    with FakeLLMServer(script=[TRUNCATED]) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model",
            config=Config(),
            api_base=server.base_url,
            api_key="sk-test",
            one_call_per_compaction=False,
        )
        with pytest.raises(InvalidSummaryError, match="truncated"):
            await summarizer.summarize(HISTORY)
    stats = summarizer.stats()
    assert (stats.failures, stats.invalid_outputs, stats.fallbacks, stats.repair_retries) == (1, 1, 0, 0)


# --- one model call per compaction ------------------------------------------------------------------

COMPACT = Config(
    keep_recent_tokens=120,
    hot_window_events=4,
    count_compress_after_events=10**6,
    summarizer_retries=0,
    summarizer_timeout_s=30,
)


def responder(body: dict[str, Any]) -> str:
    """A scripted model: the good answer in whichever form the prompt asks for."""
    prompt = body["messages"][-1]["content"]
    if "## USER PREFERENCES" in prompt:  # the classic session_summary prompt
        return json.dumps({"outcome": "runbook in progress", "user_preferences": [RULE], "facts": [DEADLINE]})
    return json.dumps(GOOD)


async def compact_three_times(
    root: Path, summarizer: LiteLLMSummarizer, server: FakeLLMServer
) -> list[tuple[bool, int]]:
    """(compacted, model requests it made) for three compactions (the session-end summary is not counted)."""
    outcomes = []
    async with aiden.open_memory(root, config=COMPACT, summarizer=summarizer) as memory:
        for round_ in range(3):
            await memory.append(SessionEvent(type="user_input", content=f"{GOAL} Round {round_}."))
            await memory.append(
                SessionEvent(type="assistant_output", content="I decided to use logical replication.")
            )
            # One long turn: the cut falls inside it, so the compaction has a split-turn prefix.
            await memory.append(
                SessionEvent(type="user_input", content=f"{RULE} Write docs/cutover-{round_}.md.")
            )
            for step in range(8):
                await memory.append(
                    SessionEvent(
                        type="assistant_output", content=f"Step {step} of round {round_}: " + "word " * 30
                    )
                )
            before = len(server.requests)
            outcome = await memory.maintain(manual=True)
            outcomes.append((outcome.compacted, len(server.requests) - before))
    return outcomes


async def test_a_compaction_makes_one_model_call_by_default(tmp_path: Path) -> None:
    with FakeLLMServer(responder=responder) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model", config=COMPACT, api_base=server.base_url, api_key="sk-test"
        )
        outcomes = await compact_three_times(tmp_path, summarizer, server)
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    assert outcomes == [(True, 1), (True, 1), (True, 1)]
    stats = summarizer.stats()
    assert len(prompts) == 4  # and the session-end summary at close
    assert all("Answer with one JSON object and nothing else." in p for p in prompts)
    assert (stats.provider_requests, stats.reused_answers, stats.local_answers, stats.fallbacks) == (
        4,
        3,
        3,
        0,
    )
    # Reported per compaction: 4 calls over 3 compactions (the 4th is the summary at close).
    assert (stats.compactions, stats.calls_per_compaction) == (3, 4 / 3)
    assert stats.prompt_tokens_per_compaction == stats.prompt_tokens / 3 > 0
    summary = Layout(tmp_path).summary.read_text(encoding="utf-8")
    assert "use logical replication (it allows a zero-downtime cutover)" in summary


async def test_an_answer_shaped_for_the_chunk_costs_one_call_and_feeds_the_running_summary_too(
    tmp_path: Path,
) -> None:
    """A model that answers every request with the chunk's shape (a goal and its decisions, as text),
    not the five headings of the durable summary: a usable answer, never retried (#35)."""
    answer = json.dumps(
        {"user_goal": GOAL, "text": f"Goal: {GOAL}\nDecisions:\n- keep the sync client behind a flag (rollback)"}
    )
    with FakeLLMServer(responder=lambda body: answer) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model", config=COMPACT, api_base=server.base_url, api_key="sk-test"
        )
        outcomes = await compact_three_times(tmp_path, summarizer, server)
    stats = summarizer.stats()
    # Before: each compaction's call was judged "only the prompt's skeleton", retried and fell back.
    assert outcomes == [(True, 1), (True, 1), (True, 1)]
    assert (stats.repair_retries, stats.invalid_outputs, stats.fallbacks) == (0, 0, 0)
    running = Layout(tmp_path).running_summary.read_text(encoding="utf-8")
    assert "keep the sync client behind a flag (rollback)" in running


async def test_without_the_one_call_mode_a_compaction_makes_three_calls(tmp_path: Path) -> None:
    with FakeLLMServer(responder=responder) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model",
            config=COMPACT,
            api_base=server.base_url,
            api_key="sk-test",
            one_call_per_compaction=False,
        )
        outcomes = await compact_three_times(tmp_path, summarizer, server)
    # session_summary (running summary), history (chunk) and turn_prefix (split turn), each compaction.
    assert outcomes == [(True, 3), (True, 3), (True, 3)]


async def test_a_model_that_only_echoes_the_prompt_costs_one_call_and_loses_nothing(tmp_path: Path) -> None:
    """What Gemma 3 270M did in the local-model benchmark: the skeleton back, cut off at max_tokens."""
    echo = {
        "content": '{"user_goal": "the user\'s goal for this part of the session, in',
        "finish_reason": "length",
    }
    with FakeLLMServer(responder=lambda body: echo) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model",
            config=COMPACT,
            api_base=server.base_url,
            api_key="sk-test",
            invalid_retries=0,
        )
        outcomes = await compact_three_times(tmp_path, summarizer, server)
    assert outcomes == [(True, 1), (True, 1), (True, 1)]
    stats = summarizer.stats()
    # Per compaction: the running summary and the chunk of its range both from the extractive fallback.
    assert (stats.fallbacks, stats.reused_answers, stats.failures) == (7, 3, 0)
    # Every call answered (by the fallback when not by the model): each counted once as a success.
    assert (stats.successes, stats.rejected) == (stats.calls, 0)
    summary = Layout(tmp_path).summary.read_text(encoding="utf-8")
    assert "I decided to use logical replication." in summary
    assert "raw breadcrumb" not in summary


async def test_a_lone_surrogate_escape_in_the_answer_becomes_a_replacement_character() -> None:
    # "\ud83d" alone (half an emoji): the decoded text could never be stored, and every pass failed.
    reply = json.dumps({**GOOD, "constraints": [f"{DEADLINE} MARK"]}).replace("MARK", "\\ud83d")
    assert "\\ud83d" in reply
    result, _stats, requests = await answer(reply)
    assert requests == 1
    assert result.structured.constraints == (f"{DEADLINE} \ufffd",)
    assert f"{DEADLINE} \ufffd" in result.text
    assert_no_lost_facts(result)


async def test_an_unusable_answer_whose_fallback_fails_counts_as_a_failed_call() -> None:
    request = SummaryRequest(
        purpose="history",
        events=(SessionEvent(type="user_input", role="user", content="fix the parser", seq=1),),
        max_tokens=200,
    )
    with FakeLLMServer(responder=lambda _body: "") as server:  # an empty answer: unusable
        summarizer = LiteLLMSummarizer(
            "openai/m", api_base=server.base_url, api_key="k", fallback=FailingSummarizer(),
            config=Config(summarizer_retries=0),
        )
        with pytest.raises(SummarizerError):
            await summarizer.summarize(request)
        stats = summarizer.stats()
    assert (stats.calls, stats.successes, stats.failures, stats.fallbacks) == (1, 0, 1, 1)
