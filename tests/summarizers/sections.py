"""The embedded summarizer's summary of some events: its ``- `` lines by ``## `` heading, or its structured fields."""

from __future__ import annotations

from collections.abc import Sequence

from aiden import ExtractiveSummarizer
from aiden.events import SessionEvent
from aiden.summarizers.protocol import Purpose, StructuredSummary, SummaryRequest


def session_sections(events: Sequence[SessionEvent], max_tokens: int) -> dict[str, list[str]]:
    """The session summary of ``events`` at ``max_tokens``: each heading's lines, in order."""
    request = SummaryRequest(purpose="session_summary", events=tuple(events), max_tokens=max_tokens)
    sections: dict[str, list[str]] = {}
    heading = ""
    for line in ExtractiveSummarizer().summarize_sync(request).text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
            sections[heading] = []
        elif line.startswith("- "):
            sections[heading].append(line[2:])
    return sections


def structured_of(user: str, answer: str, purpose: Purpose = "session_summary") -> StructuredSummary:
    """The structured summary of one user input and the assistant's answer."""
    events = (
        SessionEvent(type="user_input", seq=1, content=user),
        SessionEvent(type="assistant_output", seq=2, content=answer),
    )
    structured = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose=purpose, events=events)).structured
    assert structured is not None
    return structured
