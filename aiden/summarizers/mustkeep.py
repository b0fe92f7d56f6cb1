"""Deterministic must-keep check: facts a summary may not silently lose.

Seed 001 lists what is almost never compactable: the user's constraints and
corrections, decisions with their reasons, identifiers, paths and numbers the
agent will refer to again. An LLM summary may paraphrase or drop them; this
module finds them in the compacted events with plain rules
(:func:`extract_must_keep`) and appends the ones a summary lost
(:func:`apply_must_keep`). Everything here is pure and deterministic.

The sentence-level primitives (splitting, classification, key tokens) live
here too, because the extractive summarizer must agree with the check on what
an item *is*: an item it keeps verbatim is then found present by
:func:`apply_must_keep` and nothing is appended twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Literal

from aiden.events import SessionEvent

__all__ = [
    "Haystack",
    "SentenceKind",
    "apply_must_keep",
    "classify_sentence",
    "clip",
    "content_words",
    "extract_must_keep",
    "is_strong_error_line",
    "join_sentences",
    "find_paths",
    "key_tokens",
    "normalize",
    "split_sentences",
]

SentenceKind = Literal[
    "correction",
    "preference",
    "constraint",
    "decision",
    "failed",
    "resolution",
    "error",
    "plan",
    "fact",
    "greeting",
    "other",
]
"""What one sentence carries, most load-bearing kinds first."""

Speaker = Literal["user", "assistant", "any"]

ITEM_MAX_CHARS: Final = 300
"""Longest kept sentence; longer ones are clipped at a word boundary with an ellipsis."""

_ELLIPSIS: Final = "…"
_CJK_TERMINATORS: Final = ("\u3002", "\uff01", "\uff1f", "\uff1b", "\uff0c")
_EDGE_PUNCTUATION: Final = " .,;:!?\u3002\uff01\uff1f\uff1b\uff1a-*•"  # ASCII and CJK full-width
_WS: Final = re.compile(r"\s+")
_CJK_CLASS: Final = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK: Final = re.compile(_CJK_CLASS)
_CJK_RUN: Final = re.compile(_CJK_CLASS + "+")

# ---------------------------------------------------------------------------
# normalization and splitting
# ---------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Case-fold, collapse whitespace and strip edge punctuation: the form used for matching."""
    return _WS.sub(" ", text).strip().casefold().strip(_EDGE_PUNCTUATION)


def join_sentences(sentences: Iterable[str]) -> str:
    """Join sentences with a space, except after CJK punctuation (CJK text has no spaces)."""
    out = ""
    for sentence in sentences:
        if out and not out.endswith(_CJK_TERMINATORS):
            out += " "
        out += sentence
    return out


def clip(text: str, limit: int = ITEM_MAX_CHARS) -> str:
    """Collapse whitespace and cut ``text`` to ``limit`` characters at a word boundary.

    Deterministic, so the extractive summary and the must-keep check clip the
    same sentence to the same string.
    """
    flat = _WS.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: max(1, limit - 1)]
    space = cut.rfind(" ")
    # Cut at a space unless that loses most of the text (CJK has no spaces).
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + _ELLIPSIS


# Sentence ends: CJK terminators always; ASCII ones only before whitespace so
# "app.py", "v1.2" and "e.g.x" stay whole. Not ";": "X was caused by Y; fixed
# by Z" must stay one fact.
_SENTENCE_END: Final = re.compile("(?<=[\u3002\uff01\uff1f])|(?<=[.!?])\\s+")
_ABBREVIATIONS: Final = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "mr.", "dr.", "fig.", "cf.")
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
_BULLET: Final = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")


def _prose_lines(text: str) -> Iterator[tuple[str, bool]]:
    """Yield ``(line, in_code_block)`` for each line of ``text``."""
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        yield line, in_code


def split_sentences(text: str, *, max_sentences: int = 400) -> list[str]:
    """Split prose into whitespace-normalized sentences (English and CJK punctuation).

    Lines are split first (a bullet is a sentence), then sentences inside a
    line. Fenced code blocks are skipped: code is not prose and would only
    produce noise. At most ``max_sentences`` are returned, so a pasted log
    cannot make the caller quadratic.
    """
    out: list[str] = []
    for line, in_code in _prose_lines(text):
        if in_code:
            continue
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        pieces = [p.strip() for p in _SENTENCE_END.split(line)]
        merged: list[str] = []
        for piece in pieces:
            if not piece:
                continue
            if merged and merged[-1].casefold().endswith(_ABBREVIATIONS):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        for sentence in merged:
            out.append(_WS.sub(" ", sentence))
            if len(out) >= max_sentences:
                return out
    return out


