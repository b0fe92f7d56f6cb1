"""An agent loop's routine continuation ("(continue) step 12") is never a durable item of the rolling summary.

Found on held-out SWE-agent sessions (r64): "(continue) step N" was classified as a fact (its step number), so
every fold kept a Facts copy of the open thread's request; the open copy was collapsed into "steps 1-N", the
Facts copies piled up and every later fold re-read them as facts. What a continuation carries besides its step
(an instruction, a rule, a fact) is still kept where it belongs.
"""

from __future__ import annotations

import pytest

from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import rolling_fold
from aiden.summarizers.mustkeep.check import extract_must_keep

_FACT = "Facts:\n- The server answered 100 bytes."


def _chunk(turn: str, n: int) -> str:
    """A chunk summary as the split turn leaves it: the open thread's request, a command, the next step's request."""
    return (
        f"Open thread:\n- User: {turn}\nCommands:\n- $ curl http://x/{n}\n\n---\n\n"
        f"Turn Context (split turn):\nOpen thread:\n- User: (continue) step {n + 1}"
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
