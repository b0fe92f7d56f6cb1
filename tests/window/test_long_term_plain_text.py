"""A long-term layer given as plain text (the caller's own, or aiden's after a string operation) is cut
by its paragraphs and items, newest first, like the layer aiden renders."""

from __future__ import annotations

from aiden.context.summary_fit import LONG_TERM_NOTE_PREFIX, fit_long_term_layer

_LAYER = (
    "PROJECT MEMORY\n\n## DECISIONS\n"
    + "\n".join(f"- decision {i}: use tool number {i} for stage {i}" for i in range(20))
    + "\n\n## CONSTRAINTS\n- never deploy on Fridays\n- keep the API stable"
)


def test_a_plain_text_layer_keeps_its_newest_items_not_only_the_note() -> None:
    fitted = fit_long_term_layer(_LAYER, 60)
    assert fitted == (
        "PROJECT MEMORY\n\n## DECISIONS\n"
        "- decision 18: use tool number 18 for stage 18\n"
        "- decision 19: use tool number 19 for stage 19\n\n"
        f"{LONG_TERM_NOTE_PREFIX}20 items; long-term memory keeps them all.]"
    )


def test_a_plain_text_layer_that_fits_is_unchanged() -> None:
    assert fit_long_term_layer(_LAYER, 10_000) == _LAYER