def code_lines(text: str) -> list[str]:
    """Lines of ``text`` that are shell commands: ``$ cmd`` lines and lines of shell code fences."""
    out: list[str] = []
    in_shell = False
    in_code = False
    for raw in text.splitlines():
        fence = _FENCE.match(raw)
        if fence:
            if in_code:
                in_code = in_shell = False
            else:
                in_code = True
                lang = raw.strip()[3:].strip().casefold()
                in_shell = lang in {"bash", "sh", "shell", "console", "zsh", "terminal", "cmd", "powershell", "ps"}
            continue
        line = raw.strip()
        if line.startswith("$ ") and len(line) > 2:
            out.append(line)
        elif in_shell and line and not line.startswith("#"):
            out.append(line if line.startswith("$ ") else f"$ {line}")
    return out


# ---------------------------------------------------------------------------
# distinctive tokens: paths, identifiers, numbers
# ---------------------------------------------------------------------------

_URL: Final = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
_EMAIL: Final = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_EXTENSIONS: Final = (
    "py|pyi|pyx|js|mjs|cjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|md|rst|txt|cfg|ini|sh|bash|zsh|"
    "go|rs|java|kt|swift|c|cc|h|hpp|cpp|rb|php|sql|html?|css|scss|lock|env|csv|tsv|xml|"
    "gradle|conf|log|proto|tf|ipynb|vue|svelte|dockerfile|mk|cs|scala|lua|r|pl|ex|exs|dart"
)
_PATH: Final = re.compile(
    r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]"
    rf"|(?<![\w/.@-])[\w@+-][\w.@+-]*\.(?:{_EXTENSIONS})\b",
    re.IGNORECASE,
)
# "Node.js", "Vue.js": product names, not files.
_FRAMEWORK_NAME: Final = re.compile(r"^[A-Z][A-Za-z]*\.js$")
_HAS_EXT: Final = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_TOKEN_PATTERNS: Final = (
    re.compile(r"`([^`\n]{1,80})`"),  # backticked code
    re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"),  # IPv4[:port]
    re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),  # UUID
    re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b"),  # ticket ids: JIRA-123
    re.compile(r"\b(?=[\w-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"),  # eu-west-1, acme-prod-42
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)?\b"),  # versions
    re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"),  # hashes
    re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]\b"),  # snake_case, CONST_CASE
    re.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"),  # camel/Pascal
    re.compile(r"\b[A-Za-z]+\d+[A-Za-z0-9]*\b"),  # ERR42, gpt4o, s3
    re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]+"),  # --flags
    re.compile(r"\b[a-z_]\w*(?:\.[a-z_]\w*){2,}\b"),  # dotted.module.names
)
_UNITS: Final = (
    r"ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|"
    r"[kmgt]i?b|bytes?|%|px|rem|em|tokens?|chars?|characters|lines?|rows?|requests?|"
    r"req/s|rps|qps|users?|items?|retries|workers?|threads?|cores?|[cg]pus?|usd|eur|dollars?|x|k|m"
)
_NUMBER_WITH_UNIT: Final = re.compile(
    rf"\b\d+(?:[.,]\d+)*\s?(?:{_UNITS})\b|[$€£¥]\s?\d[\d,.]*\b|\bport\s+\d+\b"
    r"|\d+(?:\.\d+)?\s?(?:个|天|小时|分钟|秒|毫秒|次|行|元|美元|万|千|周|月|年|%)",
    re.IGNORECASE,
)
_NUMBER: Final = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?![\w])")
_WORD: Final = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_STOPWORD_TEXT: Final = """a an the and or but if then else of to in on at by for with from into onto over under
    is are was were be been being it its this that these those there here we you they he she i
    me my our your their them us as so do does did done has have had not no yes can could
    will would should shall may might just also very too than which who whom what when where
    why how all any some each about after before again up down out off only own same such
    let lets let's i'll we'll i'm it's that's don't"""
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


def _strip_path(raw: str) -> str:
    return raw.rstrip(".,;:)]}'\"")


