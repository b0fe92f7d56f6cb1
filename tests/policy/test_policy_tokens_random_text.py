"""Token estimates of random-looking text (base64, cipher text): no 2-3x undercount, ordinary text unchanged.

The real counts are constants: ``len(enc.encode_ordinary(text))`` with tiktoken's o200k_base and
cl100k_base, loaded offline from litellm's bundled files as ``benchmarks/bench_policy.py`` does.
"""

from __future__ import annotations

import base64
import hashlib
import string

import pytest

from aiden.policy.tokens import CL100K, O200K, TokenProfile, estimate_tokens


def _blob(blocks: int) -> bytes:
    """Deterministic random-looking bytes (32 per block)."""
    return b"".join(hashlib.sha256(b"aiden-%d" % i).digest() for i in range(blocks))


def _caesar(text: str, shift: int) -> str:
    low, up = string.ascii_lowercase, string.ascii_uppercase
    return text.translate(str.maketrans(low + up, low[shift:] + low[:shift] + up[shift:] + up[:shift]))


PROSE = (
    "The deployment failed overnight because the database migration locked the orders table for "
    "eleven minutes. We rolled back at 03:40, added an index on customer_id, and reran the migration "
    "in batches of ten thousand rows; it finished in ninety seconds without blocking writes."
)
CODE = '''def load_config(path: Path) -> dict[str, Any]:
    """Read a TOML config; missing keys fall back to DEFAULTS."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    merged = {**DEFAULTS, **data.get("tool", {}).get("aiden", {})}
    if merged["maxTokens"] <= 0:
        raise ValueError(f"maxTokens must be positive, got {merged['maxTokens']!r}")
    return merged
'''
NAMES = (
    "Angus McGee met LeBron James, Mary O'Brien and Jan Przybylski in Dnipro; GetAsync and ToString in "
    "Knightsbridge at the LGBTQ+ centre, over an HTTPSConnection."
)

# (text, real o200k_base tokens, real cl100k_base tokens)
RANDOM = {
    "base64": (base64.b64encode(_blob(30)).decode(), 878, 925),  # 1280 characters on one line
    "base64 wrapped": (base64.encodebytes(_blob(12)).decode(), 362, 381),  # 76-column lines, as `base64` prints
    "base64 of text": (base64.b64encode(PROSE.encode()).decode(), 239, 257),
    "caesar cipher": (_caesar(PROSE, 10), 122, 129),
}


@pytest.mark.parametrize("profile", [O200K, CL100K], ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_looking_text_is_not_undercounted(name: str, profile: TokenProfile) -> None:
    # The estimate decides when to compact before the provider counts: a blob estimated at a third of
    # its size (base64 was, at 0.33-0.47) can overflow the window on the call that carries it.
    text, o200k, cl100k = RANDOM[name]
    real = o200k if profile is O200K else cl100k
    # The estimator's accuracy bar (as for scripts): an undercount of a quarter at most, an overcount of a third.
    assert 0.75 <= estimate_tokens(text, profile) / real <= 1.35


@pytest.mark.parametrize(
    ("text", "o200k", "cl100k"),
    [(PROSE, 57, 58), (CODE, 99, 100), (NAMES, 32, 33)],
    ids=["prose", "code", "names"],
)
def test_ordinary_text_estimates_are_unchanged(text: str, o200k: int, cl100k: int) -> None:
    # The estimator's values before runs of consonants were priced: words, identifiers and names
    # ("McGee", "GetAsync") hold no run of five, and five capitals are an acronym ("LGBTQ").
    assert estimate_tokens(text, O200K) == o200k
    assert estimate_tokens(text, CL100K) == cl100k
    assert estimate_tokens(text) == cl100k
