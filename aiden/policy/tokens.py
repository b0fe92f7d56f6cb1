"""Token estimates without a tokenizer: the estimator, its per-tokenizer coefficients and their run-time correction.

A real BPE tokenizer is too slow for the many counts a maintenance pass needs and ties policy to one
model family. :func:`estimate_tokens` counts the *pre-tokens* of GPT-style tokenizers (almost always
one token each) with big-integer bit operations over one class byte per character, plus terms for
long letter runs, long punctuation runs and non-Latin scripts; CJK is costed per character so it is
never undercounted, and random-looking stretches (base64, keys, hashes) by their length and mix of
cases and digits. A :class:`TokenProfile` (fitted by ``benchmarks/bench_policy.py --fit``) turns
the statistics into tokens; :class:`TokenCalibration` and :class:`BudgetCalibration` learn the
remaining bias (and its spread) from the prompt sizes providers report.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from aiden.events import SessionEvent

__all__ = [
    "CL100K",
    "DEFAULT_PROFILE",
    "MESSAGE_OVERHEAD_TOKENS",
    "O200K",
    "SCRIPTS",
    "BudgetCalibration",
    "TextFeatures",
    "TokenCalibration",
    "TokenProfile",
    "apply_calibration",
    "calibrate",
    "checked_tokens",
    "cut_to_tokens",
    "estimate_event_tokens",
    "estimate_event_tokens_by",
    "estimate_tokens",
    "event_tokens",
    "observe",
    "profile_for_model",
    "text_features",
]

MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Tokens a chat message costs beyond its text (role and framing tokens)."""


# --- token profiles -----------------------------------------------------------


class TokenProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Coefficients turning :class:`~aiden.policy.tokens.TextFeatures` into tokens for one tokenizer family."""

    name: str
    pretoken: float
    """Per pre-token (word, digit group, punctuation run, whitespace run)."""
    long_word: float
    """Per six ASCII letters of one letter run (rare long words split into several tokens)."""
    punct_run: float
    """Per three characters of one punctuation run (``"}]},`` is more than one token)."""
    cjk_common: float
    """Per frequent CJK character (single token in cl100k_base)."""
    cjk_rare: float
    """Per other CJK character (several byte-level tokens)."""
    other_letter: float
    """Per non-ASCII, non-CJK character of the Basic Multilingual Plane outside :data:`SCRIPTS` (accents, Cyrillic, ...)."""
    astral: float
    """Per character outside the Basic Multilingual Plane (emoji, rare ideographs)."""
    scripts: tuple[float, ...] = ()
    """Per letter of each of :data:`SCRIPTS`, in that order; a script without a value costs ``other_letter``."""
    random_char: float = 0.0
    """Per character of a random-looking stretch (see :attr:`TextFeatures.random_chars`)..."""
    random_mix: float = 0.0
    """...plus per case flip or letter-digit switch in it; the stretch costs this or its ordinary estimate,
    whichever is larger."""


# Scripts whose letters cost a tokenizer far more (or less) than accented Latin and Cyrillic do: up to
# three tokens a letter where it learned few merges (Ethiopic, Lao, Tibetan; most Indic scripts in
# cl100k_base). Each is a range of whole 64-code-point blocks (a shared block goes to the script that
# uses it most: Armenian takes rare Cyrillic letters and Hebrew points, Myanmar old Georgian capitals,
# rare Greek signs stay other letters) with its cost per letter
# in o200k_base and cl100k_base, fitted like the profiles (relative least squares, the other
# coefficients held) on written sentences. Arabic, Devanagari and Bengali keep o200k's other_letter:
# their own fit was no closer.
_SCRIPTS: Final = (
    ("Greek", 0x0380, 0x03FF, 0.185, 0.871),
    ("Armenian", 0x0500, 0x05BF, 0.17, 1.991),
    ("Hebrew", 0x05C0, 0x05FF, 0.23, 0.947),
    ("Arabic", 0x0600, 0x06FF, 0.133, 0.67),
    ("Devanagari", 0x0900, 0x097F, 0.133, 0.985),
    ("Bengali", 0x0980, 0x09FF, 0.133, 1.303),
    ("Gurmukhi", 0x0A00, 0x0A7F, 0.397, 1.793),
    ("Gujarati", 0x0A80, 0x0AFF, 0.223, 1.802),
    ("Oriya", 0x0B00, 0x0B7F, 1.006, 2.772),
    ("Tamil", 0x0B80, 0x0BFF, 0.233, 1.408),
    ("Telugu", 0x0C00, 0x0C7F, 0.266, 1.862),
    ("Kannada", 0x0C80, 0x0CFF, 0.207, 1.883),
    ("Malayalam", 0x0D00, 0x0D7F, 0.225, 1.684),
    ("Sinhala", 0x0D80, 0x0DFF, 0.397, 1.975),
    ("Thai", 0x0E00, 0x0E7F, 0.369, 0.861),
    ("Lao", 0x0E80, 0x0EFF, 1.814, 2.201),
    ("Tibetan", 0x0F00, 0x0FFF, 1.475, 2.063),
    ("Myanmar", 0x1000, 0x10BF, 0.438, 2.017),
    ("Georgian", 0x10C0, 0x10FF, 0.161, 1.989),
    ("Ethiopic", 0x1200, 0x137F, 1.978, 2.748),
    ("Khmer", 0x1780, 0x17FF, 0.579, 1.66),
)
SCRIPTS: Final = tuple(row[0] for row in _SCRIPTS)
"""The scripts costed per letter by :attr:`TokenProfile.scripts` (and counted by :attr:`TextFeatures.scripts`)."""

O200K: Final = TokenProfile(
    name="o200k",
    pretoken=1.012,
    long_word=0.186,
    punct_run=0.314,
    cjk_common=0.553,
    cjk_rare=1.317,
    other_letter=0.133,
    astral=1.988,
    scripts=tuple(row[3] for row in _SCRIPTS),
    random_char=0.288,
    random_mix=0.659,
)
"""o200k_base: gpt-4o, gpt-4.1, gpt-5, o-series."""

CL100K: Final = TokenProfile(
    name="cl100k",
    pretoken=1.0,
    long_word=0.306,
    punct_run=0.269,
    cjk_common=0.785,
    cjk_rare=2.48,
    other_letter=0.346,
    astral=3.47,
    scripts=tuple(row[4] for row in _SCRIPTS),
    random_char=0.27,
    random_mix=0.753,
)
"""cl100k_base: gpt-4, gpt-3.5, text-embedding-3; also the conservative default."""

DEFAULT_PROFILE: Final = CL100K
"""Used when the model's tokenizer family is unknown: never undercounts CJK text."""

_O200K_MODELS: Final = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss")
_O200K_PREFIXES: Final = ("o1", "o3", "o4")
_CL100K_MODELS: Final = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def profile_for_model(model: str | None) -> TokenProfile:
    """The profile of a model name (``"gpt-4o"``, ``"openai/o3-mini"``); :data:`DEFAULT_PROFILE` when unknown."""
    if not model:
        return DEFAULT_PROFILE
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES) or any(m in name for m in _O200K_MODELS):
        return O200K
    if any(m in name for m in _CL100K_MODELS):
        return CL100K
    return DEFAULT_PROFILE


# --- character classes --------------------------------------------------------
# One class byte per character. Flags are one-hot except that CJK and other
# non-ASCII letters also carry the letter bit, because the tokenizers' pre-token
# regex treats them as letters (they extend and start letter runs).
_A: Final = 0x01  # letter
_D: Final = 0x02  # digit
_P: Final = 0x04  # punctuation, symbol, control
_S: Final = 0x08  # horizontal whitespace
_N: Final = 0x10  # newline
_C: Final = 0x21  # CJK (letter)
_U: Final = 0x41  # other non-ASCII BMP character (letter)
_V: Final = 0x61  # possibly a letter of one of _SCRIPTS (letter)
_E: Final = 0x80  # outside the BMP


