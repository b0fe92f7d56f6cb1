"""The embedded summarizer's session summary of a `Name: ...` chat: what a later session needs of it.

A chat session's summary is what the next session's PROJECT MEMORY carries: the participants'
news, plans and events (each relative time with the day it was said), not their goodbyes as the
open thread, and no talk filed as a rule or a failed approach.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from aiden.events import SessionEvent
from aiden.summarizers.mustkeep.classify import classify_sentence, sets_a_rule
from tests.summarizers.sections import session_sections

pytestmark = pytest.mark.timeout(30)

MAY_8: float = datetime(2023, 5, 8, 13, 0, tzinfo=UTC).timestamp()


def _chat(*turns: str, start: float = MAY_8) -> tuple[SessionEvent, ...]:
    """Alternating turns, the first speaker's as user inputs, one a minute from ``start``."""
    return tuple(
        SessionEvent(
            type="user_input" if i % 2 == 0 else "assistant_output",
            role="user" if i % 2 == 0 else "assistant",
            content=text,
            seq=i + 1,
            timestamp=start + 60 * i,
        )
        for i, text in enumerate(turns)
    )


def _session_summary(events: tuple[SessionEvent, ...], budget: int = 800) -> dict[str, list[str]]:
    """The session summary's lines by heading."""
    return session_sections(events, budget)


def test_a_chat_session_summary_keeps_the_participants_news_dated_not_their_goodbye() -> None:
    summary = _session_summary(
        _chat(
            "John: Hey Maria! Last week I joined a service-focused online group.",
            "Maria: Wow, that's great! Yesterday I took up community work with my church friends.",
            "John: I'm going to run a charity 5K in June to raise money for the food bank.",
            "Maria: Your support means a lot to me.",
            "John: Stay safe!",
        )
    )
    assert summary["OUTCOME"] == [
        "Goal: (8 May, 2023) John: Last week I joined a service-focused online group."
    ]
    assert summary["PROJECT FACTS"] == [
        "(8 May, 2023) Maria: Yesterday I took up community work with my church friends.",
        "John: I'm going to run a charity 5K in June to raise money for the food bank.",
    ]


def test_an_attempt_not_made_yet_or_a_hard_time_is_no_failed_approach() -> None:
    summary = _session_summary(
        _chat(
            "John: We had a family dinner at the new Italian place downtown on Friday.",
            "Maria: Haven't tried prosciutto yet, but I've heard it's great!",
            "John: I'm trying to stay positive, but it's tough.",
        )
    )
    assert summary["FAILED APPROACHES"] == ["(none)"]
    coding = _session_summary(
        (
            SessionEvent(type="user_input", role="user", seq=1, content="Make the nightly build green."),
            SessionEvent(
                type="assistant_output",
                role="assistant",
                seq=2,
                content="I tried pinning numpy to 1.26, but the build still fails.",
            ),
        )
    )
    assert coding["FAILED APPROACHES"] == ["I tried pinning numpy to 1.26, but the build still fails."]


def test_how_often_someone_does_something_is_no_preference() -> None:
    summary = _session_summary(
        _chat(
            "John: My parents moved to Tampa in March.",
            "Maria: How often do you visit them?",
            "John: I see them at least once a week.",
        )
    )
    assert summary["USER PREFERENCES"] == ["(none)"]
    assert summary["PROJECT FACTS"] == ["John: I see them at least once a week."]


def test_a_participants_praise_reread_from_a_summary_sets_no_rule() -> None:
    # Dream summarizes the history records (chunk summaries) as system events; a later "Goal:" line
    # of a chunk is re-read for the rules it states, and Jon praising Gina states none.
    record = (
        "Goal: Jon: I'm starting a dance studio because I love dancing.\n"
        "Goal: Jon: You never shy away from a challenge and always try something new. "
        "Lately I've been networking. Really can't beat what connections can do."
    )
    summary = _session_summary((SessionEvent(type="system_event", role="history", content=record, seq=1),))
    assert summary["USER PREFERENCES"] == ["(none)"]


def test_a_participants_opinion_is_no_correction_but_their_correction_is() -> None:
    summary = _session_summary(
        _chat(
            "John: I think schools and infrastructure should be funded properly.",
            "Maria: It was wonderful to see how the audience related to what I said.",
            "John: Actually, the town hall meeting is on Thursday, not Friday.",
        )
    )
    assert summary["USER PREFERENCES"] == ["John: Actually, the town hall meeting is on Thursday, not Friday."]


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Retry at most 3 times per request.", "constraint"),
        ("Call the payments API at most once a minute.", "constraint"),
        ("I tried clearing the cache but the build is still red.", "failed"),
        ("Tried rebasing but hit merge conflicts.", "failed"),
    ],
)
def test_an_agent_users_limits_and_failed_attempts_keep_their_kind(sentence: str, kind: str) -> None:
    # The chat rules (a frequency is no limit, "but" alone no failure) are for named chat participants
    # only: an agent's user saying these sets a limit or reports a failed approach (a review finding).
    assert classify_sentence(sentence, speaker="user") == kind
    assert sets_a_rule(kind, sentence, named=False) is (kind == "constraint")
