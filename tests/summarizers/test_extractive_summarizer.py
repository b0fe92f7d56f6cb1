"""ExtractiveSummarizer: keeps what seed 001 calls never compactable, drops raw tool output."""

# Chinese test text uses full-width punctuation on purpose (CJK sentence splitting).
# ruff: noqa: RUF001

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiden.events import SessionEvent
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.mustkeep.check import apply_must_keep, extract_must_keep
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    Summarizer,
    SummaryRequest,
)

pytestmark = pytest.mark.timeout(30)

RAW_ROWS = "\n".join(f"{i:03d} | SELECT * FROM invoices WHERE id = {i};" for i in range(400))
TRACEBACK = (
    "F.\nTraceback (most recent call last):\n"
    '  File "billing/export.py", line 3, in <module>\n'
    "    import yaml\n"
    "ModuleNotFoundError: No module named 'yaml'\n"
    "1 failed, 1 passed"
)


def session() -> tuple[SessionEvent, ...]:
    return (
        SessionEvent(
            type="user_input",
            seq=1,
            content="Hi! Please add CSV export to the billing service. It must be done by Friday.",
        ),
        SessionEvent(
            type="assistant_output",
            seq=2,
            content=(
                "Sure. I decided to use the csv module instead of pandas because it adds no dependency. "
                "Let me look at the code."
            ),
        ),
        SessionEvent(
            type="tool_call",
            seq=3,
            tool_name="read_file",
            tool_call_id="c1",
            tool_args=json.dumps({"path": "billing/export.py"}),
        ),
        SessionEvent(type="tool_result", seq=4, tool_name="read_file", tool_call_id="c1", content=RAW_ROWS),
        SessionEvent(
            type="tool_call",
            seq=5,
            tool_name="bash",
            tool_call_id="c2",
            tool_args=json.dumps({"command": "pytest -q tests/test_export.py"}),
        ),
        SessionEvent(type="tool_result", seq=6, tool_name="bash", tool_call_id="c2", content=TRACEBACK),
        SessionEvent(
            type="assistant_output",
            seq=7,
            content=(
                "Fixed the ModuleNotFoundError by adding pyyaml to requirements.txt. "
                "I tried streaming rows with a generator but it did not work with the ORM session."
            ),
        ),
        SessionEvent(
            type="user_input",
            seq=8,
            content="Actually, I prefer semicolons as the delimiter. Invoice INV-2291 must stay under 5 MB.",
        ),
        SessionEvent(
            type="assistant_output", seq=9, content="Understood. Next I will run `make export` on staging."
        ),
    )


EXPECTED_HISTORY = """\
Goal: Please add CSV export to the billing service. It must be done by Friday.
Constraints:
- Invoice INV-2291 must stay under 5 MB.
Preferences:
- Actually, I prefer semicolons as the delimiter.
Decisions:
- I decided to use the csv module instead of pandas because it adds no dependency.
Errors:
- ModuleNotFoundError: No module named 'yaml' (from $ pytest -q tests/test_export.py) → fixed: \
Fixed the ModuleNotFoundError by adding pyyaml to requirements.txt.
Failed approaches:
- I tried streaming rows with a generator but it did not work with the ORM session.
Open thread:
- User: Actually, I prefer semicolons as the delimiter. Invoice INV-2291 must stay under 5 MB.
- Plan: Next I will run `make export` on staging.
Files: billing/export.py, tests/test_export.py, requirements.txt
Commands:
- $ pytest -q tests/test_export.py"""


def summarize(request: SummaryRequest, summarizer: ExtractiveSummarizer | None = None) -> str:
    return (summarizer or ExtractiveSummarizer()).summarize_sync(request).text


def test_is_a_summarizer() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_history_keeps_every_must_keep_kind_verbatim() -> None:
    result = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=session()))
    assert result.text == EXPECTED_HISTORY
    assert result.degraded is False
    assert result.structured == StructuredSummary(
        user_goal="Please add CSV export to the billing service. It must be done by Friday.",
        decisions=(
            Decision(
                what="I decided to use the csv module instead of pandas", why="because it adds no dependency."
            ),
        ),
        constraints=("It must be done by Friday.", "Invoice INV-2291 must stay under 5 MB."),
        open_threads=(
            "User: Actually, I prefer semicolons as the delimiter. Invoice INV-2291 must stay under 5 MB.",
            "Plan: Next I will run `make export` on staging.",
        ),
        errors=(
            ErrorResolution(
                error="ModuleNotFoundError: No module named 'yaml' (from $ pytest -q tests/test_export.py)",
                resolution="Fixed the ModuleNotFoundError by adding pyyaml to requirements.txt.",
            ),
        ),
        files_touched=("billing/export.py", "tests/test_export.py", "requirements.txt"),
        user_preferences=("Actually, I prefer semicolons as the delimiter.",),
        failed_approaches=("I tried streaming rows with a generator but it did not work with the ORM session.",),
        working_recipes=("$ pytest -q tests/test_export.py",),
        facts=("Next I will run `make export` on staging.",),
    )


