"""Governance on the real SWE-agent sessions of $AIDEN_REAL_DATA, replayed model call by model call.

Every recorded session is one user task worked through many model calls (one
turn), so turn-mode governance (``keep_steps=0``) leaves them untouched; step
mode (``keep_steps=2``) trims the results the agent has already acted on.
Run with ``-s`` to see the per-call table.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from swe_sessions import load_sessions

from aiden.config import Config
from aiden.context.governance import govern_events, stub_seq
from aiden.context.prompt import PromptLayers, build_messages, validate_chat_sequence
from aiden.testing.usage import messages_tokens

pytestmark = pytest.mark.real_data

KEEP_STEPS = 2
LARGE_OUTPUT_CHARS = 4000


def test_governed_prompts_of_real_sessions_are_never_larger(real_data: Path) -> None:
    cfg = Config()
    sessions = list(load_sessions(real_data))
    assert sessions
    rows: list[tuple[str, int, int, int, int, int]] = []
    totals: list[tuple[str, int, int, int, bool]] = []
    for session in sessions:
        layers = PromptLayers(base_instruction=session.system)
        by_seq = {e.seq: e for e in session.events}
        sums = [0, 0, 0]
        for n, k in enumerate(session.calls, start=1):
            hot = session.events[:k]
            ungoverned = build_messages(layers=layers, hot_window=hot).messages
            assert validate_chat_sequence(ungoverned) == []
            sizes = [messages_tokens(ungoverned)]
            for keep_steps in (0, KEEP_STEPS):
                governed = govern_events(
                    hot,
                    keep_turns=cfg.governance_keep_turns,
                    max_tool_tokens=cfg.governance_tool_tokens(),
                    keep_steps=keep_steps,
                )
                messages = build_messages(layers=layers, hot_window=governed.events).messages
                assert validate_chat_sequence(messages) == []
                for event in governed.events:
                    seq = stub_seq(event.content)
                    if seq is not None:
                        assert msgspec.structs.replace(event, content=by_seq[seq].content) == by_seq[seq]
                sizes.append(messages_tokens(messages))
            plain_tokens, turn_tokens, step_tokens = sizes
            assert turn_tokens <= plain_tokens and step_tokens <= plain_tokens
            # One user task = one turn: turn mode keeps the whole current turn.
            assert turn_tokens == plain_tokens
            rows.append((session.name, n, k, plain_tokens, turn_tokens, step_tokens))
            sums = [a + b for a, b in zip(sums, sizes, strict=True)]
        large = any(e.type == "tool_result" and len(e.content) >= LARGE_OUTPUT_CHARS for e in session.events)
        totals.append((session.name, sums[0], sums[1], sums[2], large))

    print("\n| session | call | events | ungoverned | governed (turns) | governed (steps=2) |")
    print("|---|---|---|---|---|---|")
    for name, n, k, plain, turn, step in rows:
        print(f"| {name} | {n} | {k} | {plain:,} | {turn:,} | {step:,} |")
    print("\n| session | calls | ungoverned total | governed (steps=2) total | saved |")
    print("|---|---|---|---|---|")
    for name, plain, _turn, step, large in totals:
        calls = sum(1 for r in rows if r[0] == name)
        print(f"| {name}{' (large outputs)' if large else ''} | {calls} | {plain:,} | {step:,} | {1 - step / plain:.1%} |")

    # Our folder's two sessions with large outputs read them early, so step mode trims them (in another
    # folder a large output may come last, in the steps step mode keeps).
    ours = {"marshmallow-1867-function-calling", "pydicom-1458"}
    if ours <= {t[0] for t in totals}:
        large_sessions = [t for t in totals if t[4]]
        assert {t[0] for t in large_sessions} == ours
        for _name, plain, _turn, step, _large in large_sessions:
            assert step < plain