def find_paths(text: str) -> list[str]:
    """File paths mentioned in ``text``, in order of appearance, without duplicates.

    A slash-separated token counts only if it looks like a path (leading ``/``,
    ``./``, ``~/``, a file extension, or at least two slashes), so prose like
    "and/or" or "client/server" is not taken for one. URLs are not paths.
    """
    scrubbed = _URL.sub(" ", text)
    out: list[str] = []
    for match in _PATH.finditer(scrubbed):
        path = _strip_path(match.group(0))
        if not path or path in out:
            continue
        if "/" in path:
            leading = path.startswith(("/", "./", "../", "~/"))
            if not (leading or _HAS_EXT.search(path) or path.count("/") >= 2):
                continue
            if path.strip("/.~") == "":
                continue
        elif _FRAMEWORK_NAME.match(path):
            continue
        out.append(path)
    return out


def key_tokens(text: str) -> list[str]:
    """The distinctive tokens of ``text`` (paths, URLs, ids, versions, numbers), normalized.

    A summary that lost any of these lost the fact, however well it
    paraphrased the rest of the sentence.
    """
    found: list[str] = []

    def add(token: str) -> None:
        norm = normalize(token)
        if norm and norm not in found:
            found.append(norm)

    for match in _URL.finditer(text):
        add(_strip_path(match.group(0)))
    for match in _EMAIL.finditer(text):
        add(match.group(0))
    for path in find_paths(text):
        add(path)
    for pattern in _TOKEN_PATTERNS:
        for match in pattern.finditer(text):
            add(match.group(match.lastindex or 0))
    for match in _NUMBER_WITH_UNIT.finditer(text):
        add(match.group(0))
    for match in _NUMBER.finditer(text):
        add(match.group(0))
    # Drop tokens contained in a longer token ("8443" inside "port 8443").
    return [t for t in found if not any(t != other and t in other for other in found)]


def has_fact_tokens(text: str) -> bool:
    """True if ``text`` names something specific: an id, a path, a URL or a number with a unit / of 2+ digits."""
    if _URL.search(text) or _EMAIL.search(text) or find_paths(text):
        return True
    if _NUMBER_WITH_UNIT.search(text):
        return True
    if any(len(m.group(0).replace(".", "").replace(",", "")) >= 2 for m in _NUMBER.finditer(text)):
        return True
    return any(pattern.search(text) for pattern in _TOKEN_PATTERNS[:10])


def content_words(text: str) -> list[str]:
    """Words that carry meaning (no stopwords); CJK runs contribute their character bigrams."""
    lowered = text.casefold()
    words: list[str] = []
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            words.append(run)
        words.extend(run[i : i + 2] for i in range(len(run) - 1))
    for word in _WORD.findall(_CJK.sub(" ", lowered)):
        if len(word) >= 3 and word not in _STOPWORDS:
            words.append(word)
    return words


# ---------------------------------------------------------------------------
# sentence classification
# ---------------------------------------------------------------------------

