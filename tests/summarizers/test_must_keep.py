"""The deterministic must-keep check: extract items, append the ones a summary lost."""

# Chinese test text uses full-width punctuation on purpose (CJK sentence splitting).
# ruff: noqa: RUF001

from __future__ import annotations

import json

import pytest

from aiden.events import SessionEvent
from aiden.summarizers.mustkeep.check import appended_count, apply_must_keep, extract_must_keep
from aiden.summarizers.mustkeep.text import find_paths, key_tokens, split_sentences

pytestmark = pytest.mark.timeout(30)


def events() -> tuple[SessionEvent, ...]:
    return (
        SessionEvent(
            type="user_input",
            seq=1,
            content="Hello! Migrate the exporter to gRPC. Don't touch legacy_billing. Actually, use port 9443, not 8443.",
        ),
        SessionEvent(
            type="assistant_output",
            seq=2,
            content=(
                "Let me check. We'll use Redis Streams instead of Kafka because ops runs Redis. "
                "The job id is job-7f3a9c2e and it took 45 minutes."
            ),
        ),
        SessionEvent(
            type="tool_call",
            seq=3,
            tool_name="read_file",
            tool_call_id="a",
            tool_args=json.dumps({"path": "svc/export.py"}),
        ),
        SessionEvent(
            type="tool_result",
            seq=4,
            tool_name="read_file",
            tool_call_id="a",
            content="never_seen_token = 1\nYou must not see this line.",
        ),
        SessionEvent(type="user_input", seq=5, content="I prefer small commits. See docs/adr/0007-grpc.md for context."),
    )


ITEMS = [
    "Don't touch legacy_billing.",
    "Actually, use port 9443, not 8443.",
    "I prefer small commits.",
    "We'll use Redis Streams instead of Kafka because ops runs Redis.",
    "Migrate the exporter to gRPC.",
    "The job id is job-7f3a9c2e and it took 45 minutes.",
    "svc/export.py",
    "docs/adr/0007-grpc.md",
]


def test_extract_must_keep_orders_user_rules_decisions_facts_paths() -> None:
    assert extract_must_keep(events(), max_items=40) == ITEMS


def test_extract_must_keep_is_bounded_and_ignores_tool_output() -> None:
    assert extract_must_keep(events(), max_items=3) == ITEMS[:3]
    assert extract_must_keep(events(), max_items=0) == []
    joined = " ".join(extract_must_keep(events(), max_items=40))
    assert "never_seen_token" not in joined and "must not see" not in joined


def test_extract_must_keep_is_deterministic() -> None:
    assert extract_must_keep(events(), max_items=40) == extract_must_keep(events(), max_items=40)


SUMMARY = "Goal: migrate exporter.\nDecisions:\n- We'll use Redis Streams instead of Kafka because ops runs Redis."


def test_apply_appends_only_missing_items() -> None:
    out = apply_must_keep(SUMMARY, ITEMS, max_items=40)
    assert appended_count(SUMMARY, out) == 7
    assert out == (
        SUMMARY
        + "\n\nMust keep:\n"
        + "- Don't touch legacy_billing.\n"
        + "- Actually, use port 9443, not 8443.\n"
        + "- I prefer small commits.\n"
        + "- Migrate the exporter to gRPC.\n"
        + "- The job id is job-7f3a9c2e and it took 45 minutes.\n"
        # Lost paths go on one Files line, never as bare list entries (#38).
        + "Files: svc/export.py, docs/adr/0007-grpc.md"
    )


def test_apply_is_a_no_op_when_nothing_is_missing() -> None:
    complete = SUMMARY + "\n" + "\n".join(f"- {item}" for item in ITEMS)
    assert apply_must_keep(complete, ITEMS, max_items=40) is complete


def test_apply_matches_ignoring_case_and_whitespace() -> None:
    summary = "DON'T   touch\nLEGACY_BILLING"
    assert apply_must_keep(summary, ["Don't touch legacy_billing."], max_items=5) is summary


def test_apply_accepts_a_paraphrase_that_keeps_every_key_token() -> None:
    summary = "Rule: legacy_billing must not be touched."
    assert apply_must_keep(summary, ["Don't touch legacy_billing."], max_items=5) is summary
    # Losing the distinctive token is losing the fact.
    lost = "Rule: the old billing module must not be touched."
    assert apply_must_keep(lost, ["Don't touch legacy_billing."], max_items=5) == (
        lost + "\n\nMust keep:\n- Don't touch legacy_billing."
    )


def test_apply_counts_a_wrong_number_as_missing() -> None:
    summary = "Use port 8443 for the gateway."
    assert apply_must_keep(summary, ["Actually, use port 9443, not 8443."], max_items=5) == (
        summary + "\n\nMust keep:\n- Actually, use port 9443, not 8443."
    )


def test_apply_is_bounded_by_items_and_chars() -> None:
    assert apply_must_keep(SUMMARY, ITEMS, max_items=2) == (
        SUMMARY + "\n\nMust keep:\n- Don't touch legacy_billing.\n- Actually, use port 9443, not 8443."
    )
    bounded = apply_must_keep(SUMMARY, ITEMS, max_items=40, max_chars=80)
    section = bounded[len(SUMMARY) :]
    assert section == "\n\nMust keep:\n- Don't touch legacy_billing.\n- Actually, use port 9443, not 8443."
    assert len(section) <= 80


def test_apply_clips_an_overlong_first_item_instead_of_dropping_it() -> None:
    item = "Never " + " ".join(f"word{i}" for i in range(100))
    out = apply_must_keep("", [item], max_items=5, max_chars=60)
    assert out.startswith("Must keep:\n- Never word0 word1")
    assert out.endswith("…")
    assert len(out) <= 60


def test_apply_with_no_budget_or_no_items_returns_the_text() -> None:
    assert apply_must_keep(SUMMARY, ITEMS, max_items=0) is SUMMARY
    assert apply_must_keep(SUMMARY, [], max_items=10) is SUMMARY
    assert apply_must_keep(SUMMARY, ITEMS, max_items=10, max_chars=0) is SUMMARY


def test_apply_works_on_chinese() -> None:
    items = ["必须在周五之前完成！", "不要使用print调试。"]
    summary = "目标：迁移日志。必须在周五之前完成！"
    assert apply_must_keep(summary, items, max_items=5) == summary + "\n\nMust keep:\n- 不要使用print调试。"


def test_sentence_splitting_handles_english_and_chinese() -> None:
    assert split_sentences("我们必须在周五之前完成。不要用npm！好吗？Use yarn. See app.py and v1.2 e.g. here; ok") == [
        "我们必须在周五之前完成。",
        "不要用npm！",
        "好吗？",
        "Use yarn.",
        "See app.py and v1.2 e.g. here; ok",
    ]
    assert split_sentences("text\n```python\nx = 'Never do this.'\n```\n- bullet one\n2. numbered") == [
        "text",
        "bullet one",
        "numbered",
    ]


def test_paths_and_key_tokens() -> None:
    assert find_paths(
        "edit src/api.py:45 and ./run.sh, see https://x.com/a/b.py, and/or Node.js, /etc/hosts, client/server"
    ) == ["src/api.py", "./run.sh", "/etc/hosts"]
    assert key_tokens("Deploy to 10.0.3.17 port 8443 with OPS-4411 in 30 minutes using `make deploy` v1.2.3") == [
        "make deploy",
        "10.0.3.17",
        "ops-4411",
        "v1.2.3",
        "port 8443",
        "30 minutes",
    ]
