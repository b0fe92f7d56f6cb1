"""Summaries a person would accept (#19): read every benchmark summary as a person would.

Over the summaries the benchmarks produce (three generated sessions at the
fidelity window, the demo, and the next session's PROJECT MEMORY block) and
over small hand-written sessions: no ``Decisions:`` entry is a question, no
``Errors:`` entry is a user request, the goal is the root input (never a
routine "continue" line), repeated near-identical requests collapse to the
current state, and the rolling summary holds no raw chunk dumps.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from aiden.demo import DEMO_CONFIG
from aiden.events import SessionEvent
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest
from tests.summarizers.conftest import DemoRun

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ROOT = Path(__file__).resolve().parents[2]
ROUTINE = re.compile(r"^(?:User:\s*)?(?:Continue with the \w+ migration|Next step for PROJ-)", re.IGNORECASE)


@functools.cache
def _load_resume() -> ModuleType:
    # Once per process: _sections reads every summary with it (some 40 calls), and each load
    # would run the script again and put three more entries on sys.path.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "fidelity_resume", ROOT / "benchmarks" / "fidelity" / "resume.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def benchmark_summaries(demo_run: DemoRun) -> list[tuple[str, str, str]]:
    """``(name, summary.md, PROJECT MEMORY)`` of three generated sessions and the demo.

    The demo is ``run_demo(root)`` with its defaults, run once per session and shared with
    ``test_summary_information`` (``conftest.demo_run``).
    """
    resume = _load_resume()
    out: list[tuple[str, str, str]] = []
    for seed in (1, 2, 3):
        turns, facts = resume.scenario_turns(seed, 30)
        result = anyio.run(
            resume.drive, f"scenario-{seed}", turns, (), [f.text for f in facts], None, resume.RESUME_CONFIG
        )
        out.append((result.name, result.summary_md, result.project_memory))
    out.append(("demo", demo_run.summary_md, ""))
    return out


@pytest.fixture(scope="module")
def all_benchmark_summaries(benchmark_summaries: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The above, the real sessions (with ``AIDEN_REAL_DATA``) and the LLM path (one call per compaction).

    The LLM path runs against the local fake server, whose "model" echoes
    transcript lines: what it files under Decisions or Errors is what aiden's
    reading of an answer (misfiled items moved) and its must-keep check let through.
    """
    resume = _load_resume()
    out = list(benchmark_summaries)
    real = os.environ.get("AIDEN_REAL_DATA")
    folder = Path(real) / "swe-agent" if real else None
    server, llm = resume.fake_llm_summarizer()
    try:
        turns, facts = resume.scenario_turns(1, 30)
        result = anyio.run(
            resume.drive, "scenario-1 (LLM)", turns, (), [f.text for f in facts], llm, resume.RESUME_CONFIG
        )
        out.append((result.name, result.summary_md, result.project_memory))
        if folder is not None and folder.is_dir():
            for summarizer in (None, llm):
                out.extend(
                    (r.name, r.summary_md, r.project_memory) for r in resume.drive_real(folder, summarizer)
                )
    finally:
        server.close()
    return out


# A request for work, in any of the benchmark sessions' phrasings (the real ones say "(continue) step N").
REQUEST = re.compile(
    r"^(?:User:\s*)?(?:\(continue\)|please\b|continue\b|now (?:fix|add|run|write|check)\b)", re.I
)


def _sections(text: str) -> list[tuple[str, str]]:
    resume = _load_resume()
    lines: list[tuple[str, str]] = resume.sections_of(text, "")
    return lines


def _rolling(summary_md: str) -> str:
    start = summary_md.find("## Rolling Summary")
    end = summary_md.find("## Recent Chunks")
    return summary_md[start : end if end >= 0 else None] if start >= 0 else ""


def test_no_decision_is_a_question(all_benchmark_summaries: list[tuple[str, str, str]]) -> None:
    assert len(all_benchmark_summaries) >= 5
    for name, summary_md, _pm in all_benchmark_summaries:
        questions = [
            line for section, line in _sections(summary_md) if section == "decisions" and "?" in line
        ]
        assert questions == [], name