_DAYS: Final = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|today|eod|eow|noon|midnight|end of|next week|the end"
_CORRECTION: Final = re.compile(
    r"^(?:actually\b|no[,!.]|nope\b|wait[,!]|correction\b|not quite\b|wrong\b)"
    r"|\b(?:that's wrong|that is wrong|that's not right|that is not right|that's incorrect|i said|i meant|"
    r"should be|should have been|not what i (?:asked|meant|wanted))\b"
    r"|^(?:不对|不是|其实|实际上|更正|错了|纠正)|应该是|我是说|我的意思是",
    re.IGNORECASE,
)
_PREFERENCE: Final = re.compile(
    r"\b(?:i prefer|i'd prefer|i would prefer|prefer(?:s|red)? \S+ (?:over|to)|i like|i'd like|i would like|i want|"
    r"i'd rather|i would rather|please (?:use|don't|do not|always|never|keep|avoid|stick|make sure|prefer)|"
    r"my preference|use \S+ instead|stick (?:to|with)|from now on)\b"
    r"|我喜欢|我更喜欢|偏好|喜欢用|请用|请使用|请不要|请始终|我想要|我希望|以后都",
    re.IGNORECASE,
)
_CONSTRAINT_STRONG: Final = re.compile(
    rf"\b(?:must|mustn't|must not|never|always|required|requirement|mandatory|deadline|due (?:by|on)|"
    rf"no later than|at most|at least|no more than|not allowed|forbidden|"
    rf"by (?:{_DAYS}|\d{{1,2}}(?::\d\d)?\s?(?:am|pm)?\b|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*))\b"
    r"|必须|务必|一定要|不得|禁止|不能|不要|永远不要|总是|截止|之前完成|前完成|最多|至少|只能|不允许",
    re.IGNORECASE,
)
_CONSTRAINT_USER: Final = re.compile(
    r"\b(?:don't|do not|cannot|can't|shouldn't|should not|only|limit(?:ed)?|maximum|minimum|max|min|"
    r"budget|without)\b|\b(?:under|below|above|over|within|less than|more than|fewer than) \$?\d"
    r"|\bkeep\b.*\b(?:under|below|above|within)\b|^no\s+\w+|\bno (?:breaking|new|external|more|network|internet|"
    r"dependenc\w*|deps|changes|tests?|api|downtime|sudo|root|docker|mocks?)\b",
    re.IGNORECASE,
)
_DECISION: Final = re.compile(
    r"\b(?:decided|decide to|decision|we chose|i chose|chose|choose|chosen|we'll use|we will use|i'll use|"
    r"i will use|let's use|let's go with|going with|go with|opted|opt for|switch(?:ed|ing)? to|settled on|"
    r"picked|instead of|rather than|in favou?r of|we'll go with|will use \S+ (?:because|since|as))\b"
    r"|决定|选择了|选用|采用|改用|而不是|代替|换成",
    re.IGNORECASE,
)
_REASON: Final = re.compile(r"\b(?:because|since|as|due to|so that|given that|given)\b|因为|由于|为了", re.IGNORECASE)
_FAILED: Final = re.compile(
    r"\b(?:tried|attempted|trying)\b.*\b(?:but|didn't|did not|failed|doesn't|does not|no luck|broke|breaks|still)\b"
    r"|\b(?:didn't|did not|doesn't|does not|won't|will not) work\b|\bdead end\b|\bgave up on\b|\babandon(?:ed|ing)?\b"
    r"|\breverted\b|\brolled back\b|\bbreaks the build\b|\bbroke the\b|\bfailed because\b|\bnot work(?:ing)?\b"
    r"|\bmade it worse\b|\bno effect\b|\bwithout success\b"
    r"|(?:尝试|试了|试过).*(?:失败|不行|没用|无效)|行不通|放弃|回滚|没有效果",
    re.IGNORECASE,
)
_RESOLUTION: Final = re.compile(
    r"\b(?:fixed|fixes|fix was|resolved|solved|the fix|works now|working now|now works|now passes|passes now|"
    r"passing now|all tests pass|tests pass|was caused by|root cause|worked around|workaround)\b"
    r"|修复|解决|已修好|原因是|根本原因",
    re.IGNORECASE,
)
_ERROR: Final = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fails|failing|crash(?:ed|es)?|panic|fatal|"
    r"segfault|denied|refused|timed out|timeout|not found|no such file|cannot|can't find|unable to)\b"
    r"|\b\w+(?:Error|Exception)\b|错误|报错|异常|失败|崩溃",
    re.IGNORECASE,
)
_PLAN: Final = re.compile(
    r"\b(?:next|i'll|i will|we'll|we will|plan|todo|to do|going to|then i|after that|remaining|still need|"
    r"next step|let me)\b|下一步|接下来|计划|然后|待办",
    re.IGNORECASE,
)
_GREETING: Final = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|thank you|thx|great|ok|okay|cool|sure|got it|sounds good|perfect|nice|"
    r"awesome|yes|yep|alright|good|you're welcome|no problem|continue|go on|go ahead|keep going|proceed|"
    r"lgtm|looks good|yes please|do it|carry on|next|好的|谢谢|你好|嗯|收到|好|继续)"
    r"(?:\s+(?:there|so much|a lot|again|you|everyone|to me|please))?[\s!.,\u3002\uff01\uff0c~]*)+$",
    re.IGNORECASE,
)


# Lead-ins that hide a sentence's real start ("Also: No, use ...").
_FILLER: Final = re.compile(
    r"^(?:(?:also|and|oh|btw|by the way|one more thing|ps|p\.s\.|note|fyi|ok(?:ay)?|so|well|hmm+|"
    r"user|plan|另外|还有|对了|顺便说一下)\s*[:,.!\-\uff1a\uff0c]?\s+)+",
    re.IGNORECASE,
)
_LABEL: Final = re.compile(
    r"^\s*(decision|decided|constraint|deadline|requirement|preference|correction|failed approach|"
    r"dead end|error|fix|resolution|resolved|root cause)\s*:\s*\S",
    re.IGNORECASE,
)
_LABELS: Final[dict[str, SentenceKind]] = {
    "decision": "decision",
    "decided": "decision",
    "constraint": "constraint",
    "deadline": "constraint",
    "requirement": "constraint",
    "preference": "preference",
    "correction": "correction",
    "failed approach": "failed",
    "dead end": "failed",
    "error": "error",
    "fix": "resolution",
    "resolution": "resolution",
    "resolved": "resolution",
    "root cause": "resolution",
}


