"""An agent loop's routine continuation ("(continue) step 12") is never a durable item of the rolling summary.

Found on held-out SWE-agent sessions (r64): "(continue) step N" was classified as a fact (its step number), so
every fold kept a Facts copy of the open thread's request; the open copy was collapsed into "steps 1-N", the
Facts copies piled up and every later fold re-read them as facts. What a continuation carries besides its step
(an instruction, a rule, a fact) is still kept where it belongs.
"""

from __future__ import annotations

import pytest

from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer, rolling_fold
from aiden.summarizers.mustkeep.check import extract_must_keep
from aiden.summarizers.protocol import SummaryRequest

_FACT = "Facts:\n- The server answered 100 bytes."


def _chunk(turn: str, n: int, following: str = "(continue) step {n}") -> str:
    """A chunk summary as the split turn leaves it: the open thread's request, a command, the next step's request."""
    return (
        f"Open thread:\n- User: {turn}\nCommands:\n- $ curl http://x/{n}\n\n---\n\n"
        f"Turn Context (split turn):\nOpen thread:\n- User: {following.format(n=n + 1)}"
    )


def test_folded_continuations_leave_one_open_line_and_no_facts() -> None:
    rolling = f"Open thread:\n- User: (continue) steps 1\u20138; now at step 8\n{_FACT}"
    for n in (9, 11, 13):
        rolling = rolling_fold(rolling, _chunk(f"(continue) step {n}", n), 60)
    assert rolling == (
        "Open thread:\n- User: (continue) steps 1\u201314; now at step 14\n"
        "Commands:\n- $ curl http://x/9\n- $ curl http://x/11\n- $ curl http://x/13\n"
        f"{_FACT}"
    )


_COMMAND = "Commands:\n- $ curl http://x/12\n"


@pytest.mark.parametrize(
    ("turn", "open_thread"),
    [
        ("(continue) step 12", "- User: (continue) steps 12\u201313; now at step 13\n"),
        # (the other wordings read differently up to their step number: no run of steps with the next one)
        ("Keep going with step 12", "- User: Keep going with step 12\n- User: (continue) step 13\n"),
        ("OK, continue with step 12", "- User: OK, continue with step 12\n- User: (continue) step 13\n"),
    ],
)
def test_a_continuation_is_filed_in_no_durable_section(turn: str, open_thread: str) -> None:
    folded = rolling_fold(_FACT, _chunk(turn, 12), 60)
    assert folded == f"Open thread:\n{open_thread}{_COMMAND}{_FACT}"


def test_a_continuation_is_no_must_keep_fact() -> None:
    events = [
        SessionEvent(type="user_input", content="Fix the flaky retry test in src/gateway/retry.py", seq=1),
        SessionEvent(type="assistant_output", content="Looking.", seq=2),
        SessionEvent(type="user_input", content="(continue) step 12", seq=3),
    ]
    assert extract_must_keep(events, max_items=10) == ["src/gateway/retry.py"]


def _open(first: int) -> str:
    """The open thread and commands after steps 12-14 were folded (and step 15 is the split turn's)."""
    return (
        f"Open thread:\n- User: (continue) steps {first}\u201315; now at step 15\n"
        "Commands:\n- $ curl http://x/12\n- $ curl http://x/13\n- $ curl http://x/14\n"
    )


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        # An instruction stays a request once later steps supersede the open thread ...
        ("continue, but use the v2 API", f"{_open(13)}{_FACT}\nRequests:\n- continue, but use the v2 API"),
        (
            "Proceed with step 12: migrate the users table",
            f"{_open(13)}{_FACT}\nRequests:\n- Proceed with step 12: migrate the users table",
        ),
        # ... a fact stays a fact (the open line reads "(continue) step N" up to its number: one run of steps) ...
        (
            "(continue) step 12: the API key is in /etc/app/key.env",
            f"{_open(12)}{_FACT}\n- (continue) step 12: the API key is in /etc/app/key.env",
        ),
        # ... and a rule a constraint.
        (
            "Continue with step 12; the deploy must finish by Friday",
            f"Constraints:\n- Continue with step 12; the deploy must finish by Friday\n{_open(13)}{_FACT}",
        ),
    ],
)
def test_what_a_continuation_carries_is_kept_after_later_steps(turn: str, expected: str) -> None:
    rolling = _FACT
    for n, said in enumerate((turn, "(continue) step 13", "(continue) step 14")):
        rolling = rolling_fold(rolling, _chunk(said, 12 + n), 60)
    assert rolling == expected


# A step total ("of 40", "30 steps left") goes stale with the next step: it makes no continuation a fact.
@pytest.mark.parametrize("template", ["(continue) {} of 40", "(continue) {}, 30 steps left", "(continue) {} \u2014 28 steps to go"])
def test_continuations_with_a_step_total_leave_one_open_line_and_no_facts(template: str) -> None:
    first, last = (template.format(f"steps 1\u2013{n}; now at step {n}") for n in (8, 14))
    rolling = f"Open thread:\n- User: {first}\n{_FACT}"
    for n in (9, 11, 13):
        rolling = rolling_fold(rolling, _chunk(template.format(f"step {n}"), n, template.format("step {n}")), 60)
    assert rolling == (
        f"Open thread:\n- User: {last}\n"
        "Commands:\n- $ curl http://x/9\n- $ curl http://x/11\n- $ curl http://x/13\n"
        f"{_FACT}"
    )