def test_raw_tool_output_is_dropped() -> None:
    text = summarize(SummaryRequest(purpose="history", events=session()))
    # Not even the file's first line: numbered rows of a file read are content, not a finding (#19).
    assert "SELECT * FROM invoices" not in text
    assert "import yaml" not in text  # traceback body: only the exception line is kept
    assert "Traceback" not in text
    assert "Hi!" not in text and "Sure." not in text and "Let me look at the code." not in text


def test_turn_prefix_summarizes_like_history() -> None:
    request = SummaryRequest(purpose="turn_prefix", events=session())
    assert summarize(request) == EXPECTED_HISTORY


def test_previous_summary_of_a_history_request_is_not_repeated() -> None:
    request = SummaryRequest(
        purpose="history", events=session(), previous_summary="Goal: something older\nDecisions:\n- use Go"
    )
    assert summarize(request) == EXPECTED_HISTORY


def test_output_is_deterministic() -> None:
    request = SummaryRequest(purpose="history", events=session())
    first = ExtractiveSummarizer().summarize_sync(request)
    second = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=session()))
    assert first == second


@pytest.mark.anyio
async def test_async_summarize_equals_sync() -> None:
    request = SummaryRequest(purpose="history", events=session())
    summarizer = ExtractiveSummarizer()
    assert await summarizer.summarize(request) == summarizer.summarize_sync(request)


@pytest.mark.anyio
async def test_large_input_is_summarized_in_slices_with_the_same_result() -> None:
    big = tuple(
        SessionEvent(type="tool_result", seq=10 + i, tool_name="read_file", content="x = 1\n" * 60_000)
        for i in range(4)
    )
    request = SummaryRequest(purpose="history", events=(*session(), *big))
    summarizer = ExtractiveSummarizer()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        result = await summarizer.summarize(request)
        tg.cancel_scope.cancel()
    assert result == summarizer.summarize_sync(request)
    assert ticks >= 3  # the event loop ran other tasks between slices


def test_must_keep_check_finds_nothing_missing_in_an_extractive_summary() -> None:
    text = summarize(SummaryRequest(purpose="history", events=session()))
    items = extract_must_keep(session(), max_items=40)
    assert items  # the check has something to verify
    assert apply_must_keep(text, items, max_items=40) == text


def _many_facts_session() -> tuple[SessionEvent, ...]:
    events = [SessionEvent(type="user_input", seq=1, content="Build the reporting service.")]
    seq = 1
    for i in range(30):
        seq += 1
        events.append(SessionEvent(type="user_input", seq=seq, content=f"Never deploy region r{i} on weekends."))
        seq += 1
        events.append(
            SessionEvent(
                type="assistant_output",
                seq=seq,
                content=f"I decided to use cache layer L{i} because benchmark B{i} was {i + 10} ms faster.",
            )
        )
        seq += 1
        events.append(
            SessionEvent(type="assistant_output", seq=seq, content=f"The shard id is shard-{i:04d}-x.")
        )
    return tuple(events)


@pytest.mark.parametrize("budget", [8, 40, 120, 300, 600])
def test_budget_is_respected(budget: int) -> None:
    text = summarize(SummaryRequest(purpose="history", events=_many_facts_session(), max_tokens=budget))
    assert 0 < estimate_tokens(text) <= budget


