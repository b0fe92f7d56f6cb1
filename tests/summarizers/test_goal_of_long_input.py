"""The Goal of a long input says what is asked (the real-data finding of stop 61: SWE-agent's pydicom-1458
task, a worked demonstration of another issue and then the real issue around character 19,500, kept the
demonstration's first 400 characters as its goal)."""

from __future__ import annotations

from tests.summarizers.sections import structured_of

_TEMPLATE = "We're currently solving the following issue within our repository. Here's the issue text:"
_INSTRUCTIONS = (
    "INSTRUCTIONS:\nNow, you're going to solve this issue on your own. Edit all the files you need to and "
    "run any checks or tests that you want.\n\nIMPORTANT TIPS:\n1. Always start by trying to replicate the bug.\n"
)
_DEMO_STEPS = "\n".join(
    f"Step {i}: the demonstration opens fields.py, edits the rounding of TimeDelta and reruns reproduce.py."
    for i in range(40)
)


def _goal(content: str) -> str:
    return structured_of(content, "Let me look at the repository first.", "history").user_goal


def test_a_demonstration_then_the_real_task_gives_the_real_task_as_goal() -> None:
    task = (
        "Here is a demonstration of how to correctly accomplish this task.\n"
        f"--- DEMONSTRATION ---\n{_TEMPLATE}\nISSUE:\nTimeDelta serialization precision\n{_INSTRUCTIONS}\n"
        f"{_DEMO_STEPS}\n--- END OF DEMONSTRATION ---\n\n"
        f"{_TEMPLATE}\nISSUE:\nPixel Representation attribute should be optional for pixel data handler\n"
        "```python\nds = Dataset()\n```\n\n"
    )
    # Old code: "Here is a demonstration ... ISSUE: TimeDelta serialization precision INSTRUCTIONS: ...".
    assert _goal(task) == (
        "Here is a demonstration of how to correctly accomplish this task. … We're currently solving the "
        "following issue within our repository. Here's the issue text: ISSUE: Pixel Representation attribute "
        "should be optional for pixel data handler"
    )


def test_a_long_task_that_restates_nothing_keeps_its_opening() -> None:
    opening = f"{_TEMPLATE}\nISSUE:\nSyntaxError: invalid syntax when running missing_colon.py\n"
    # The title quoted again in a traceback (code) is no restated template.
    quoted = "```\n  File \"missing_colon.py\", line 4\nSyntaxError: invalid syntax when running missing_colon.py\n```\n"
    assert _goal(f"{opening}{quoted}{_INSTRUCTIONS}{_DEMO_STEPS}") == _goal(f"{opening}{_INSTRUCTIONS}{_DEMO_STEPS}")
    assert _goal(f"{opening}{quoted}{_INSTRUCTIONS}{_DEMO_STEPS}").startswith(
        "We're currently solving the following issue within our repository. Here's the issue text: ISSUE: "
        "SyntaxError: invalid syntax when running missing_colon.py INSTRUCTIONS:"
    )


def test_a_short_input_is_its_goal_whole() -> None:
    text = f"{_TEMPLATE}\nISSUE:\nDates are parsed in the wrong time zone.\n{_TEMPLATE}\nISSUE:\nNaive datetimes lose their offset in export_csv."
    assert len(text) < 400
    assert _goal(text) == " ".join(text.split())