_GOAL = "Fix the flaky retry test in src/gateway/retry.py"


def _summarize(*turns: tuple[str, str]) -> str:
    """The extractive chunk summary of ``(event type, content)`` turns."""
    events = tuple(SessionEvent(type=kind, content=text, seq=i) for i, (kind, text) in enumerate(turns))
    return ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events)).text


def test_continuations_with_a_step_total_in_one_chunk_collapse_into_one_open_line() -> None:
    turns = [("user_input", _GOAL)]
    for n in range(10, 14):
        turns += [("user_input", f"(continue) step {n} of 40"), ("assistant_output", "Ran the next command.")]
    assert _summarize(*turns) == (
        f"Goal: {_GOAL}\nOpen thread:\n- User: (continue) steps 10\u201313; now at step 13 of 40\n"
        "- Plan: Ran the next command.\nFiles: src/gateway/retry.py"
    )


# A sentence that says more than its step ("Step 12 needs ...") is no continuation: a fact, whatever its step
# number or the word naming it ("turns 16" is an age, "phase 12" a stage of a rollout).
@pytest.mark.parametrize(
    "fact",
    [
        "Step 12 needs the staging credentials",
        "I'm stuck at step 14 of the install guide",
        "My daughter turns 16 next week",
        "Phase 12 of the rollout starts Monday",
        "I'm on part 14 of the audiobook",
        "Turn 12 is where the agent went off the rails",
        "My kid just reached phase 12 of the reading program",
    ],
)
def test_a_fact_naming_a_step_stays_a_fact_over_continuation_folds(fact: str) -> None:
    said = [("user_input", _GOAL), ("assistant_output", "Looking."), ("user_input", fact)]
    rolling = rolling_fold("", _summarize(*said), 60)
    for n in (13, 14, 15):
        rolling = rolling_fold(rolling, _summarize(("user_input", f"(continue) step {n}"), ("assistant_output", "OK.")), 60)
    assert rolling == (
        f"Goal: {_GOAL}\nOpen thread:\n- User: (continue) steps 13\u201315; now at step 15\n"
        f"Files: src/gateway/retry.py\nFacts:\n- {fact}"
    )


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        ("Step 12 needs the staging credentials", ["Step 12 needs the staging credentials"]),
        (
            "Here is the runbook.\nStep 10: back up the database\nStep 11: run the migration",
            ["Step 10: back up the database", "Step 11: run the migration"],
        ),
    ],
)
def test_a_fact_naming_a_step_is_must_keep(said: str, facts: list[str]) -> None:
    events = [
        SessionEvent(type="user_input", content=_GOAL, seq=1),
        SessionEvent(type="assistant_output", content="Looking.", seq=2),
        SessionEvent(type="user_input", content=said, seq=3),
    ]
    assert extract_must_keep(events, max_items=10) == [*facts, "src/gateway/retry.py"]


def test_unlabelled_summary_lines_naming_a_step_stay_facts() -> None:
    first, second = "Step 12 needs the staging credentials.", "The user moved the config to YAML in step 14."
    assert rolling_fold(_FACT, f"{first}\n{second}", 60) == f"{_FACT}\n- {first}\n- {second}"


def test_a_later_fact_with_the_same_head_does_not_supersede_a_fact() -> None:
    rolling = ""
    for said in (
        "Fix the deploy pipeline in deploy/pipeline.yml",
        "Step 12 needs the staging credentials",
        "Step 14 needs the prod VPN",
        "Now run the pipeline.",
        "(continue) step 15",
    ):
        rolling = rolling_fold(rolling, _summarize(("user_input", said), ("assistant_output", "Done.")), 60)
    assert rolling.endswith("\nFacts:\n- Step 12 needs the staging credentials")


# "Keep going with it / step 12" continues; "keep going with Postgres" stays on a choice: a decision,
# whoever says it.
@pytest.mark.parametrize(
    "turn",
    [
        ("user_input", "Let's keep going with the Redis approach"),
        ("user_input", "Keep going with Postgres, not MySQL"),
        ("user_input", "We're going to keep going with Postgres"),
        ("user_input", "Keep going with the plan we agreed on: Postgres, no Redis"),
        ("assistant_output", "I'll keep going with the Postgres approach."),
        # (a re-review's cases: a pronoun or possessive naming the choice)
        ("user_input", "We'll keep going with that approach"),
        ("user_input", "Let's keep going with this design"),
        ("user_input", "We'll keep going with our current schema, no migration to Mongo"),
        ("user_input", "Keep going with that, SQLite is fine for now"),
        ("assistant_output", "I'll keep going with this approach since it avoids the lock."),
    ],
)
def test_keeping_going_with_a_choice_is_a_decision(turn: tuple[str, str]) -> None:
    summary = _summarize(("user_input", _GOAL), turn, ("user_input", "Now run the test suite."))
    assert summary.split("\n")[1:3] == ["Decisions:", f"- {turn[1]}"]