def test_no_error_entry_is_a_user_request(all_benchmark_summaries: list[tuple[str, str, str]]) -> None:
    for name, summary_md, _pm in all_benchmark_summaries:
        requests = [
            line
            for section, line in _sections(summary_md)
            if section == "errors" and (ROUTINE.match(line) or REQUEST.match(line))
        ]
        assert requests == [], name


def test_goal_is_never_a_routine_continue_line(benchmark_summaries: list[tuple[str, str, str]]) -> None:
    for name, summary_md, _pm in benchmark_summaries:
        goals = [line for section, line in _sections(summary_md) if section == "goal" and ROUTINE.match(line)]
        assert goals == [], name


def test_project_memory_holds_the_root_goal_and_no_routine_requests_as_facts(
    benchmark_summaries: list[tuple[str, str, str]],
) -> None:
    for name, _md, pm in benchmark_summaries:
        if name == "demo":
            continue
        facts = (
            pm.split("PROJECT FACTS", 1)[1].split("RECENT OUTCOMES", 1)[0] if "PROJECT FACTS" in pm else ""
        )
        assert [ln for ln in facts.splitlines() if ROUTINE.match(ln.lstrip("- "))] == [], name
        assert re.search(r"^- Goal: Please migrate the \w+ service", pm, re.MULTILINE), name


def test_repeated_requests_collapse_to_the_current_state(
    benchmark_summaries: list[tuple[str, str, str]],
) -> None:
    for name, summary_md, _pm in benchmark_summaries:
        # In all of summary.md (not only the rolling summary): one line, the newest step; the
        # older chunks' and the rolling summary's steps are superseded by it (#19).
        routine = [ln.strip() for ln in summary_md.splitlines() if ROUTINE.match(ln.strip().lstrip("- "))]
        assert len(routine) == 1, (name, routine)
        newest = max(int(n) for n in re.findall(r"\bstep (\d+)", summary_md))
        assert f"step {newest}" in routine[0], (name, routine)


def test_no_raw_chunk_dumps_in_the_rolling_summary(benchmark_summaries: list[tuple[str, str, str]]) -> None:
    for name, summary_md, _pm in benchmark_summaries:
        rolling = _rolling(summary_md)
        dumps = [
            ln
            for ln in rolling.splitlines()
            if re.match(r"^\s*(?:\[chunk_|- \*\*chunk_|Turn Context|Tool results:|---$)", ln)
        ]
        assert dumps == [], name


def test_the_demo_summary_fits_its_layer_without_noise(
    benchmark_summaries: list[tuple[str, str, str]],
) -> None:
    (demo,) = [md for name, md, _pm in benchmark_summaries if name == "demo"]
    sections = _sections(demo)
    commands = [line for section, line in sections if section == "commands"]
    # Before #19's noise rules: ~2,400 tokens for a 1,200-token layer, 57% of it read-only calls,
    # one test command in 7 chunks, docstrings, search-hit paths and INFO/DEBUG log lines.
    assert estimate_tokens(demo) <= DEMO_CONFIG.summary_layer_tokens()
    assert [c for c in commands if c.startswith(("read_file(", "search("))] == []
    assert len(commands) == len(set(commands))
    assert "Tool results:" not in demo


def _summarize(*events: SessionEvent) -> str:
    numbered = tuple(
        SessionEvent(type=e.type, seq=i + 1, content=e.content, tool_name=e.tool_name)
        for i, e in enumerate(events)
    )
    request = SummaryRequest(purpose="history", events=numbered, max_tokens=800)
    return ExtractiveSummarizer().summarize_sync(request).text


def test_a_question_is_never_a_decision_or_constraint() -> None:
    text = _summarize(
        SessionEvent(type="user_input", content="Please add CSV export to the billing service."),
        SessionEvent(type="assistant_output", content="Done: export.py writes the CSV."),
        SessionEvent(type="user_input", content="Should we switch to Postgres instead of MySQL?"),
        SessionEvent(type="user_input", content="Do we always have to run the full suite?"),
    )
    sections = _sections(text)
    assert [ln for s, ln in sections if s in ("decisions", "constraints", "preferences") and "?" in ln] == []


def test_a_request_that_names_a_failure_is_not_an_error() -> None:
    text = _summarize(
        SessionEvent(type="user_input", content="Please add CSV export to the billing service."),
        SessionEvent(type="assistant_output", content="Done: export.py writes the CSV."),
        SessionEvent(
            type="user_input", content="Now fix the failing login test and check the timeout handling."
        ),
    )
    assert [ln for s, ln in _sections(text) if s == "errors"] == []