def _class_table() -> bytes:
    # Works on UTF-8: continuation bytes are deleted by translate(), so the
    # lead byte alone stands for the whole character.
    table = bytearray(256)
    for byte in range(256):
        if byte < 0x80:
            ch = chr(byte)
            if ch in "\r\n":
                table[byte] = _N
            elif ch in " \t\x0b\x0c":
                table[byte] = _S
            elif ch.isdigit():
                table[byte] = _D
            elif ch.isalpha():
                table[byte] = _A
            else:
                table[byte] = _P
        elif byte == 0xE2:  # U+2000..U+2FFF: general punctuation, arrows, math
            table[byte] = _P
        elif 0xE3 <= byte <= 0xED or byte == 0xEF:  # U+3000..U+DFFF, U+F000..U+FFFF
            table[byte] = _C
        elif byte >= 0xF0:
            table[byte] = _E
        elif 0xCE <= byte <= 0xCF or 0xD4 <= byte <= 0xDB or byte in (0xE0, 0xE1):
            # U+0380..U+03FF, U+0500..U+06FF, U+0800..U+1FFF: every script of
            # _SCRIPTS, and some other characters the finer count leaves to _U.
            table[byte] = _V
        else:  # the other 2-byte characters (Latin accents, Cyrillic), private use
            table[byte] = _U
    return bytes(table)


_CLASS_TABLE: Final = _class_table()
_CONTINUATION: Final = bytes(range(0x80, 0xC0))

# Big-int bit operations cost O(length); texts longer than one block are
# processed block by block so the masks stay small (a run crossing a block
# border is counted twice: one token in 16 KiB).
_BLOCK: Final = 1 << 14


def _mask(byte: int) -> int:
    return int.from_bytes(bytes([byte]) * _BLOCK, "little")


_M_RUNS: Final = _mask(_A | _D | _P | _N)
_M_P: Final = _mask(_P)
_M_S: Final = _mask(_S)
_M_N: Final = _mask(_N)
_M_D: Final = _mask(_D)

_CJK_BYTE: Final = bytes([_C])
_OTHER_BYTE: Final = bytes([_U])
_SCRIPT_BYTE: Final = bytes([_V])
_ASTRAL_BYTE: Final = bytes([_E])
_DIGITS4: Final = bytes([_D]) * 4
_LETTERS6: Final = bytes([_A]) * 6
_PUNCT3: Final = bytes([_P]) * 3
_LETTER_DIGIT_LETTER: Final = bytes([_A, _D, _A])

# Random-looking text (base64, keys, hashes, JWTs) is a long stretch of these characters with no space
# (base64 wraps its lines: a stretch goes on over them)...
_STRETCH_CHARS: Final = string.ascii_letters + string.digits + "+/=_-"
_STRETCH: Final = re.compile(r"[A-Za-z0-9+/=_-]{24,}(?:\n[A-Za-z0-9+/=_-]{24,})*")
_STRETCH_MIN: Final = 24
# ...whose cases and digits switch all the time: the tokenizer has no long merges for it and spends a
# token per 1.5-2 characters, where words and identifiers of the same length take 4-10 characters
# each. Identifiers switch case only at word starts ("getHttpResponse": a fifth of their letters) and
# hold a digit between letters rarely. `_MIX` reduces a stretch to its character kinds.
_MIX: Final = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", b"a" * 26 + b"A" * 26 + b"0" * 10
)
_DIGIT_BETWEEN_LETTERS: Final = re.compile(rb"[aA]0[aA]")
_PIECE: Final = 64
# Stretches are found as runs of 24 or more of a translate of the text (one byte per character):
# C-level searches, where a check per digit between letters made text full of short "utf8mb4" and
# "x86_64" words 5-25x slower.
_IN_STRETCH: Final = bytes(1 if chr(byte) in _STRETCH_CHARS else 0 for byte in range(256))
_LONG_RUN: Final = b"\x01" * _STRETCH_MIN
# Hex (hashes, checksums) has 16 symbols and no case flips: it costs fewer tokens per character than
# the base64 the price was fitted on, and the ordinary estimate already comes within about 5%.
_HEX_STRETCH: Final = string.hexdigits + "\n"