def test_priority_under_a_tight_budget_keeps_goal_constraints_then_decisions() -> None:
    text = summarize(SummaryRequest(purpose="history", events=_many_facts_session(), max_tokens=300))
    lines = text.splitlines()
    assert lines[0] == "Goal: Build the reporting service."
    assert lines[1] == "Constraints:"
    # Every constraint fits before any lower-priority fact is considered ...
    constraints = [ln for ln in lines if ln.startswith("- Never deploy region")]
    decisions = [ln for ln in lines if ln.startswith("- I decided")]
    assert constraints[:3] == [
        "- Never deploy region r0 on weekends.",
        "- Never deploy region r1 on weekends.",
        "- Never deploy region r2 on weekends.",
    ]
    # ... but each load-bearing kind is guaranteed its first items.
    assert decisions[:1] == ["- I decided to use cache layer L0 because benchmark B0 was 10 ms faster."]
    assert "Facts:" in lines


def test_constructor_max_tokens_caps_the_request_budget() -> None:
    request = SummaryRequest(purpose="history", events=_many_facts_session(), max_tokens=5000)
    capped = summarize(request, ExtractiveSummarizer(max_tokens=100))
    assert estimate_tokens(capped) <= 100
    assert summarize(request) != capped


def test_invalid_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        ExtractiveSummarizer(max_tokens=0)
    with pytest.raises(ValueError, match="fold_max_lines must be positive"):
        ExtractiveSummarizer(fold_max_lines=0)


def test_chinese_sentences_are_split_and_classified() -> None:
    events = (
        SessionEvent(
            type="user_input",
            seq=1,
            content="请帮我把日志模块迁移到structlog。必须在周五之前完成！不要使用print调试。",
        ),
        SessionEvent(
            type="assistant_output",
            seq=2,
            content="好的。我们决定采用JSON格式输出，因为方便检索。我尝试了logging.config但是失败了，因为配置太复杂。",
        ),
        SessionEvent(type="user_input", seq=3, content="其实，请用UTC时间戳。"),
    )
    result = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events))
    assert result.text == (
        "Goal: 请帮我把日志模块迁移到structlog。必须在周五之前完成！不要使用print调试。\n"
        "Preferences:\n- 其实，请用UTC时间戳。\n"
        "Decisions:\n- 我们决定采用JSON格式输出，因为方便检索。\n"
        "Failed approaches:\n- 我尝试了logging.config但是失败了，因为配置太复杂。\n"
        "Open thread:\n- User: 其实，请用UTC时间戳。"
    )
    assert result.structured.constraints == ("必须在周五之前完成！", "不要使用print调试。")
    assert result.structured.decisions == (Decision(what="我们决定采用JSON格式输出，", why="因为方便检索。"),)


def test_chinese_budget_counts_one_token_per_character() -> None:
    events = tuple(
        SessionEvent(type="user_input", seq=i + 1, content=f"必须保留第{i}条约束，不要删除它。") for i in range(40)
    )
    text = summarize(SummaryRequest(purpose="history", events=events, max_tokens=100))
    assert 0 < estimate_tokens(text) <= 100
    assert len(text) <= 100  # CJK is never costed at four characters per token


def test_log_noise_does_not_crowd_out_facts() -> None:
    log = "\n".join(
        f"2024-05-0{i % 9 + 1} 12:00:{i % 60:02d} ERROR worker-{i % 8} request {1000 + i} error=timeout"
        for i in range(300)
    )
    events: list[SessionEvent] = [SessionEvent(type="user_input", seq=1, content="Investigate the timeouts.")]
    for i in range(10):
        events.append(
            SessionEvent(
                type="tool_call",
                seq=len(events) + 1,
                tool_name="bash",
                tool_call_id=f"t{i}",
                tool_args=json.dumps({"command": "kubectl logs api-0"}),
            )
        )
        events.append(
            SessionEvent(type="tool_result", seq=len(events) + 1, tool_name="bash", tool_call_id=f"t{i}", content=log)
        )
    events.append(
        SessionEvent(type="user_input", seq=len(events) + 1, content="Don't restart the api-0 pod during business hours.")
    )
    text = summarize(SummaryRequest(purpose="history", events=tuple(events), max_tokens=200))
    assert "- Don't restart the api-0 pod during business hours." in text
    # Ten identical log dumps collapse to one error line (timestamps and counters ignored).
    assert text.count("error=timeout") == 1