def test_steps_of_one_request_collapse_in_a_chunk() -> None:
    events = [
        SessionEvent(type="user_input", content="Please migrate the gateway service to the async client.")
    ]
    for step in range(1, 8):
        events.append(
            SessionEvent(
                type="user_input",
                content=f"Continue with the gateway migration (PROJ-17), step {step}: check the queue handling.",
            )
        )
        events.append(
            SessionEvent(type="assistant_output", content=f"Checked {step} places; tests pass so far.")
        )
    text = _summarize(*events)
    routine = [ln for _s, ln in _sections(text) if ROUTINE.match(ln)]
    assert len(routine) <= 1, text
    assert "steps 1\u20137" in text and "now at step 7" in text, text


REJECTED_PLAN = "Plan: first I will dump the database with pg_dump, then restore it on the new server."
NEW_PLAN = "Plan: next I will set up logical replication to the new server, then cut over."


def test_a_plan_the_user_rejected_is_superseded_and_the_current_one_kept() -> None:
    goal = SessionEvent(type="user_input", content="Please migrate the billing service to Postgres 16.")
    rejected = SessionEvent(type="assistant_output", content=REJECTED_PLAN)
    objection = SessionEvent(type="user_input", content="pg_dump takes too long on 2 TB, that will not work.")
    # Before the objection the plan is the open thread, after it the plan is gone (the failed
    # approach keeps why); a new plan is the open thread again, once, without a doubled label.
    assert "- Plan: first I will dump the database" in _summarize(goal, rejected)
    text = _summarize(goal, rejected, objection)
    assert ("pg_dump, then restore" in text, "Failed approaches:\n- pg_dump takes too long" in text) == (
        False,
        True,
    )
    text = _summarize(goal, rejected, objection, SessionEvent(type="assistant_output", content=NEW_PLAN))
    assert [ln for s, ln in _sections(text) if s == "open" and ln.startswith("Plan:")] == [NEW_PLAN]
    assert "pg_dump, then restore" not in text


def test_project_memory_leads_with_the_goal_even_under_a_tight_budget() -> None:
    from aiden.longterm.project import render_project_memory
    from aiden.longterm.summaries import SessionSummary
    from aiden.policy.tokens import estimate_tokens

    older = SessionSummary(
        user_preferences=("Always use yarn, never npm.",),
        outcome=("Goal: Please migrate the gateway service to the async client without downtime.",),
    )
    newer = SessionSummary(
        failed_approaches=("Monkeypatching the session globally broke the retry middleware.",),
        facts=("The API lives in src/api.",),
        outcome=(
            "Goal: Migrate the gateway service, now behind the gateway_async_v2 flag.",
            "Shipped step 3.",
        ),
    )
    block = render_project_memory([older, newer], None, budget_tokens=800, estimate=estimate_tokens)
    assert block.split("\n\n")[1] == (
        "GOAL (why this project exists)\n"
        "- Goal: Migrate the gateway service, now behind the gateway_async_v2 flag.\n"
        "- Goal: Please migrate the gateway service to the async client without downtime."
    )
    assert block.split("\n\n")[-1] == "RECENT OUTCOMES\n- Shipped step 3."
    # A budget that holds one item (and the per-item estimates' slack) holds the goal, not the
    # preference that outranks every other section.
    only_goal = (
        block.split("\n\n")[0]
        + "\n\nGOAL (why this project exists)\n"
        + "- Goal: Migrate the gateway service, now behind the gateway_async_v2 flag."
    )
    tight = render_project_memory(
        [older, newer], None, budget_tokens=estimate_tokens(only_goal) + 4, estimate=estimate_tokens
    )
    assert tight == only_goal


def test_resume_benchmark_project_memory_starts_with_the_root_goal(
    benchmark_summaries: list[tuple[str, str, str]],
) -> None:
    for name, _md, pm in benchmark_summaries:
        if name == "demo":
            continue
        first_item = pm.split("\n\n")[1]
        assert re.match(
            r"GOAL \(why this project exists\)\n- Goal: Please migrate the \w+ service", first_item
        ), name