def classify_sentence(sentence: str, *, speaker: Speaker = "any") -> SentenceKind:
    """Classify one sentence by what it carries.

    ``speaker`` narrows the rules: a user's "don't ..." is a constraint, an
    assistant's "let me ..." is a plan. ``"any"`` (summary lines, whose
    speaker is lost) applies the user rules.
    """
    text = _FILLER.sub("", sentence.strip())
    if len(text) < 2 or _GREETING.match(text):
        return "greeting"
    label = _LABEL.match(text)
    if label is not None:
        return _LABELS[label.group(1).casefold()]
    user_like = speaker != "assistant"
    if user_like:
        if _CORRECTION.search(text):
            return "correction"
        if _PREFERENCE.search(text):
            return "preference"
        if _CONSTRAINT_STRONG.search(text) or _CONSTRAINT_USER.search(text):
            return "constraint"
    if _FAILED.search(text):
        return "failed"
    if _DECISION.search(text):
        return "decision"
    if _RESOLUTION.search(text):
        return "resolution"
    if _ERROR.search(text):
        return "error"
    if not user_like and _CONSTRAINT_STRONG.search(text):
        return "constraint"
    if has_fact_tokens(text):
        return "fact"
    if not user_like and _PLAN.search(text):
        return "plan"
    return "other"


def split_reason(sentence: str) -> tuple[str, str]:
    """Split a decision sentence into ``(what, why)`` at its first reason marker ("because", "因为" ...)."""
    match = _REASON.search(sentence)
    if match is None or match.start() == 0:
        return sentence.strip(), ""
    what = sentence[: match.start()].rstrip(" ,;:-—")
    why = sentence[match.start() :].strip()
    return what, why


def is_plan(sentence: str) -> bool:
    """True for sentences announcing what comes next ("next I'll ...", "接下来 ...")."""
    return _PLAN.search(sentence) is not None


_STRONG_ERROR: Final = re.compile(
    r"^\s*(?:(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)(?::\s|:?$)"
    r"|(?i:error|fatal|panic)(?::|\[)|FAILED\b|FAIL:|E {2,}\S|npm ERR!|ERROR\b|\[(?i:error)\]"
    r"|Segmentation fault|Killed$|.*: command not found$|.*: No such file or directory$)"
)
_TOOL_ERROR: Final = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|crash(?:ed)?|panic|fatal|segfault|"
    r"permission denied|connection refused|timed out|not found|no such file|unable to)\b"
    r"|\b\w+(?:Error|Exception)\b|错误|报错|异常|失败|崩溃",
    re.IGNORECASE,
)
_CODE_LINE: Final = re.compile(
    r"^\s*(?:def|class|import|from|return|raise|except|try|if|elif|else|for|while|with|assert|async|await|"
    r"#|//|/\*|\*|function|const|let|var|public|private|catch|throw)\b|^\s*[\w.\[\]'\"]+\s*[:+\-*/]?=\s"
)


def is_strong_error_line(line: str) -> bool:
    """True for a line shaped like an error report: ``ValueError: ...``, ``error: ...``, ``FAILED``, ``npm ERR!``."""
    return _STRONG_ERROR.match(line) is not None


def looks_like_error_line(line: str) -> bool:
    """True for a line of tool output that reports or mentions an error (code lines excluded)."""
    if _STRONG_ERROR.match(line):
        return True
    return _TOOL_ERROR.search(line) is not None and _CODE_LINE.match(line) is None


# ---------------------------------------------------------------------------
# must-keep items
# ---------------------------------------------------------------------------

_MUST_KEEP_HEADER: Final = "Must keep:"


def _tool_arg_paths(event: SessionEvent) -> list[str]:
    if not event.tool_args:
        return []
    try:
        args = json.loads(event.tool_args)
    except ValueError:
        return find_paths(event.tool_args)
    paths: list[str] = []
    if isinstance(args, dict):
        for key, value in args.items():
            if isinstance(value, str) and ("path" in key.casefold() or "file" in key.casefold()):
                paths.append(value.strip())
            elif isinstance(value, str):
                paths.extend(find_paths(value))
    return [p for p in paths if p]