def test_resolution_pairs_with_the_error_it_names() -> None:
    events = (
        SessionEvent(type="tool_call", seq=1, tool_name="bash", tool_call_id="a", tool_args='{"command": "npm ci"}'),
        SessionEvent(
            type="tool_result",
            seq=2,
            tool_name="bash",
            tool_call_id="a",
            content="npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree",
        ),
        SessionEvent(type="tool_call", seq=3, tool_name="bash", tool_call_id="b", tool_args='{"command": "make db"}'),
        SessionEvent(
            type="tool_result",
            seq=4,
            tool_name="bash",
            tool_call_id="b",
            content="psycopg2.OperationalError: password authentication failed for user billing_rw",
        ),
        SessionEvent(
            type="assistant_output",
            seq=5,
            content="The ERESOLVE error was resolved by pinning grpc-tools to 1.12.4.",
        ),
    )
    result = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events))
    assert result.structured.errors == (
        ErrorResolution(
            error="npm ERR! code ERESOLVE (from $ npm ci)",
            resolution="The ERESOLVE error was resolved by pinning grpc-tools to 1.12.4.",
        ),
        ErrorResolution(error="npm ERR! ERESOLVE unable to resolve dependency tree (from $ npm ci)"),
        ErrorResolution(
            error="psycopg2.OperationalError: password authentication failed for user billing_rw (from $ make db)"
        ),
    )


def test_a_range_without_facts_still_gets_a_summary() -> None:
    chatter = (
        SessionEvent(type="user_input", seq=4, content="ok"),
        SessionEvent(type="assistant_output", seq=5, content="Checked 3 places in reports; tests pass so far."),
    )
    assert summarize(SummaryRequest(purpose="history", events=chatter)) == (
        "Notes:\n- Checked 3 places in reports; tests pass so far."
    )
    tools_only = (
        SessionEvent(type="tool_result", seq=8, content=""),
        SessionEvent(type="tool_result", seq=9, content="  \n"),
    )
    assert summarize(SummaryRequest(purpose="history", events=tools_only)) == (
        "Notes:\n- seq 8-9: 2 events, tool output only"
    )
    assert summarize(_fold_request("")) == "Notes:\n- (nothing to summarize)"


def test_synthetic_prefix_summary_in_the_range_keeps_its_facts() -> None:
    prefix = "Goal: Port the exporter.\nConstraints:\n- Never write to /etc/billing.conf.\nDecisions:\n- Use orjson because it is faster."
    events = (
        SessionEvent(type="system_event", seq=1, content=prefix, synthetic=True),
        SessionEvent(type="user_input", seq=2, content="ok"),
    )
    text = summarize(SummaryRequest(purpose="history", events=events))
    assert text == (
        "Goal: Port the exporter.\nConstraints:\n- Never write to /etc/billing.conf.\n"
        "Decisions:\n- Use orjson because it is faster."
    )


def _fold_request(text: str, max_tokens: int = 1200) -> SummaryRequest:
    return SummaryRequest(purpose="rolling_fold", text=text, max_tokens=max_tokens)


def test_rolling_fold_deduplicates_and_is_stable() -> None:
    chunk = summarize(SummaryRequest(purpose="history", events=session()))
    rolling = f"[chunk_1]\n{chunk}\n[chunk_2]\n{chunk}"
    folded = summarize(_fold_request(rolling))
    assert folded == EXPECTED_HISTORY
    assert summarize(_fold_request(folded)) == folded
    # A fold drops the chunks' tool-result lines: they only helped while the chunk was recent.
    noted = f"{EXPECTED_HISTORY}\nTool results:\n- $ python count.py: 344"
    assert summarize(_fold_request(f"[chunk_1]\n{noted}")) == EXPECTED_HISTORY


def test_rolling_fold_keeps_load_bearing_lines_first_under_budget() -> None:
    rolling = "\n".join(
        [
            "[... older rolling summary lines truncated ...]",
            "[chunk_a]",
            "Goal: Ship the ledger API.",
            "Tool results:",
            *[f"- read_file: line {i} of some file" for i in range(40)],
            "Commands:",
            *[f"- $ cat file{i}.txt" for i in range(40)],
            "[chunk_b]",
            "Goal: continue with tests",
            "Constraints:",
            "- Keep p99 latency under 250ms.",
            "Preferences:",
            "- I prefer pytest fixtures over setUp methods.",
            "Decisions:",
            "- We'll use Redis Streams instead of Kafka because ops already runs Redis.",
            "Errors:",
            "- OperationalError: password authentication failed → fixed: rotated the billing_rw password.",
            "Failed approaches:",
            "- I tried pool size 50 but the deadlocks persisted.",
            "Must keep:",
            "- Customer CUST-88231 has the broken invoice.",
        ]
    )
    folded = summarize(_fold_request(rolling, max_tokens=120))
    assert folded == (
        "Goal: Ship the ledger API.\n"
        "Constraints:\n- Keep p99 latency under 250ms.\n"
        "Preferences:\n- I prefer pytest fixtures over setUp methods.\n"
        "Decisions:\n- We'll use Redis Streams instead of Kafka because ops already runs Redis.\n"
        "Errors:\n- OperationalError: password authentication failed → fixed: rotated the billing_rw password.\n"
        "Failed approaches:\n- I tried pool size 50 but the deadlocks persisted.\n"
        "Facts:\n- Customer CUST-88231 has the broken invoice."
    )


