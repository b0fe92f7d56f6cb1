"""One wording of a stated exit and an OS refusal, read with each reader's own anchor."""

from __future__ import annotations

import re

import pytest

from aiden.experience.episodes import result_failed
from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL
from aiden.summarizers.extractive.extract import _CONCRETE_ERROR
from aiden.summarizers.extractive.tools import _EVIDENCE_LINE
from aiden.summarizers.mustkeep.classify import looks_like_error_line


@pytest.mark.parametrize(
    ("text", "exit_", "refusal"),
    [
        ("exit code 2", True, False),
        ("Exited with status 1", True, False),
        ("Exit status: 127", True, False),
        ("exit code = 3", True, False),
        ("exit code 0", False, False),
        ("exit status 10", True, False),
        ("Permission denied", False, True),
        ("connection refused", False, True),
        ("permission granted", False, False),
    ],
)
def test_the_shared_phrases(text: str, exit_: bool, refusal: bool) -> None:
    assert (re.search(NONZERO_EXIT, text) is not None) is exit_
    assert (re.search(OS_REFUSAL, text) is not None) is refusal


def test_each_reader_keeps_its_own_anchor() -> None:
    mention = "the deploy step can hit permission denied on /srv"
    perror = "open /srv/app.sock: permission denied"
    # The experience learner: only a first line that starts with it fails the attempt.
    assert result_failed({}, "Permission denied\n") is True
    assert result_failed({}, "exited with code 1\n") is True
    assert result_failed({}, mention) is False
    # The extractive tool rules: a refusal is strong evidence in the perror shape only.
    assert _EVIDENCE_LINE.search(perror) is not None
    assert _EVIDENCE_LINE.search(mention) is None
    assert _EVIDENCE_LINE.search("make: exit status: 2 after 3 retries") is not None
    # The collector and the must-keep error lines: anywhere in the text.
    assert _CONCRETE_ERROR.search(mention) is not None
    assert _CONCRETE_ERROR.search("the build exited with code 2 twice") is not None
    assert looks_like_error_line(mention) is True