def extract_must_keep(events: Sequence[SessionEvent], *, max_items: int) -> list[str]:
    """Items a summary of ``events`` must not lose, most important first, at most ``max_items``.

    In order: the user's constraints, preferences and corrections (as their
    sentences); decisions (user or assistant); sentences naming ids, numbers
    with units or URLs; then file paths from messages and tool-call arguments.
    Raw tool output is never a source: it is the noise compaction exists to
    drop. Deterministic: the same events always give the same list.
    """
    if max_items <= 0:
        return []
    user_items: list[str] = []
    decisions: list[str] = []
    facts: list[str] = []
    paths: list[str] = []
    for event in events:
        if event.type == "tool_call":
            paths.extend(_tool_arg_paths(event))
            continue
        if event.type not in ("user_input", "assistant_output", "role_output"):
            continue
        speaker: Speaker = "user" if event.type == "user_input" else "assistant"
        for sentence in split_sentences(event.content):
            kind = classify_sentence(sentence, speaker=speaker)
            item = clip(sentence)
            if kind in ("correction", "preference", "constraint") and speaker == "user":
                user_items.append(item)
            elif kind == "decision":
                decisions.append(item)
            elif kind != "greeting" and has_fact_tokens(sentence) and _has_non_path_fact(sentence):
                facts.append(item)
        paths.extend(find_paths(event.content))
    return _dedupe([*user_items, *decisions, *facts, *paths])[:max_items]


def _has_non_path_fact(sentence: str) -> bool:
    """True if the sentence names something beyond file paths (paths are kept on their own)."""
    scrubbed = sentence
    for path in find_paths(sentence):
        scrubbed = scrubbed.replace(path, " ")
    return has_fact_tokens(scrubbed)


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = normalize(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


class Haystack:
    """A summary prepared for repeated :meth:`contains` checks (normalized once)."""

    __slots__ = ("_text", "_words")

    def __init__(self, summary_text: str) -> None:
        self._text = normalize(summary_text)
        self._words: frozenset[str] | None = None

    def contains(self, item: str) -> bool:
        """Whether the key content of ``item`` is in the summary.

        Present when the normalized item occurs verbatim, or when every
        distinctive token (path, id, number) occurs and most content words do
        (a faithful paraphrase: half of them). A sentence with no distinctive tokens
        needs 80 % of its content words.
        """
        norm = normalize(item)
        if not norm or norm in self._text:
            return True
        keys = key_tokens(item)
        if any(key not in self._text for key in keys):
            return False
        words = content_words(item)
        if not words:
            return bool(keys)
        if self._words is None:
            self._words = frozenset(content_words(self._text))
        covered = sum(1 for word in words if word in self._words)
        return covered / len(words) >= (0.5 if keys else 0.8)


def apply_must_keep(
    summary_text: str,
    items: Sequence[str],
    *,
    max_items: int,
    max_chars: int = 2000,
) -> str:
    """Append the ``items`` missing from ``summary_text`` under a bounded ``Must keep:`` section.

    An item is missing when :meth:`Haystack.contains` says its key content is absent
    (case- and whitespace-insensitive). At most ``max_items`` items are
    appended and the section stays within ``max_chars`` characters (items are
    clipped, later ones dropped). If nothing is missing, ``summary_text`` is
    returned unchanged.
    """
    if max_items <= 0 or max_chars <= 0 or not items:
        return summary_text
    haystack = Haystack(summary_text)
    missing: list[str] = []
    for item in _dedupe(items):
        if not haystack.contains(item):
            missing.append(clip(item))
    if not missing:
        return summary_text
    prefix = "\n\n" if summary_text.strip() else ""
    section = _MUST_KEEP_HEADER
    budget = max_chars - len(prefix) - len(section)
    added = 0
    for item in missing:
        if added >= max_items:
            break
        line = f"\n- {item}"
        if len(line) > budget:
            # Clip rather than skip, so the first missing facts always make it in.
            room = budget - 3
            if room < 16:
                break
            line = f"\n- {clip(item, room)}"
        section += line
        budget -= len(line)
        added += 1
    if added == 0:
        return summary_text
    return summary_text.rstrip() + prefix + section
