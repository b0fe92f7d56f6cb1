"""Echoes of the summarizer prompt's skeleton never become memory (issue [Window]).

A small or wordy model may answer with the schema it was shown
(``"user_goal": "the user's goal for this part..."``), the key list or the
instructions. LiteLLMSummarizer drops such fields and lines; an answer that is
nothing but skeleton is invalid, like any other unusable output.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from aiden.config import Config
from aiden.errors import InvalidSummaryError
from aiden.events import SessionEvent
from aiden.summarizers.llm.prompts import Scaffold, clean_text, read_answer, scaffold
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    SummaryRequest,
    SummaryResult,
)
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("litellm_ready")]

REQUEST = SummaryRequest(
    purpose="history",
    events=(
        SessionEvent(type="user_input", seq=1, content="Add CSV export. It must be done by Friday."),
        SessionEvent(
            type="assistant_output", seq=2, content="I decided to use the csv module because it is stdlib."
        ),
    ),
)
TEXT = "Goal: Add CSV export\nConstraints:\n- It must be done by Friday.\nDecisions:\n- use the csv module (stdlib)"
ANSWER: dict[str, Any] = {
    "user_goal": "Add CSV export",
    "decisions": [{"what": "use the csv module", "why": "it is stdlib"}],
    "constraints": ["It must be done by Friday."],
    "text": TEXT,
}
EXPECTED = SummaryResult(
    text=TEXT,
    structured=StructuredSummary(
        user_goal="Add CSV export",
        decisions=(Decision(what="use the csv module", why="it is stdlib"),),
        constraints=("It must be done by Friday.",),
    ),
)
# What a model that parrots summarize.md answers: the skeleton itself.
SKELETON: dict[str, Any] = {
    "user_goal": "the user's goal for this part of the session, in their words",
    "outcome": "what happened in this part, in a sentence or two (never only a file list)",
    "decisions": [{"what": "the decision", "why": "its reason"}],
    "constraints": ["constraints, limits and deadlines, verbatim"],
    "user_preferences": ["preferences and corrections the user expressed, verbatim"],
    "errors": [{"error": "the error message", "resolution": "how it was fixed, or empty"}],
    "failed_approaches": ["what was tried and failed, with the reason"],
    "open_threads": ["the work still in progress / the last request"],
    "files_touched": ["file paths"],
    "working_recipes": ["commands exactly as used that worked"],
    "facts": [
        "what a later question could need, each a full sentence with who said it: names, places, dates, numbers, identifiers, URLs"
    ],
    "text": (
        "the summary as plain text with these sections, each only if non-empty: 'Goal: ...', "
        "'Outcome: ...', 'Constraints:', 'Preferences:', 'Decisions:', 'Errors:', 'Failed approaches:', "
        "'Open thread:', 'Files: a, b', 'Commands:', 'Facts:' (one '- ' bullet per item)"
    ),
}


def against(server: FakeLLMServer) -> LiteLLMSummarizer:
    # The per-request mode: the answer's own text is used, so its echoes must be removed
    # (the default one-call mode renders the fields; its skeleton-only answer falls back:
    # test_llm_malformed.py).
    return LiteLLMSummarizer(
        "openai/test-model",
        config=Config(),
        api_base=server.base_url,
        api_key="sk-test",
        one_call_per_compaction=False,
    )


async def summarize_reply(reply: str) -> SummaryResult:
    with FakeLLMServer(script=[reply]) as server:
        result = await against(server).summarize(REQUEST)
        assert server.handler_errors == []
    return result


@pytest.mark.anyio
async def test_a_normal_reply_is_unchanged() -> None:
    assert await summarize_reply(json.dumps(ANSWER)) == EXPECTED


@pytest.mark.anyio
async def test_fields_that_echo_the_skeleton_are_dropped() -> None:
    reply = {
        "user_goal": "The user's goal for this part...",  # truncated, other case: still the placeholder
        "decisions": [
            {"what": "the decision", "why": "its reason"},
            {"what": "use the csv module", "why": "its  reason"},
        ],
        "constraints": ["constraints, limits and deadlines, verbatim", "It must be done by Friday."],
        "user_preferences": ["preferences and corrections the user expressed, verbatim"],
        "errors": [
            {"error": "the error message", "resolution": "how it was fixed, or empty"},
            {"error": "ImportError: no module csvx", "resolution": "how it was fixed, or empty"},
        ],
        "open_threads": ["the work still in progress / the last request"],
        "files_touched": ["file paths", "aiden/export.py"],
        "working_recipes": ["Commands exactly as used that worked."],
        "facts": [
            "what a later question could need, each a full sentence with who said it: names, places, dates, numbers, identifiers, URLs"
        ],
        "text": TEXT,
    }
    result = await summarize_reply(json.dumps(reply))
    assert result == SummaryResult(
        text=TEXT,
        structured=StructuredSummary(
            decisions=(Decision(what="use the csv module"),),
            constraints=("It must be done by Friday.",),
            errors=(ErrorResolution(error="ImportError: no module csvx"),),
            files_touched=("aiden/export.py",),
        ),
    )


@pytest.mark.anyio
async def test_lines_that_echo_the_template_are_removed_from_the_text() -> None:
    echoed = "\n".join(
        [
            'Return one JSON object with these keys (omit nothing; use "" or [] when empty):',
            "{",
            '"user_goal": "the user\'s goal for this part...",',
            "user_goal, decisions, constraints, user_preferences, errors, failed_approaches",
            "Goal: Add CSV export",
            "Constraints:",
            "- It must be done by Friday.",
            "- constraints, limits and deadlines, verbatim",
            "Decisions:",
            "- use the csv module (stdlib)",
            "Files: a, b",
            "Open thread: the work still in progress / the last request",
            'Keep "text" under 1200 tokens. Do not repeat the previous summary; only add what these events contain.',
            "}",
        ]
    )
    result = await summarize_reply(json.dumps({**ANSWER, "text": echoed}))
    assert result == EXPECTED


@pytest.mark.anyio
async def test_plain_text_echoes_are_removed_too() -> None:
    reply = "Summarize the session events below (an older part of the conversation).\n" + TEXT
    assert await summarize_reply(reply) == SummaryResult(text=TEXT)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(SKELETON),
        "```json\n" + json.dumps(SKELETON, indent=2) + "\n```",
        json.dumps({**SKELETON, "text": ""}),
        "Goal: the user's goal for this part of the session, in their words\n- file paths\nFiles: a, b",
    ],
    ids=["json", "fenced", "fields-only", "plain-text"],
)
async def test_a_reply_that_is_only_skeleton_is_invalid(reply: str) -> None:
    with FakeLLMServer(script=[reply]) as server:
        summarizer = against(server)
        with pytest.raises(InvalidSummaryError, match="skeleton"):
            await summarizer.summarize(REQUEST)
    stats = summarizer.stats()
    assert (stats.failures, stats.invalid_outputs, stats.retries) == (1, 1, 0)


def test_session_headings_and_none_bullets_are_kept() -> None:
    text = "## OUTCOME\n- shipped CSV export\n\n## WORKING RECIPES\n- (none)\n\n## PROJECT FACTS\n- (none)"
    assert read_answer(
        json.dumps({"outcome": "shipped CSV export", "text": text}), session=True
    ).result == (SummaryResult(text=text, structured=StructuredSummary(outcome="shipped CSV export")))


def test_the_placeholders_come_from_the_prompt_files() -> None:
    skeleton = (
        resources.files("aiden.summarizers").joinpath("prompts", "summarize.md").read_text(encoding="utf-8")
    )
    quoted = [q for q in re.findall(r'"([^"\n]*)"', skeleton) if " " in q and "$" not in q]
    assert len(quoted) >= 10
    assert all(scaffold().is_placeholder(q) for q in quoted)
    assert {"user_goal", "files_touched", "working_recipes", "what", "why"} <= scaffold().keys


def test_a_changed_prompt_changes_what_is_stripped() -> None:
    prompt = (
        'Return {"next_step": "the very next step to take, in one line"}\nAlways answer in JSON only, please.'
    )
    custom = Scaffold([prompt])
    text = "the very next step to take...\nnext_step\nAlways answer in JSON only, please.\nrun the tests"
    assert clean_text(text, custom) == "next_step\nrun the tests"
    assert clean_text(text) == text  # aiden's own prompts have no such placeholder