# The CJK characters that are a single cl100k_base token (812 of them: the most
# frequent Han characters, kana, hangul syllables and CJK punctuation).
# Regenerate with `python benchmarks/bench_policy.py --gen-common-cjk`.
_COMMON_CJK_LETTERS: Final = (
    "あいうえおかがきくけこごさざしじすせそただちっつてでとどなにのはばまみめ"
    "もやよらりるれろわをんアィイウェエオカキクグコサシジスズセタダチッテデト"
    "ドナニバパビピフブプペポマムメャュョラリルレロンー一万三上下不与专业东两"
    "个中串为主么义之也书了事二于五些交产享京人亿今介从他付代以们件价任份企优"
    "会传但位体何余作你使例供価保信修倍值停像元先入全公共关其具内円册再写出击"
    "分列则初利别到制前力功加务动動包化北区十午华单南即历原去县参及友反发取变"
    "口只可台右号司合同名后向否含听启告员周命和品哈商問器四回因国图土在地场址"
    "型城基報場填增声处备复外多大天失头女好如始子字存学安宋完定实审客家容密对"
    "导将小少尔就局展山岁州工左已市布常平年并广序库应店度建开异式引张当录形影"
    "径待後得微心必志态思性总息您情意感成我或户所手打找技投报拉持指按换据排接"
    "推提播支收改放政效数整文料断新方族无日时明易星是時景更最月有服期木未本机"
    "权束条来板构析果查标样核格案检模次款止正此步歳段每比民気水求江汽没治法注"
    "活流海消清游源火点無然片版物特率环现球理生用由电男画界番登的监目直相省看"
    "県真知码确示社票私种科秒称移程稍税稿空立站章端笑符第等签简算管箱米类系素"
    "索约级线组经结给络统编网置美老考者而联能自至色节英藏行表装西要見见规视角"
    "解言計記話読计认议记论设证评试话询该详语误说请读调象责败账货购费资起超路"
    "身车转软载辑输达过运近还这进连述退送选通速造連道邮部都配释里重量金钟钮链"
    "销错键长開間関门闭问间队阳陆限院除雅集雷需非面音页项预频题额首验高黑가간"
    "값개거게결경고공과구그글기나내는능니다당대도동되된드든들디라래러력로록료"
    "류른를름리만메면명목문미버번보복부분비사산상색생서성세션소수스습시식신아"
    "야어에여열오와요용우운원위으은을음의이인일임입자작장재적전정제져조주지진"
    "째체출치크태터턴트튼하한할함해호화환회"
)
_COMMON_CJK_SYMBOLS: Final = (
    "\u3001\u3002\u300a\u300b\u300c\u300d\u300e\u300f\u3010\u3011\u301c\u30fb\uff01\uff08"
    "\uff09\uff0c\uff0d\uff0e\uff0f\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18"
    "\uff19\uff1a\uff1b\uff1e\uff1f\uff3e\uff5e\uff65\uffe5"
)

_CJK_RANGES: Final = (
    (0x2E80, 0x2FFF),
    (0x3000, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF),
)


def _rare_cjk_pattern() -> re.Pattern[str]:
    common = sorted({ord(ch) for ch in _COMMON_CJK_LETTERS + _COMMON_CJK_SYMBOLS})
    parts: list[str] = []
    for low, high in _CJK_RANGES:
        start = low
        # high + 1 closes the last gap of the range.
        for cp in [*(cp for cp in common if low <= cp <= high), high + 1]:
            if cp > start:
                parts.append(f"\\u{start:04x}-\\u{cp - 1:04x}")
            start = cp + 1
    return re.compile("[" + "".join(parts) + "]")


# Counting the rare ones (about a quarter of running Chinese text) allocates
# fewer match objects than counting the common ones.
_RARE_CJK: Final = _rare_cjk_pattern()


def _block_scripts() -> tuple[bytes, bytes]:
    # Script number (1-based) of each 64-code-point block below U+4000, for bytes.translate().
    table = bytearray(256)
    for number, (_, first, last, _, _) in enumerate(_SCRIPTS, 1):
        table[first >> 6 : (last >> 6) + 1] = bytes([number]) * ((last - first + 1) >> 6)
    return bytes(table), bytes(block for block in range(256) if not table[block])


