"""How tool output states a failure in words (pure): the phrases every text rule shares.

Each reader anchors them for its own question, and the anchors differ on purpose:

* :mod:`aiden.experience.trace` matches at the start of a result's first line
  (the result *is* a failure report, so a later mention does not fail the attempt);
* :mod:`aiden.summarizers.extractive.tools` takes a stated exit anywhere in a line as
  strong evidence, but an OS refusal only in the ``<what>: Permission denied`` shape at
  the end of a line (a mention elsewhere is weak evidence, which
  :mod:`aiden.summarizers.mustkeep.errorlines` already scores);
* :mod:`aiden.summarizers.extractive.collector` looks anywhere in a sentence (a sentence
  naming a concrete error reports one);
* :mod:`aiden.summarizers.mustkeep.errorlines` looks anywhere, word-bounded (a mention).

Both patterns carry their own case-insensitive flag, so they mean the same in every reader.
"""

from __future__ import annotations

from typing import Final

__all__ = ["NONZERO_EXIT", "OS_REFUSAL"]

NONZERO_EXIT: Final = r"(?i:\bexit(?:ed)?\s+(?:with\s+)?(?:code|status)\s*[:=]?\s*[1-9]\d*\b)"
"""A stated non-zero exit: ``exit code 2``, ``exited with status 1``, ``Exit status: 127``."""
OS_REFUSAL: Final = r"(?i:permission denied|connection refused)"
"""The operating system's refusals (``EACCES``, ``ECONNREFUSED``) in any case (Go lowercases them)."""
