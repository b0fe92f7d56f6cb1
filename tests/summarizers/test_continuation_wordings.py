"""A routine continuation is one however it names its step: "(continue) turn 12", "(continue) part 12 of 40",
"Next: step 12" leave one open line and no Facts copies over folds, like "(continue) step 12".

Found on held-out SWE-agent sessions (r64/r65): only the word "step" made a numbered request routine, and "Next:"
read as a speaker's name (a chat participant's line is never routine), so each fold kept a Facts copy.
"""

from __future__ import annotations

import pytest

from aiden.summarizers.extractive.summarizer import rolling_fold

_FACT = "Facts:\n- The server answered 100 bytes."
_COMMANDS = "Commands:\n- $ curl http://x/9\n- $ curl http://x/11\n- $ curl http://x/13\n"


def _chunk(said: str, n: int, following: str) -> str:
    """A chunk summary as the split turn leaves it: the open thread's request, a command, the next turn's request."""
    return (
        f"Open thread:\n- User: {said}\nCommands:\n- $ curl http://x/{n}\n\n---\n\n"
        f"Turn Context (split turn):\nOpen thread:\n- User: {following}"
    )


def _folded(template: str) -> str:
    rolling = _FACT
    for n in (9, 11, 13):
        rolling = rolling_fold(rolling, _chunk(template.format(n), n, template.format(n + 1)), 60)
    return rolling


@pytest.mark.parametrize(
    ("template", "open_line"),
    [
        ("(continue) turn {}", "(continue) turns 9\u201314; now at turn 14"),
        ("(continue) part {} of 40", "(continue) parts 9\u201314; now at part 14 of 40"),
        ("Next: step {}", "Next: steps 9\u201314; now at step 14"),
        ("Next: part {}", "Next: parts 9\u201314; now at part 14"),
        ("Keep going, phase {}", "Keep going, phases 9\u201314; now at phase 14"),
    ],
)
def test_continuations_in_other_words_leave_one_open_line_and_no_facts(template: str, open_line: str) -> None:
    assert _folded(template) == f"Open thread:\n- User: {open_line}\n{_COMMANDS}{_FACT}"


# What a continuation says besides its step stays (a fact) once later steps supersede the open thread; a "part"
# without a word that asks to go on is no continuation (a chapter), and "Next:" labels a fact as much as a step.
@pytest.mark.parametrize(
    "turn",
    [
        "(continue) turn 12: the API key is in /etc/app/key.env",
        "Next: the API key is in /etc/app/key.env",
        "Part 12 of the guide covers the proxy settings",
    ],
)
def test_what_a_numbered_or_labelled_turn_states_stays_a_fact(turn: str) -> None:
    rolling = _FACT
    for n, said in ((12, turn), (13, "(continue) step 13"), (14, "(continue) step 14")):
        rolling = rolling_fold(rolling, _chunk(said, n, f"(continue) step {n + 1}"), 60)
    head, facts = rolling.split("Facts:\n")
    assert head == (
        "Open thread:\n- User: (continue) steps 13\u201315; now at step 15\n"
        "Commands:\n- $ curl http://x/12\n- $ curl http://x/13\n- $ curl http://x/14\n"
    )
    # (in the order the folds kept them, which is no part of this test)
    assert sorted(facts.splitlines()) == sorted([f"- {turn}", "- The server answered 100 bytes."])