_BLOCK_SCRIPT, _NOT_SCRIPT_BLOCKS = _block_scripts()
_HIGH_TO_BLOCK: Final = bytes(high << 2 if high < 0x40 else 0xFC for high in range(256))  # U+3F00.. has no script
_LOW_TO_BLOCK: Final = bytes(low >> 6 for low in range(256))


def _script_letters(text: str) -> tuple[int, ...]:
    """Letters of each of :data:`SCRIPTS` in ``text``."""
    # Byte i of the UTF-16 halves is the high and low byte of character i (or of a surrogate);
    # their bits OR-ed as big ints give each character's 64-code-point block in one byte.
    utf16 = text.encode("utf-16-be", "surrogatepass")
    high = int.from_bytes(utf16[0::2].translate(_HIGH_TO_BLOCK), "big")
    blocks = (high | int.from_bytes(utf16[1::2].translate(_LOW_TO_BLOCK), "big")).to_bytes(len(utf16) // 2, "big")
    scripts = blocks.translate(_BLOCK_SCRIPT, _NOT_SCRIPT_BLOCKS)
    if not scripts:  # only other letters that share a UTF-8 lead byte with the scripts (Vietnamese)
        return ()
    counts = [0] * len(_SCRIPTS)
    for number in set(scripts):  # (a text holds a script or two: count only those)
        counts[number - 1] = scripts.count(number)
    return tuple(counts)


class TextFeatures(msgspec.Struct, frozen=True, kw_only=True):
    """The character statistics an estimate is computed from (see :class:`TokenProfile`)."""

    pretokens: int
    long_words: int
    punct_runs: int
    cjk_common: int
    cjk_rare: int
    other_letters: int
    astral: int
    scripts: tuple[int, ...] = ()
    """Letters of each of :data:`SCRIPTS` (not in ``other_letters``); empty when there are none."""
    random_chars: int = 0
    """Characters of random-looking stretches: lines of 24 or more of ``[A-Za-z0-9+/=_-]`` (one after another)
    of which a piece of at most 64 holds a digit between two letters and a letter-digit switch or case
    flip every second character, or a switch every ten and a switch or flip every three; not hex."""
    random_mixes: int = 0
    """Letter-digit switches and case flips in those stretches."""


def _pretokens(data: bytes) -> tuple[int, bool]:
    """Pre-tokens of class bytes ``data`` (digit runs counted once; see :func:`_features`), and whether
    it holds a digit between two letters."""
    if len(data) > _BLOCK:
        parts = [_pretokens(data[i : i + _BLOCK]) for i in range(0, len(data), _BLOCK)]
        edges = range(_BLOCK, len(data), _BLOCK)  # (a digit between letters there is in neither block)
        mixed = any(m for _, m in parts) or any(_LETTER_DIGIT_LETTER in data[i - 2 : i + 2] for i in edges)
        return sum(p for p, _ in parts), mixed
    x = int.from_bytes(data, "little")
    # Byte i of `x << 8` holds the class of character i-1 and byte i of
    # `x >> 8` that of character i+1; the extra bit shifts line a flag of the
    # neighbour up with a different flag of character i.
    # (`a ^ (a & b)` is `a & ~b` without the slow negative intermediate.)
    before, beyond = x << 8, x >> 8
    start = x ^ (x & before)  # flag k set where a run of class k starts
    after = x >> 6  # bit 2 <- next is a letter, bit 3 <- next is a digit
    # Every letter, digit, punctuation and newline run starts a pre-token,
    # except a newline run right after punctuation (`):\n` is one pre-token)
    # and a lone symbol glued to the next word (`.join`, `"name`), which
    # does not glue after a space (` "name` is two)...
    symbol_then_letter = after & _M_P
    glued = start & (((x << 10) & _M_N) | (symbol_then_letter ^ (symbol_then_letter & (x << 7))))
    # ...and a space glues to the next word or symbol, so only longer space
    # runs (indentation) and a space before a digit stand alone.
    spaces = ((start & beyond) | (x & after)) & _M_S
    # Letters on both sides (bit 0) shifted onto the digit flag (bit 1).
    between = ((before & beyond) << 1) & x & _M_D
    return (((start & _M_RUNS) ^ glued) | spaces).bit_count(), between != 0


def _features(text: str) -> tuple[int, int, int, int, int, int, int, tuple[int, ...], bytes]:
    data = text.encode("utf-8", "surrogatepass").translate(_CLASS_TABLE, _CONTINUATION)
    # Digits come in groups of at most three: a run of L digits is ceil(L/3)
    # pre-tokens; floor(L/4) extra is exact up to six digits and at most one
    # short above (10-digit timestamps), for one scan instead of a loop.
    pretokens, digit_between = _pretokens(data)
    pretokens += data.count(_DIGITS4)
    long_words = data.count(_LETTERS6)
    punct_runs = data.count(_PUNCT3)
    # A random-looking stretch holds a digit between letters; few other texts do, and only for
    # those are the class bytes passed on (the last field) to look for one.
    mixed = data if digit_between else b""
    if text.isascii():
        return pretokens, long_words, punct_runs, 0, 0, 0, 0, (), mixed
    cjk = data.count(_CJK_BYTE)
    rare = len(_RARE_CJK.findall(text)) if cjk else 0
    other = data.count(_OTHER_BYTE)
    scripts: tuple[int, ...] = ()
    if maybe_script := data.count(_SCRIPT_BYTE):
        scripts = _script_letters(text)
        other += maybe_script - sum(scripts)
    astral = data.count(_ASTRAL_BYTE)
    return pretokens, long_words, punct_runs, cjk - rare, rare, other, astral, scripts, mixed


def _mixes(kinds: bytes) -> int:
    """Letter-digit switches and case flips in ``kinds`` (see `_MIX`)."""
    # (A pair of two kinds cannot overlap itself: counting them counts them all.)
    return sum(kinds.count(pair) for pair in (b"a0", b"0a", b"A0", b"0A", b"aA", b"Aa"))


def _looks_random(kinds: bytes) -> bool:
    """Whether a piece of a stretch, reduced to its ``kinds``, switches or flips case every second
    character, or switches between letters and digits every ten and switches or flips every three; and
    holds a digit between letters."""
    switches = kinds.count(b"a0") + kinds.count(b"0a") + kinds.count(b"A0") + kinds.count(b"0A")
    mixes = switches + kinds.count(b"aA") + kinds.count(b"Aa")
    # Random case flips about every other letter (camelCase about every fifth): that alone will do.
    mixed = 2 * mixes >= len(kinds) or (10 * switches >= len(kinds) and 20 * mixes >= 7 * len(kinds))
    return mixed and _DIGIT_BETWEEN_LETTERS.search(kinds) is not None


def _random_stretches(text: str, data: bytes) -> list[tuple[int, int, int]]:
    """The random-looking stretches of ``text`` (class bytes ``data``; see :attr:`TextFeatures.random_chars`),
    each as its start, end and mixes."""
    found = []
    runs = text.encode("utf-8", "surrogatepass").translate(_IN_STRETCH, _CONTINUATION)
    run = runs.find(_LONG_RUN)
    while run >= 0:
        run_end = runs.find(0, run)
        if run_end < 0:
            run_end = len(runs)
        # Code holds digits between letters too ("utf8mb4"), but rarely in a stretch.
        if data.find(_LETTER_DIGIT_LETTER, run, run_end) >= 0:
            end = _STRETCH.match(text, run).end()  # type: ignore[union-attr]  # (it matches 24 or more)
            stretch = text[run:end]
            if stretch.strip(_HEX_STRETCH):
                # A stretch is judged in pieces of a line of base64 (64-76 characters) or less, and
                # priced whole if one piece looks random: base64 of a binary mixes random pieces with
                # runs of "AAAA" (zero bytes), which cost the tokenizer less but still a token per
                # 3-5 characters.
                kinds = stretch.encode().translate(_MIX)
                for line in kinds.split(b"\n"):
                    step = -(-len(line) // -(-len(line) // _PIECE))
                    if any(_looks_random(line[i : i + step]) for i in range(0, len(line), step)):
                        found.append((run, end, _mixes(kinds)))
                        break
            run_end = end
        run = runs.find(_LONG_RUN, run_end)
    return found


def text_features(text: str) -> TextFeatures:
    """The statistics :func:`estimate_tokens` uses; for fitting and diagnostics."""
    pre, long_words, punct, common, rare, other, astral, scripts, mixed = _features(text)
    stretches = _random_stretches(text, mixed) if mixed else []
    return TextFeatures(
        pretokens=pre,
        long_words=long_words,
        punct_runs=punct,
        cjk_common=common,
        cjk_rare=rare,
        other_letters=other,
        astral=astral,
        scripts=scripts,
        random_chars=sum(end - start for start, end, _ in stretches),
        random_mixes=sum(mixes for _, _, mixes in stretches),
    )


def estimate_tokens(text: str, profile: TokenProfile = DEFAULT_PROFILE) -> int:
    """Estimate how many tokens ``text`` is for ``profile``'s tokenizer family; a non-empty text is at least 1."""
    if not text:
        return 0
    pre, long_words, punct, common, rare, other, astral, scripts, mixed = _features(text)
    estimate = profile.pretoken * pre + profile.long_word * long_words + profile.punct_run * punct
    if common or rare or other or astral:  # (none in ASCII text: skip the arithmetic)
        estimate += (
            profile.cjk_common * common
            + profile.cjk_rare * rare
            + profile.other_letter * other
            + profile.astral * astral
        )
    if scripts:
        priced = profile.scripts
        estimate += sum(c * n for c, n in zip(priced, scripts, strict=False))
        estimate += profile.other_letter * sum(scripts[len(priced) :])
    if mixed:
        # A random-looking stretch costs by its length and mixes, or as ordinary text if that is more.
        for start, end, mixes in _random_stretches(text, mixed):
            part = mixed[start:end]  # (its class bytes: ASCII, so the other terms are 0)
            pre = _pretokens(part)[0] + part.count(_DIGITS4)
            ordinary = (
                profile.pretoken * pre
                + profile.long_word * part.count(_LETTERS6)
                + profile.punct_run * part.count(_PUNCT3)
            )
            estimate += max(0.0, profile.random_char * (end - start) + profile.random_mix * mixes - ordinary)
    return max(1, int(estimate + 0.5))


def estimate_event_tokens(event: SessionEvent, profile: TokenProfile = DEFAULT_PROFILE) -> int:
    """Estimate the prompt cost of one event: content, tool arguments, tool name and framing."""
    return estimate_event_tokens_by(event, lambda text: estimate_tokens(text, profile))


def estimate_event_tokens_by(event: SessionEvent, estimate: Callable[[str], int]) -> int:
    """:func:`estimate_event_tokens` with ``estimate`` counting each text (a memory's cached
    :func:`estimate_tokens` of its profile counts as the profile does)."""
    texts = (event.content, event.tool_args or "", event.tool_name or "")
    return MESSAGE_OVERHEAD_TOKENS + sum(estimate(text) for text in texts)


def event_tokens(events: Sequence[SessionEvent], profile: TokenProfile = DEFAULT_PROFILE) -> list[int]:
    """:func:`estimate_event_tokens` of every event, in order."""
    return [estimate_event_tokens(event, profile) for event in events]


# --- cutting text to a budget ------------------------------------------------------

_CUT_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_CUT_MARK = " [...]"
_CUT_WORD = re.compile(r"\S+")


def cut_to_tokens(text: str, budget: int, estimate: Callable[[str], int]) -> str:
    """``text`` if it fits ``budget`` tokens, else its longest prefix ending at a sentence or line end.

    The cut is marked `` [...]``; with no such boundary inside the budget it falls on a word.
    Raises ValueError for ``budget < 1``.
    """
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    if estimate(text) <= budget:
        return text
    room = budget - estimate(_CUT_MARK)
    ends = [m.start() for m in _CUT_BOUNDARY.finditer(text)]
    _, head = longest_fit(len(ends), lambda k: text[: ends[k]], room, estimate)
    if head:
        return head.rstrip() + _CUT_MARK
    # The word fallback cuts the original text too, so the result stays a prefix of it
    # (joining split() words would fold a leading or doubled whitespace run away).
    words = [m.end() for m in _CUT_WORD.finditer(text)]
    _, head = longest_fit(len(words), lambda k: text[: words[k]], room, estimate)
    return head + _CUT_MARK


def longest_fit(
    count: int, attempt: Callable[[int], str], budget: int, estimate: Callable[[str], int]
) -> tuple[int, str]:
    """The largest ``k < count`` whose ``attempt(k)`` fits ``budget`` tokens, with that text; ``(0, "")``
    when none does. A binary search: the attempts should grow with ``k`` (it keeps the last verified fit)."""
    best, kept, lo, hi = "", 0, 0, count - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        trial = attempt(mid)
        if estimate(trial) <= budget:
            best, kept, lo = trial, mid, mid + 1
        else:
            hi = mid - 1
    return kept, best


# --- calibration from provider-reported prompt sizes ---------------------------------

_MIN_FACTOR: Final = 0.5
_MAX_FACTOR: Final = 2.0


class TokenCalibration(msgspec.Struct, frozen=True):
    """Per-model correction of the estimate: ``factor`` multiplies estimates, learned from ``samples`` reports."""

    factor: float = 1.0
    samples: int = 0


def _clamp(value: float) -> float:
    return min(_MAX_FACTOR, max(_MIN_FACTOR, value))


def calibrate(
    cal: TokenCalibration, *, estimated: int, reported: int, weight: float = 0.2
) -> TokenCalibration:
    """Fold one observation (our estimate vs. the provider's prompt tokens) into ``cal``.

    An exponential moving average of ``reported / estimated``; the first sample replaces the neutral
    start so one observation corrects a large bias. Clamped to [0.5, 2.0] so parts the estimate never
    saw (system prompt, tool schemas) cannot teach a wild factor; non-positive sides are ignored.
    Raises ValueError for a ``weight`` outside (0, 1].
    """
    # The factor of observe(), without its spread.
    start = BudgetCalibration(cal.factor, 0.0, cal.samples)
    seen = observe(start, estimated=estimated, reported=reported, weight=weight)
    return cal if seen is start else TokenCalibration(seen.factor, seen.samples)


def apply_calibration(tokens: int, cal: TokenCalibration) -> int:
    """``tokens`` corrected by ``cal`` (rounded, never negative)."""
    return max(0, round(tokens * cal.factor))


class BudgetCalibration(msgspec.Struct, frozen=True):
    """What the budget check learned from provider-reported prompt sizes: the bias (``factor``) and its ``spread``."""

    factor: float = 1.0
    spread: float = 0.0
    samples: int = 0


def observe(
    cal: BudgetCalibration, *, estimated: int, reported: int, weight: float = 0.2
) -> BudgetCalibration:
    """Fold one observation into ``cal`` (non-positive sides are ignored, ratios clamped to [0.5, 2])."""
    if not 0.0 < weight <= 1.0:
        raise ValueError(f"weight must be in (0, 1], got {weight!r}")
    if estimated <= 0 or reported <= 0:
        return cal
    ratio = _clamp(reported / estimated)
    if cal.samples == 0:
        return BudgetCalibration(factor=ratio, spread=0.0, samples=1)
    error = abs(ratio - cal.factor)
    factor = _clamp(cal.factor + weight * (ratio - cal.factor))
    # An error larger than the spread counts in full: one undercount is reason enough to widen it.
    spread = error if error > cal.spread else cal.spread + weight * (error - cal.spread)
    return BudgetCalibration(factor=factor, spread=spread, samples=cal.samples + 1)


def checked_tokens(estimated: int, cal: BudgetCalibration) -> int:
    """The size the budget check holds a prompt to: ``estimated`` corrected with its margin, never less."""
    if cal.samples == 0:
        return estimated
    return max(estimated, math.ceil(estimated * (cal.factor + 2 * cal.spread)))
