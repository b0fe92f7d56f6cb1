"""The summary schema, exclusions, merging, the PROJECT MEMORY block and the cap plan (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.longterm.project import render_project_memory
from aiden.longterm.summaries import (
    SessionSummary,
    clean_item,
    conflict_key,
    is_excluded,
    merge_many,
    merge_summaries,
    parse_summary_md,
    render_summary_md,
    strip_thinking,
    summary_from_result,
)
from aiden.longterm.writer import plan_cap
from aiden.policy.summary_md import normalize
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.protocol import Decision, StructuredSummary, SummaryResult

FULL = SessionSummary(
    kind="session",
    session_id="s1",
    created_at=1_767_323_045,
    outcome=("Shipped the yarn-based build.",),
    working_recipes=("$ yarn build --mode=production",),
    failed_approaches=("Approach X breaks the build because the loader order changes.",),
    user_preferences=("Always use yarn, never npm.",),
    facts=("The API server lives in src/server/main.ts.", "The staging database port is 5433."),
)


def test_markdown_round_trip_is_exact() -> None:
    text = render_summary_md(FULL)
    assert text.startswith("# SESSION SUMMARY\nsession: s1\ncreated: 2026-01-02T03:04:05Z\n\n## OUTCOME\n")
    assert "## WORKING RECIPES\n- $ yarn build --mode=production\n" in text
    assert parse_summary_md(text) == FULL
    empty = SessionSummary(kind="digest", session_id="digest", created_at=5, through="20260101T000000Z-a")
    rendered = render_summary_md(empty)
    assert "## FAILED APPROACHES\n- (none)\n" in rendered
    assert parse_summary_md(rendered) == empty
    running = SessionSummary(kind="running", session_id="r", created_at=7, through_seq=42, facts=("x is 1",))
    assert parse_summary_md(render_summary_md(running)) == running


def test_parse_is_lenient_with_hostile_headers_and_wrapped_bullets() -> None:
    text = (
        "# SESSION SUMMARY\nsession: ../etc/passwd\ncreated: yesterday\nthrough_seq: 99999999999999999999\n"
        "## Project Facts\n- first line\n  continues here\n* star bullet\nstray text ignored? no: joins\n"
        "## Something Else\n- ignored\n"
    )
    parsed = parse_summary_md(text)
    assert parsed.session_id == ""
    assert parsed.created_at == 0
    assert parsed.through_seq == 0
    assert parsed.facts == ("first line continues here", "star bullet stray text ignored? no: joins")


@pytest.mark.parametrize(
    "text",
    ["Hi there!", "Thanks!", "Thank you so much.", "Sure.", "Noted, I will keep that in mind.", "Done.",
     "Hmm, let me think about the loader.", "Let me see what the build does.", "Okay so maybe we should retry.",
     "Open: Plan: Noted, I will keep that in mind.", "Happy to help!", "Goal: Hello"],
)
def test_exclusions(text: str) -> None:
    assert is_excluded(text)
    assert clean_item(text) == ""


def test_clean_item_keeps_substance_and_strips_greeting_and_thinking() -> None:
    assert not is_excluded("Always use yarn, never npm.")
    assert clean_item("Thanks! The API server lives in src/server/main.ts.") == "The API server lives in src/server/main.ts."
    assert clean_item("<think>should I?</think> Use ruff for linting.") == "Use ruff for linting."
    assert strip_thinking("a <THINKING>x\ny</THINKING> b <think>unclosed") == "a   b  "
    long_item = clean_item("- " + "word " * 300)
    assert len(long_item) == 595 and long_item.endswith("word word…")


def test_summary_from_result_prefers_headed_text_then_structured_fields() -> None:
    text = "## OUTCOME\n- Hello!\n- Built it.\n## USER PREFERENCES\n- Always use yarn, never npm.\n"
    parsed = summary_from_result(SummaryResult(text=text), session_id="a", created_at=3)
    assert parsed == SessionSummary(
        session_id="a", created_at=3, outcome=("Built it.",), user_preferences=("Always use yarn, never npm.",)
    )
    structured = StructuredSummary(
        outcome="Done.",
        user_preferences=("Prefer tabs over spaces.",),
        constraints=("Never touch vendor/.",),
        decisions=(Decision(what="Use sqlite", why="simple"),),
        facts=("Port is 8080.",),
        failed_approaches=("Caching broke tests.",),
    )
    from_fields = summary_from_result(SummaryResult(text="plain text", structured=structured))
    assert from_fields.outcome == ()
    assert from_fields.user_preferences == ("Prefer tabs over spaces.", "Never touch vendor/.")
    assert from_fields.facts == ("Port is 8080.", "Use sqlite (simple)")
    assert from_fields.failed_approaches == ("Caching broke tests.",)


@pytest.mark.parametrize(
    ("section", "text", "key"),
    [
        ("user_preferences", "Always use yarn, never npm.", "choice:package manager"),
        ("user_preferences", "Use npm for this project.", "choice:package manager"),
        ("user_preferences", "I prefer tabs over spaces.", "choice:indentation"),
        ("facts", "Remember: the database is postgres 16.", "subject:database"),
        ("facts", "staging database port: 6543", "subject:staging database port"),
        ("facts", "Use pytest fixtures for setup", None),
        ("failed_approaches", "Approach X breaks the build because the loader order changes.", None),
        ("facts", "Key files: src/a.py", None),
        ("outcome", "Status: shipped", None),
    ],
)
def test_conflict_keys(section: str, text: str, key: str | None) -> None:
    assert conflict_key(section, text) == key  # type: ignore[arg-type]


def test_merge_dedupes_and_most_recent_wins() -> None:
    old = SessionSummary(
        session_id="old",
        user_preferences=("Always use yarn, never npm.", "Prefer small commits."),
        facts=("The staging port is 5433.", "Build output goes to dist/."),
    )
    new = SessionSummary(
        session_id="new",
        user_preferences=("Use npm for this project.", "prefer small commits"),
        facts=("The staging port is 6543.",),
    )
    merged = merge_summaries(old, new)
    assert merged.session_id == "new"
    assert merged.user_preferences == ("Use npm for this project.", "prefer small commits")
    assert merged.facts == ("Build output goes to dist/.", "The staging port is 6543.")
    assert merge_summaries(merged, new) == merged  # idempotent
    capped = merge_summaries(old, new, max_items=1)
    assert capped.facts == ("The staging port is 6543.",)
    assert merge_many([]) is None


def test_project_memory_budget_and_priority() -> None:
    digest = SessionSummary(kind="digest", facts=("Session 1 decided: storage backend is sqlite.",))
    older = SessionSummary(user_preferences=("Always use yarn, never npm.",), outcome=("Old outcome.",))
    newer = SessionSummary(
        failed_approaches=("Approach X breaks the build.",),
        working_recipes=("$ yarn test --watch=false",),
        facts=("The API lives in src/api.",),
        outcome=("Shipped the API.",),
    )
    block = render_project_memory([older, newer], digest, budget_tokens=800, estimate=estimate_tokens)
    assert block == (
        "PROJECT MEMORY\nDurable knowledge from earlier sessions of this project (newest wins on conflicts).\n\n"
        "USER PREFERENCES (follow these)\n- Always use yarn, never npm.\n\n"
        "FAILED APPROACHES (do not repeat)\n- Approach X breaks the build.\n\n"
        "WORKING RECIPES\n- $ yarn test --watch=false\n\n"
        "PROJECT FACTS\n- Session 1 decided: storage backend is sqlite.\n- The API lives in src/api.\n\n"
        "RECENT OUTCOMES\n- Old outcome.\n- Shipped the API."
    )
    full = estimate_tokens(block)
    for budget in range(full - 1, 0, -3):
        small = render_project_memory([older, newer], digest, budget_tokens=budget, estimate=estimate_tokens)
        assert small == "" or (small.startswith("PROJECT MEMORY") and estimate_tokens(small) <= budget)
    tight = render_project_memory([older, newer], digest, budget_tokens=55, estimate=estimate_tokens)
    assert "Always use yarn, never npm." in tight and "Approach X breaks the build." in tight
    assert "WORKING RECIPES" not in tight and "RECENT OUTCOMES" not in tight
    assert render_project_memory([], None, budget_tokens=800, estimate=estimate_tokens) == ""
    assert render_project_memory([older], None, budget_tokens=3, estimate=estimate_tokens) == ""


def test_project_memory_recency_wins_across_sessions() -> None:
    one = SessionSummary(user_preferences=("Always use yarn, never npm.",))
    two = SessionSummary(user_preferences=("Use npm for this project.",))
    block = render_project_memory([one, two], None, budget_tokens=800, estimate=estimate_tokens)
    assert "Use npm for this project." in block and "yarn" not in block


def test_plan_cap() -> None:
    stems = [f"2026010{i}T000000Z-s{i}" for i in range(1, 10)]
    assert plan_cap(stems, keep=10, through="").merge == ()
    plan = plan_cap(list(reversed(stems)), keep=6, through="")
    assert plan.merge == tuple(stems[:3]) and plan.delete_only == ()
    crashed = plan_cap(stems, keep=6, through=stems[1])
    assert crashed.delete_only == tuple(stems[:2]) and crashed.merge == (stems[2],)
    with pytest.raises(ValueError):
        plan_cap(stems, keep=-1, through="")


_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=80
) | st.sampled_from(["Hi! Thanks! Use yarn.", "- - nested bullet", "Goal: hello there", "(none)", "<think>x</think>y"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=6), st.lists(_TEXT, max_size=6), st.integers(0, 2**31))
def test_clean_items_round_trip_through_markdown(prefs: list[str], facts: list[str], created: int) -> None:
    def clean(items: list[str]) -> tuple[str, ...]:
        out: dict[str, str] = {}
        for raw in items:
            item = clean_item(raw)
            if item:
                assert clean_item(item) == item  # cleaning is idempotent
                out.setdefault(normalize(item), item)
        return tuple(out.values())

    summary = SessionSummary(session_id="s", created_at=created, user_preferences=clean(prefs), facts=clean(facts))
    assert parse_summary_md(render_summary_md(summary)) == summary
