"""An issue or PR text a coding-agent harness pastes into the task sets no rule for the agent, where the harness
marks its start and end: tags on lines of their own (SWE-agent 1.x's ``<pr_description>``, OpenHands'
``<issue_description>``), an ``ISSUE:`` section after "Here's the issue text:" closed by the next label line
(SWE-agent 0.x). Its "X should be optional" is the issue author's; filed under USER PREFERENCES it followed every
later session of the project (pydicom-1458's issue did). A rule that binds whoever says it ("must be done by
Friday") still binds, and the user's own rules around the issue are kept. Where the user may be writing their
own rules (a section they label "ISSUE:", a tag named in prose, a blockquote, a quote tag, an unclosed tag, a
tag shown in code), nothing is taken for quoted: a review found each of those holding users' own rules."""

from __future__ import annotations

import tempfile

import anyio

import aiden
from aiden.events import SessionEvent
from aiden.summarizers.mustkeep.check import extract_must_keep
from aiden.summarizers.protocol import StructuredSummary
from tests.summarizers.sections import structured_of

_ISSUE = (
    "Pixel Representation attribute should be optional for pixel data handler\n"
    "The NumPy pixel data handler currently requires the Pixel Representation attribute.\n"
    "I would expect the `Dataset.pixel_array` property to decode Float Pixel Data without it.\n"
)
_OWN = "Never modify the tests.\nAlways run pytest with -x before you submit.\n"
_OWN_RULES = ("Never modify the tests.", "Always run pytest with -x before you submit.")


def _session(user: str) -> StructuredSummary:
    return structured_of(user, "I looked at the handler.")


def test_a_tagged_pr_description_sets_no_preference_and_the_users_own_rules_stay() -> None:
    user = f"Consider the following PR description:\n\n<pr_description>\n{_ISSUE}</pr_description>\n\n{_OWN}"
    # Old code: the issue's title ("... should be optional ...") and its "I would expect ..." led the preferences.
    assert _session(user).user_preferences == _OWN_RULES


def test_an_issue_section_closed_by_the_next_label_sets_no_preference() -> None:
    user = f"We're solving this issue. Here's the issue text:\nISSUE:\n{_ISSUE}\nINSTRUCTIONS:\n{_OWN}"
    assert _session(user).user_preferences == _OWN_RULES  # old code: the issue's two sentences first


def test_a_quoted_fact_stays_a_fact_and_a_binding_rule_still_binds() -> None:
    user = (
        "<issue>\nThe export must be done by Friday.\nTimeDelta serialization loses precision: "
        "https://github.com/marshmallow-code/marshmallow/issues/1867\n</issue>\nPlease fix it."
    )
    structured = _session(user)
    assert structured.user_preferences == ("The export must be done by Friday.",)
    assert any("https://github.com/marshmallow-code/marshmallow/issues/1867" in fact for fact in structured.facts)


def test_where_the_user_may_write_their_own_rules_nothing_is_quoted() -> None:
    # Each of these held a user's own rules in review (they pass on the old code too: they guard the change).
    assert _session(f"<issue>\n{_OWN}").user_preferences == _OWN_RULES  # unclosed
    labelled = f"ISSUE:\nThe login form accepts empty passwords.\n{_OWN}\nNOTES:\nDjango 4.2.\n"
    assert _session(labelled).user_preferences == _OWN_RULES
    prose = f"Read the <issue> below carefully. {_OWN}\n<issue>\nThe CSV reader should take a delimiter.\n</issue>\n"
    assert _session(prose).user_preferences == _OWN_RULES
    assert _session(f"These are my rules:\n<quote>\n{_OWN}</quote>\n").user_preferences == _OWN_RULES
    assert _session("House rules:\n\n> Never commit directly to main.\n").user_preferences == (
        "> Never commit directly to main.",
    )
    fenced = f"```xml\n<issue>\n  <title>x</title>\n</issue>\n```\n{_OWN}"
    assert _session(fenced).user_preferences == _OWN_RULES


def test_the_must_keep_check_keeps_the_users_rules_not_the_quoted_ones() -> None:
    user = f"<issue_description>\n{_ISSUE}</issue_description>\n{_OWN}"
    items = extract_must_keep((SessionEvent(type="user_input", seq=1, content=user),), max_items=10)
    # Old code: the issue's "should be optional" and "I would expect" first, as the user's rules. Its sentences
    # naming an id are still kept, after the rules, as facts.
    assert items == [
        *_OWN_RULES,
        "The NumPy pixel data handler currently requires the Pixel Representation attribute.",
        "I would expect the `Dataset.pixel_array` property to decode Float Pixel Data without it.",
    ]


async def _project_memory(first_task: str) -> str:
    with tempfile.TemporaryDirectory() as root:
        async with aiden.open_memory(root) as memory:
            await memory.begin_run(first_task)
            await memory.commit_run("I changed the handler and the tests pass.")
            await memory.rotate()
            built = await memory.build_messages()
    system = "\n".join(str(m.get("content") or "") for m in built.messages if m.get("role") == "system")
    return system[system.find("PROJECT MEMORY") :]


def test_the_next_sessions_project_memory_carries_the_users_rules_not_the_issues() -> None:
    block = anyio.run(_project_memory, f"<pr_description>\n{_ISSUE}</pr_description>\n{_OWN}")
    preferences = block.split("USER PREFERENCES", 1)[1].split("\n\n", 1)[0]
    assert [line for line in preferences.splitlines() if line.startswith("- ")] == [f"- {rule}" for rule in _OWN_RULES]