def test_rolling_fold_respects_its_line_bound() -> None:
    rolling = "\n".join(f"- Never touch module m{i}." for i in range(200))
    folded = summarize(_fold_request(rolling, max_tokens=5000), ExtractiveSummarizer(fold_max_lines=20))
    lines = folded.splitlines()
    assert len(lines) == 20
    assert lines[:3] == ["Constraints:", "- Never touch module m0.", "- Never touch module m1."]


def _compact(events: list[SessionEvent], summarizer: ExtractiveSummarizer) -> str:
    """A miniature of the maintenance loop: chunk summaries, Recent Chunks, Rolling Summary with folds."""
    recent: list[str] = []
    rolling: list[str] = []
    chunk = 40
    for start in range(0, len(events), chunk):
        part = tuple(events[start : start + chunk])
        text = summarizer.summarize_sync(SummaryRequest(purpose="history", events=part, max_tokens=600))
        recent.append(apply_must_keep(text.text, extract_must_keep(part, max_items=40), max_items=40))
        while len(recent) > 3:
            rolling.append(f"[chunk_{start}]")
            rolling.extend(ln for ln in recent.pop(0).splitlines() if ln.strip())
            if len(rolling) > 100:
                folded = summarizer.summarize_sync(_fold_request("\n".join(rolling), max_tokens=600))
                rolling = folded.text.splitlines()[-100:]
    return "\n".join([*rolling, *recent])


def test_planted_facts_survive_many_compactions() -> None:
    facts = [
        ("user_input", "Never log card numbers, even masked ones.", "never log card numbers"),
        ("user_input", "The migration must be finished by March 3rd.", "march 3rd"),
        ("user_input", "Actually, the staging host is stg-eu-7, not stg-eu-3.", "stg-eu-7"),
        ("user_input", "I prefer structlog for all new logging.", "structlog"),
        (
            "assistant_output",
            "We'll use Redis Streams instead of Kafka because the ops team already runs Redis.",
            "ops team already runs redis",
        ),
        ("assistant_output", "I tried bumping the pool size to 50 but the deadlocks persisted.", "pool size to 50"),
        ("assistant_output", "The invoice export lives in services/billing/export/csv_writer.py.", "csv_writer.py"),
        ("user_input", "Customer CUST-88231 is the one with the broken invoice.", "cust-88231"),
    ]
    events: list[SessionEvent] = []
    noise = "\n".join(f"{i:4d}  def handler_{i}(request): return process(request)" for i in range(300))
    for i in range(480):
        seq = len(events) + 1
        if i % 60 == 5:
            etype, text, _ = facts[i // 60]
            events.append(SessionEvent(type=etype, seq=seq, content=text))  # type: ignore[arg-type]
        elif i % 3 == 0:
            events.append(
                SessionEvent(
                    type="tool_call", seq=seq, tool_name="read_file", tool_call_id=f"c{i}", tool_args='{"path": "app.py"}'
                )
            )
        elif i % 3 == 1:
            events.append(
                SessionEvent(type="tool_result", seq=seq, tool_name="read_file", tool_call_id=f"c{i - 1}", content=noise)
            )
        else:
            events.append(SessionEvent(type="assistant_output", seq=seq, content="Let me look at the file again."))
    prompt = _compact(events, ExtractiveSummarizer()).casefold()
    assert [key for _, _, key in facts if key not in prompt] == []


def _session_summary(events: tuple[SessionEvent, ...], previous: str = "") -> tuple[str, StructuredSummary]:
    result = ExtractiveSummarizer().summarize_sync(
        SummaryRequest(purpose="session_summary", events=events, previous_summary=previous)
    )
    return result.text, result.structured


def test_session_summary_has_seed_004_schema() -> None:
    events = (
        SessionEvent(type="user_input", seq=1, content="Hello! Set up the docs site. Always use yarn, never npm."),
        SessionEvent(type="tool_call", seq=2, tool_name="bash", tool_call_id="a", tool_args='{"command": "npm run build"}'),
        SessionEvent(type="tool_result", seq=3, tool_name="bash", tool_call_id="a", content="Error: Cannot find module 'vite'"),
        SessionEvent(type="tool_call", seq=4, tool_name="bash", tool_call_id="b", tool_args='{"command": "yarn build"}'),
        SessionEvent(type="tool_result", seq=5, tool_name="bash", tool_call_id="b", content="Done in 4.2s."),
        SessionEvent(
            type="assistant_output",
            seq=6,
            content="Thanks for waiting! Approach X with webpack broke the build because of ESM-only plugins. "
            "The docs site is deployed to docs.example.com.",
        ),
    )
    text, structured = _session_summary(events)
    assert text == (
        "## OUTCOME\n"
        "- Goal: Set up the docs site. Always use yarn, never npm.\n"
        "- The docs site is deployed to docs.example.com.\n\n"
        "## WORKING RECIPES\n"
        "- $ yarn build\n\n"
        "## FAILED APPROACHES\n"
        "- Approach X with webpack broke the build because of ESM-only plugins.\n"
        "- $ npm run build failed: Error: Cannot find module 'vite'\n\n"
        "## USER PREFERENCES\n"
        "- Always use yarn, never npm.\n\n"
        "## PROJECT FACTS\n"
        "- (none)"
    )
    assert structured == StructuredSummary(
        outcome="Goal: Set up the docs site. Always use yarn, never npm. The docs site is deployed to docs.example.com.",
        working_recipes=("$ yarn build",),
        failed_approaches=(
            "Approach X with webpack broke the build because of ESM-only plugins.",
            "$ npm run build failed: Error: Cannot find module 'vite'",
        ),
        user_preferences=("Always use yarn, never npm.",),
    )
    assert "Hello" not in text and "Thanks for waiting" not in text


def test_session_summary_merges_an_earlier_summary() -> None:
    earlier = (
        "## OUTCOME\n- Shipped v1 of the exporter.\n\n## WORKING RECIPES\n- $ make export\n\n"
        "## FAILED APPROACHES\n- (none)\n\n## USER PREFERENCES\n- I prefer tabs.\n\n## PROJECT FACTS\n- (none)"
    )
    events = (SessionEvent(type="user_input", seq=1, content="Please use ruff for linting from now on."),)
    text, _ = _session_summary(events, previous=earlier)
    assert text == (
        "## OUTCOME\n- Shipped v1 of the exporter.\n\n"
        "## WORKING RECIPES\n- $ make export\n\n"
        "## FAILED APPROACHES\n- (none)\n\n"
        "## USER PREFERENCES\n- I prefer tabs.\n- Please use ruff for linting from now on.\n\n"
        "## PROJECT FACTS\n- (none)"
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(min_size=0, max_size=200), min_size=1, max_size=12),
    budget=st.integers(min_value=16, max_value=400),
    purpose=st.sampled_from(["history", "turn_prefix", "session_summary"]),
)
def test_any_input_gives_a_bounded_summary(texts: list[str], budget: int, purpose: str) -> None:
    kinds = ("user_input", "assistant_output", "tool_result", "system_event")
    events = tuple(
        SessionEvent(type=kinds[i % len(kinds)], seq=i + 1, content=text)  # type: ignore[arg-type]
        for i, text in enumerate(texts)
    )
    request = SummaryRequest(purpose=purpose, events=events, max_tokens=budget)  # type: ignore[arg-type]
    result = ExtractiveSummarizer().summarize_sync(request)
    assert result.text.strip()  # never empty: the summarizer actor rejects empty summaries
    if purpose != "session_summary":  # its five headings are fixed overhead
        assert estimate_tokens(result.text) <= budget
    assert result == ExtractiveSummarizer().summarize_sync(request)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=2000), budget=st.integers(min_value=16, max_value=300))
def test_any_fold_input_gives_a_bounded_fold(text: str, budget: int) -> None:
    folded = summarize(_fold_request(text, max_tokens=budget))
    assert folded.strip()
    assert estimate_tokens(folded) <= budget
    assert len(folded.splitlines()) <= 60
