"""Classification: what one sentence carries (constraint, decision, error ...), phatic talk, error lines.

Plain regular-expression rules, English and Chinese; pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

from aiden.policy.summary_md import step_match
from aiden.policy.toolresult import OS_REFUSAL
from aiden.summarizers.mustkeep.text import content_words, has_fact_tokens

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
    "question",
    "request",
    "greeting",
    "other",
]
"""What one sentence carries, most load-bearing kinds first."""

Speaker = Literal["user", "assistant", "any"]

# Kinds a sentence keeps however few words it has ("No, that's wrong.", "Tried X; no luck.").
ALWAYS_KEPT: Final = frozenset({"correction", "decision", "failed", "resolution", "error"})


_DAYS: Final = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|today|eod|eow|noon|midnight|end of|next week|the end"
# A correction that says it corrects ("Actually, ...", "No, I meant ...").
_SAYS_CORRECTION: Final = (
    r"^(?:actually\b|no(?=[,!.])|no,? wait\b|nope\b|wait[,!]|correction\b|not quite\b|wrong\b)"
    r"|\b(?:that's wrong|that is wrong|that's not right|that is not right|that's incorrect|i meant|"
    r"not what i (?:asked|meant|wanted))\b"
    r"|^(?:不对|不是|其实|实际上|更正|错了|纠正)|我是说|我的意思是"
)
_CORRECTS: Final = re.compile(_SAYS_CORRECTION, re.IGNORECASE)
# What says it corrects before the agent has acted, with its punctuation: a task statement may open with
# "Wrong result of ...", "Not quite sure ...", "Correction of the offset ..." or "Actually the docs build
# fails ..."; an "Actually" without a comma corrects when a redirect follows ("Actually the port is 11311").
_ANNOUNCES_CORRECTION: Final = re.compile(
    r"^(?:no(?=[,!.])|no,? wait\b|nope[,!.]|actually(?:,|\s+(?=(?:use|it's|it is|the \w+ is)\b|.*\binstead\b))|wait[,!]|correction:|wrong[,!.]|not quite[,!.])"
    r"|\b(?:that's wrong|that is wrong|that's not right|that is not right|that's incorrect|i meant|"
    r"not what i (?:asked|meant|wanted))\b"
    r"|^(?:不对|更正|错了|纠正)|我是说|我的意思是",
    re.IGNORECASE,
)
_CORRECTION: Final = re.compile(
    rf"{_SAYS_CORRECTION}|\b(?:i said|should be|should have been)\b|应该是", re.IGNORECASE
)
# "No, ..." or "Actually, ..." that goes on to deny something of the speaker answers a question
# ("Nope, never been on a team", "No, I haven't tried it yet"); it corrects nothing ...
_DENIAL: Final = re.compile(
    r"^(?:actually|no|nope)[,.!]?\s*(?=(?:i|we)(?:'ve|'m|'d)?\s+(?:\w+\s+)?"
    r"(?:never|not|haven't|hasn't|hadn't|didn't|don't|wasn't|weren't)\b"
    r"|never (?:been|had|done|tried|seen|heard|gone|met)\b|not (?:yet|really|at all)\b|but\b)",
    re.IGNORECASE,
)
# ... unless an agent's user goes on to redirect: an imperative, "instead", "I meant", what it is instead
# ("No, I didn't mean port 8080, use 11311", "No, I'm not on macOS, I'm on Linux"), or denies having
# asked for what the agent did ("No, I never asked you to delete the tests"). "No, I haven't, just been
# busy", "No, I haven't seen it, it's new" and "No, I don't mind, go ahead" are still answers.
_REDIRECT: Final = re.compile(
    r"[,;:]\s*(?:(?:just|please|then|first|and|but)\s+)?(?!go ahead|use whatever|do whatever|do what)(?:use|fix|restore|keep|put|switch|revert|undo|try|do|don't|make|"
    r"stop|leave|add|remove|delete|run|go|deploy|change|set|rename|move|roll|point|write|install|pin|update)\b"
    r"|\b(?:instead|rather|i meant|i said|i'm on|i am on|we're on|we are on"
    r"|(?:didn't|did not|never) (?:mean|ask|asked|want|wanted|say|said|tell|told))\b",
    re.IGNORECASE,
)


def says_correction(sentence: str) -> bool:
    """True when ``sentence`` says it corrects what was said or done before ("No, use 11311", "Actually,
    ...", "No wait, ...", "Correction: ...", "I meant ..."); a "No, ..." that answers a question is none,
    and so is a statement that opens with "Wrong result of ..." or "Not quite sure ..."."""
    return _says_correction(_FILLER.sub("", sentence.strip()), _ANNOUNCES_CORRECTION, named=False)


def _says_correction(text: str, pattern: re.Pattern[str], *, named: bool) -> bool:
    """True when ``pattern`` finds a correction in ``text``, a "No, ..." that answers a question aside."""
    denial = _DENIAL.match(text)
    if denial is not None and (named or _REDIRECT.search(text, denial.end()) is None):
        text = text[denial.end() :]  # the answer's own words may still correct ("..., I said Memcached")
    return pattern.search(text) is not None


_PREFERENCE: Final = re.compile(
    r"\b(?:i prefer|i'd prefer|i would prefer|prefer(?:s|red)? \S+ (?:over|to)|i like|i'd like|i would like|i want|"
    r"i'd rather|i would rather|please (?:use|don't|do not|always|never|keep|avoid|stick|make sure|prefer)|"
    r"my preference|use \S+ instead|stick (?:to|with)|from now on)\b"
    r"|我喜欢|我更喜欢|偏好|喜欢用|请用|请使用|请不要|请始终|我想要|我希望|以后都",
    re.IGNORECASE,
)
# "Must" that guesses or feels binds nobody ("it must have been fun", "must be tough", "a must-visit");
# it binds when it asks for something ("must be booked by Friday", "must use Postgres").
_GUESSED: Final = (
    r"great|awesome|amazing|wonderful|fantastic|incredible|cool|nice|fun|lovely|beautiful|exciting|excited|"
    r"thrilled|stoked|proud|happy|glad|tough|hard|rough|difficult|scary|frustrating|exhausting|tiring|"
    r"rewarding|satisfying|fulfilling|special|meaningful|powerful|hilarious|relaxing|peaceful|interesting|"
    r"fascinating|inspiring|magical|surreal|unreal|awful|terrible|heartbreaking|overwhelming|nerve-wracking"
)
_MUST: Final = (
    r"(?<!\ba )must(?![-'])(?! (?:have|feel|love|mean|seem|look|sound|bring|make|really|surely|still)\b)"
    rf"(?! be (?:so|such|really|very|pretty|super|quite|truly|incredibly|absolutely|a|an|\w+ing|{_GUESSED})\b)"
)
# What binds whoever says it ("must be booked by Friday").
_BINDS: Final = (
    rf"{_MUST}|mustn't|must not|required|requirement|mandatory|deadline|due (?:by|on)|"
    r"no later than|not allowed|forbidden|"
    rf"by (?:{_DAYS}|\d{{1,2}}(?::\d\d)?\s?(?:am|pm)?\b|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*)"
)
_BINDING: Final = re.compile(rf"\b(?:{_BINDS})\b", re.IGNORECASE)
# A bound on a quantity: an agent's user saying "retry at most 3 times" sets a limit; a chat participant
# says how much or how often ("at least once a week", "at least one self-care activity each day").
_BOUND: Final = r"(?:at most|at least|no more than)(?= (?:\d|one|two|three|four|five|ten|once|twice|a|an)\b)"
# A strong constraint also says "never" or "always", which a chat participant's musing uses as often as a
# rule; before a past tense or participle either tells what someone did ("never been on a team", "I never
# installed it"). Said as an imperative (opening the sentence, after please/to/should/must) it is a rule
# before a bare verb that ends in "ed" too ("Never exceed ...", "Always seed ..."), so there the
# participles are listed.
_DID: Final = (
    r"been|had|done|seen|heard|gone|met|known|got|gotten|used|wanted|liked|loved|enjoyed|tried|thought|felt|"
    r"found|made|taken|played|visited|owned|dreamed|dreamt|wished|hoped|believed|admired|cared|worked|lived"
)
# (bare verbs that end in "ed": "You always need to ...", "Requests can never exceed 100 ...")
_BARE_ED: Final = r"(?!(?:need|exceed|proceed|succeed|embed|seed|feed|speed|heed|breed|bleed|shed|shred|weed|plead)\b)"
_CONSTRAINT_STRONG: Final = re.compile(
    rf"\b(?:{_BINDS}|{_BOUND}|(?:never|always)(?! (?:{_DID}|{_BARE_ED}\w+ed)\b))\b"
    rf"|(?:^|\b(?:please|to|should|must) )(?:never|always)(?! (?:{_DID})\b)\b"
    r"|必须|务必|一定要|不得|禁止|不能|不要|永远不要|总是|截止|之前完成|前完成|最多|至少|只能|不允许",
    re.IGNORECASE,
)
_CONSTRAINT_USER: Final = re.compile(
    # "Can't wait to see it!" is anticipation, not a limit.
    r"\b(?:don't|do not|(?:cannot|can't|can not)(?! wait\b)|shouldn't|should not|only|limit(?:ed)?|maximum|minimum|max|min|"
    r"budget|without)\b|\b(?:under|below|above|over|within|less than|more than|fewer than) \$?\d"
    r"|\bkeep\b.*\b(?:under|below|above|within)\b|^no\s+(?!worries\b|problem\b|prob\b)\w+|\bno (?:breaking|new|external|more|network|internet|"
    r"dependenc\w*|deps|changes|tests?|api|downtime|sudo|root|docker|mocks?)\b",
    re.IGNORECASE,
)
# ("Keep going with it!" and "keep going with step 12" continue, and decide nothing; "keep going with
# Postgres", "... with this design", "... with our schema" stay on a choice.)
_DECISION: Final = re.compile(
    r"\b(?:decided|decide to|decision|we chose|i chose|chose|choose|chosen|we'll use|we will use|i'll use|"
    r"i will use|let's use|let's go with|(?<!keep )going with|"
    r"(?<=keep )going with(?! (?:it\b(?![ \t]+[a-z])|steps? \d+\b))|go with|opted|opt for|switch(?:ed|ing)? to|settled on|"
    r"picked|instead of|rather than|in favou?r of|we'll go with|will use \S+ (?:because|since|as))\b"
    r"|决定|选择了|选用|采用|改用|而不是|代替|换成",
    re.IGNORECASE,
)
_REASON: Final = re.compile(
    r"\b(?:because|since|as|due to|so that|given that|given)\b|因为|由于|为了", re.IGNORECASE
)
# "Broke" reports a failure ("it broke my build"), except in "broke up", "broke even" and "I'm broke";
# "breaks" one after "it" or "this", or with an object ("breaks my build", "breaks on Windows"), not in
# "take breaks", "during my breaks" or "five minute breaks for the team".
_BROKE: Final = (
    r"(?<!'m )(?<!\bam )(?<!\bwas )(?<!\bwere )(?<!'re )broke\b(?! (?:up|even)\b)"
    r"|(?:(?<=\bit )|(?<=\bthis )|(?<=\bthat )|(?<=\beverything ))breaks\b"
    r"|(?<!\btake )(?<!\btakes )(?<!\btook )(?<!\btaking )(?<!\bshort )(?<!\blunch )(?<!\bcoffee )"
    r"(?<!\bmy )(?<!\bour )(?<!\byour )(?<!\btheir )(?<!\bmore )breaks"
    r"(?= (?:the|it|my|our|your|their|this|that|everything|something|anything|down|again|on|when|under)\b)"
)
# A chat participant's attempt is a failed one when the sentence says it failed; their "but" alone says
# nothing ("I'm trying to stay positive, but it's tough"), an agent user's does ("tried clearing the
# cache but the build is still red").
_NO_GOOD: Final = (
    r"(?:didn't|did not|doesn't|does not|won't|will not|wouldn't|would not|couldn't|could not)\s+(?:\w+\s+)?"
    r"(?:work|help|fix|change|solve|resolve|pass|compile|build|run|install|load|start|succeed)"
    rf"|failed|fails|failing|no luck|{_BROKE}|error|errors|exception|same (?:error|result|problem)|"
    r"still (?:fails|failing|broken|crash\w*|hangs|the same)|no (?:effect|change|difference)|nothing changed"
)
# (an attempt not yet made: "haven't tried", "never tried")
_ATTEMPT: Final = r"(?<!n't )(?<!not )(?<!never )\b(?:tried|attempted|trying)\b.*\b"
_TRIED: Final = re.compile(
    rf"{_ATTEMPT}(?:but|didn't|did not|failed|doesn't|does not|no luck|{_BROKE}|still)\b", re.IGNORECASE
)
_TRIED_NAMED: Final = re.compile(rf"{_ATTEMPT}(?:{_NO_GOOD})\b", re.IGNORECASE)
# A failure stated without the attempt ("the flag didn't work", "reverted it", "that will not work").
_STATED_FAILURE: Final = re.compile(
    r"\b(?:didn't|did not|doesn't|does not|won't|will not) work\b|\b(?:an? |the )?dead end\b|\bgave up on\b|\babandon(?:ed|ing)?\b"
    r"|\breverted\b|\brolled back\b|\bbreaks the build\b|\bbroke the\b|\bfailed because\b|\bnot work(?:ing)?\b"
    r"|\bmade it worse\b|\bno effect\b|\bwithout success\b"
    r"|(?:尝试|试了|试过).*(?:失败|不行|没用|无效)|行不通|放弃|回滚|没有效果",
    re.IGNORECASE,
)
# A conditional, a habit or a guess states a rule or a hypothesis ("If it doesn't work, try another
# command", "this will usually not work"), no failed attempt; so does a generic subject ("a command that
# did not work once will not work again").
_UNASSERTED: Final = re.compile(
    r"\b(?:if|unless|in case|whether|otherwise|usually|often|sometimes|generally|typically|might)\b"
    r"|如果|假如|要是|万一|除非|通常|可能",
    re.IGNORECASE,
)
_GENERIC: Final = re.compile(r"^(?:a|an|any|every|each)\s+(?:[\w-]+\s+){1,3}?(?:that|which|who)\b", re.IGNORECASE)
# A failure word that only describes a thing: in a relative clause ("code that doesn't work in CI", "projects
# that got abandoned") but for a cleft ("the one thing that still doesn't work is the export"), or an adjective
# after a determiner ("the reverted commit"; "a dead end" is matched with its article). Before a verb the
# determiner's word is the subject ("This doesn't work; it might be the cache").
_RELATIVE: Final = re.compile(r"\w\s+(?:that|which|who)(?:\s+\w+)?\s+$", re.IGNORECASE)
_CLEFT: Final = re.compile(r"(?:\s+\w+)?\s+(?:is|was)\b", re.IGNORECASE)
_DETERMINER: Final = re.compile(r"\b(?:the|a|an|this|these|those|my|our|your|their|its)\s+$", re.IGNORECASE)
_ADJECTIVE: Final = re.compile(r"reverted|abandoned|rolled back|dead end", re.IGNORECASE)


def _describes(clause: str, failure: re.Match[str]) -> bool:
    """True when the failure word ``failure`` found in ``clause`` describes a thing, not a failure."""
    before = clause[: failure.start()]
    if _RELATIVE.search(before):
        return _CLEFT.match(clause, failure.end()) is None
    return _DETERMINER.search(before) is not None and _ADJECTIVE.fullmatch(failure[0]) is not None


_CLAUSE_END: Final = re.compile(r"[,;:\u2014\uff0c\uff1b]")


def _reports_failure(text: str, *, named: bool) -> bool:
    """True for a sentence reporting a failed attempt. A hedge or condition cancels what follows it in its
    clause: "I tried X but it fails if Y" and "X didn't work; it might be Z" report one, "If X doesn't
    work, ..." and "X will usually not work" none."""
    unasserted = _UNASSERTED.search(text)
    main = text if unasserted is None else text[: unasserted.start()]
    if (_TRIED_NAMED if named else _TRIED).search(main):
        return True
    if not main.strip() or _GENERIC.match(text):
        return False  # the sentence opens with its condition, or speaks of any such thing
    if unasserted is None:
        return _STATED_FAILURE.search(text) is not None
    # Each clause up to its own hedge ("X didn't work; it might be Z", "reverted it because it often crashed"),
    # where the failure is said, not a thing described ("code that doesn't work in CI usually ...").
    return any(
        not _describes(head, failure)
        for clause in _CLAUSE_END.split(text)
        for head in [_UNASSERTED.split(clause, 1)[0]]
        for failure in _STATED_FAILURE.finditer(head)
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


# A question asks; it decides, constrains or reports nothing.
_QUESTION: Final = re.compile(
    r"[?\uff1f]\s*$|^(?:what|why|how|when|where|which|who|whom|whose|should (?:we|i)|shall (?:we|i)|"
    r"could (?:we|you|i)|can (?:we|you|i)|would (?:we|you|it)|do (?:we|you|i)|does|did|is (?:it|there|this|that)|"
    r"are (?:we|there|you))\b[^.!]*$|^(?:是否|为什么|怎么|如何|能否|要不要)|吗[\s]*$",
    re.IGNORECASE,
)
# A request asks for work ("Continue with ...", "Now fix the failing test"): never an error or a fact.
_REQUEST: Final = re.compile(
    r"^(?:(?:please|pls|kindly|now|then|next|ok(?:ay)?|also)[,]?\s+)*"
    r"(?:continue|resume|proceed|carry on|keep going|go on|next step|check|look|fix|investigate|debug|run|add|"
    r"make|implement|update|write|create|review|find|try|start|finish|migrate|refactor|rename|move|remove|delete|"
    r"port|convert|build|deploy|test|verify|help|can you|could you|would you)\b"
    r"|^(?:请|继续|帮我|麻烦)",
    re.IGNORECASE,
)
# The words that only ask the agent to go on.
_GO_ON: Final = r"continue|resume|proceed|carry on|keep going|go on"
# A routine continuation: the same request again with the next step number.
_ROUTINE: Final = re.compile(
    rf"^(?:(?:please|now|ok(?:ay)?)[,]?\s+)*(?:{_GO_ON}|next step)\b"
    r"|\b(?:step|turn|part|phase) \d+\b",
    re.IGNORECASE,
)


# What a routine continuation says besides its step: a continuation phrase ("(continue)", "OK, proceed to")
# and the total of steps ("of 40", "30 steps left"), which goes stale with the next step and is no fact.
_CONTINUATION: Final = re.compile(
    rf"(?:{_GO_ON}|ok(?:ay)?|now|next|please|with|to|"
    r"of \d+|/ ?\d+|\d+ steps?(?: left| remaining| to go)?|[\s,.;:!()\u2013\u2014-])*",
    re.IGNORECASE,
)
_ASKS_TO_GO_ON: Final = re.compile(rf"\b(?:{_GO_ON}|next)\b", re.IGNORECASE)


def _is_continuation(numbered: re.Match[str]) -> bool:
    """True for a user's numbered sentence that only continues ("(continue) step 12 of 40", "Step 12.",
    "(continue) turn 16"): nothing else but a continuation phrase, and the word "step" or a word that asks to go
    on (a bare "turn 16" is an age, a "part 12" a chapter)."""
    rest = numbered["head"] + " " + numbered["tail"]
    asks = numbered["word"].casefold() == "step" or _ASKS_TO_GO_ON.search(rest) is not None
    return asks and _CONTINUATION.fullmatch(rest) is not None


def is_routine_request(sentence: str) -> bool:
    """True for a routine continuation ("Continue with ..., step 12: ..."): never the session's goal."""
    return _ROUTINE.search(sentence.strip()) is not None


# Lead-ins that hide a sentence's real start ("Also: No, use ..."); "Oh no" is dismay, no "No, ...".
_FILLER: Final = re.compile(
    r"^(?:(?:also|and|oh(?! no\b)|btw|by the way|one more thing|ps|p\.s\.|note|fyi|ok(?:ay)?|so|well|hmm+|"
    r"user|plan|另外|还有|对了|顺便说一下)\s*[:,.!\-\uff1a\uff0c]?\s+)+",
    re.IGNORECASE,
)
# "Decision: ..." says its kind.
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
_LABEL: Final = re.compile(rf"^\s*({'|'.join(_LABELS)})\s*:\s*\S", re.IGNORECASE)


def classify_sentence(sentence: str, *, speaker: Speaker = "any", named: bool = False) -> SentenceKind:
    """Classify one sentence by what it carries.

    ``speaker`` narrows the rules: a user's "don't ..." is a constraint, an
    assistant's "let me ..." is a plan. ``"any"`` (summary lines, whose
    speaker is lost) applies the user rules. A ``named`` chat participant's
    attempt failed only when the sentence says so.
    """
    text = _FILLER.sub("", sentence.strip())
    if len(text) < 2 or _GREETING.match(text):
        return "greeting"
    label = _LABEL.match(text)
    if label is not None:
        return _LABELS[label.group(1).casefold()]
    if _QUESTION.search(text):
        return "question"
    user_like = speaker != "assistant"
    if user_like:
        if _says_correction(text, _CORRECTION, named=named):
            return "correction"
        if _PREFERENCE.search(text):
            return "preference"
        if _CONSTRAINT_STRONG.search(text):
            return "constraint"
        # Evidence over keywords: an imperative asks for work, whatever words it uses
        # ("fix the failing test" reports no failure), unless it states a decision.
        if _REQUEST.search(text) and not _DECISION.search(text) and not _reports_failure(text, named=named):
            return "request"
        if _CONSTRAINT_USER.search(text):
            return "constraint"
    if _reports_failure(text, named=named):
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
        # A step number is no fact: an agent loop's "(continue) step 12" asks for work, and filed as a fact every
        # later fold would re-read it as one; "(continue) step 12: the key is in /etc/app.env" states one. (A chat
        # participant's "part 2 of the book" tells of themselves.)
        numbered = step_match(text)
        routine = user_like and not named and numbered is not None and _is_continuation(numbered)
        return "request" if routine else "fact"
    if not user_like and _PLAN.search(text):
        return "plan"
    return "other"


def sets_a_rule(kind: SentenceKind, sentence: str, *, named: bool) -> bool:
    """True when a user's sentence of ``kind`` is a rule the summary must keep (a correction, a
    preference, a constraint).

    From a ``named`` chat participant ("Caroline: ...") only a correction that says
    it corrects ("Actually, ...": their "schools should be funded" is an opinion) or a
    constraint that binds as said by anyone (a must, a deadline, a prohibition).
    """
    if kind == "correction":
        return not named or _says_correction(sentence, _CORRECTS, named=True)
    if named:
        return kind == "constraint" and _BINDING.search(sentence) is not None
    return kind in ("preference", "constraint")


def split_reason(sentence: str) -> tuple[str, str]:
    """Split a decision sentence into ``(what, why)`` at its first reason marker ("because", "因为" ...)."""
    match = _REASON.search(sentence)
    if match is None or match.start() == 0:
        return sentence.strip(), ""
    return sentence[: match.start()].rstrip(" ,;:-—"), sentence[match.start() :].strip()


def is_plan(sentence: str) -> bool:
    """True for sentences announcing what comes next ("next I'll ...", "接下来 ...")."""
    return _PLAN.search(sentence) is not None


# Phatic talk. Social markers: a sentence of one informative word is phatic when it greets, thanks or
# exclaims ("Hey Mel!"), not when it asks or corrects ("Try again", "No, that's wrong").
_SOCIAL: Final = frozenset(
    {
        "hi", "yo", "ok", "hey", "hiya", "hello", "thanks", "thank", "thx", "cheers", "bye", "goodbye", "congrats",
        "congratulations", "wow", "omg", "haha", "lol", "yay", "great", "awesome", "cool", "nice", "glad",
        "sweet", "wonderful", "amazing", "fantastic", "lovely", "incredible", "brilliant", "welcome", "sorry",
        "wait", "sounds", "proud", "happy", "excited", "exciting", "hugs", "luck", "worries"
    }
)  # fmt: skip
# Words that carry no fact by themselves: the social markers, affect, agreement, filler verbs.
# A sentence made of these (plus stopwords) is phatic however long it is.
_LOW_INFORMATION: Final = _SOCIAL | frozenset(
    {
        "good", "super", "neat", "perfect", "fun", "really", "totally", "definitely", "absolutely",
        "exactly", "agree", "agreed", "sure", "yeah", "yep", "yup", "okay", "right", "true", "sound",
        "seems", "can't", "cannot", "see", "seeing", "hear", "hearing", "lot", "lots", "much", "means",
        "mean", "meant", "word", "words", "kind", "care", "take", "love", "loved", "like", "appreciate",
        "appreciated", "hope", "hoping", "thing", "things", "stuff", "tell", "telling", "know", "knowing",
        "keep", "going", "way", "feel", "feeling", "felt", "guess", "well", "pretty", "always", "got", "get",
        "gets", "gonna", "wanna", "hug", "best", "thought", "thoughts", "mind", "soon", "later", "talk",
        "chat", "catch", "time", "day", "today", "share", "sharing", "inspiring", "inspired", "happen",
        "happened", "buddy", "friend", "dear", "man", "guys", "everyone", "anyway", "though", "still",
        "even", "something", "anything", "everything", "nothing", "look", "looks", "looking", "truly", "him",
        "her", "his", "hers", "mine", "yours", "ours", "theirs", "myself", "yourself", "ourselves",
        "someone", "anyone", "one", "worry", "stay", "safe", "strong", "enjoy", "easy"
    }
)  # fmt: skip
_NUMBER: Final = re.compile(r"\d")
_WORDS: Final = re.compile(r"[^\W\d_]+")
_SPEAKER: Final = re.compile(r"^(?P<who>[A-Z][\w'.-]{0,24}(?: [A-Z][\w'.-]{0,24})?):\s+(?=\S)")
# Labels that open a line of content, not a speaker's turn.
_NOT_SPEAKERS: Final = frozenset(
    {
        "user", "assistant", "system", "tool", "goal", "outcome", "decision", "decided", "constraint",
        "deadline", "requirement", "preference", "correction", "error", "errors", "fix", "resolution",
        "resolved", "note", "notes", "remember", "plan", "step", "question", "answer", "result", "results", "summary",
        "update", "warning", "info", "debug", "todo", "files", "file", "commands", "command", "facts", "fact",
        "requests", "open", "thread", "context", "output", "input", "failed", "traceback", "test", "tests",
        "session", "status", "issue", "reason", "cause", "example", "next", "then", "now", "continue"
    }
)  # fmt: skip


def split_speaker(text: str) -> tuple[str, str]:
    """``("Name", rest)`` for a turn written as ``"Name: ..."`` (a multi-party chat), else ``("", text)``."""
    match = _SPEAKER.match(text)
    if match is None or match.group("who").casefold() in _NOT_SPEAKERS:
        return "", text
    return match.group("who"), text[match.end() :]


def informative_words(sentence: str) -> list[str]:
    """The sentence's content words that can carry a fact (no greetings, thanks, affect or filler)."""
    return [w for w in content_words(sentence) if w not in _LOW_INFORMATION]


def is_phatic(sentence: str) -> bool:
    """True for a sentence that carries no fact: no informative word, or one among greetings or
    thanks. A number or an id is a fact ("Melanie: 5 years already!" is not phatic)."""
    _who, body = split_speaker(sentence.strip())
    if _NUMBER.search(body) and has_fact_tokens(body):
        return False
    informative = set(informative_words(body))
    return not informative or (len(informative) == 1 and not _SOCIAL.isdisjoint(_WORDS.findall(body.casefold())))


# Error lines of tool output: which lines report or mention an error.
_STRONG_ERROR: Final = re.compile(
    r"^\s*(?:(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)(?::\s|:?$)"
    r"|(?i:error|fatal|panic)(?::|\[)|FAILED\b|FAIL:|E {2,}\S|npm ERR!|ERROR\b|\[(?i:error)\]"
    r"|Segmentation fault|Killed$|.*: command not found$|.*: No such file or directory$)"
)
_TOOL_ERROR: Final = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|crash(?:ed)?|panic|fatal|segfault|"
    rf"{OS_REFUSAL}|timed out|not found|no such file|unable to)\b"
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
    return is_strong_error_line(line) or (_TOOL_ERROR.search(line) is not None and _CODE_LINE.match(line) is None)


# Lines an agent or a person pastes into a message from a file, a terminal, a log or a diff. Their words
# are the code's or the tool's ("self.only = ...", "Requirement already satisfied: ..."), not what the
# speaker asks for: a file view's "1432: Always serializes ..." sets no rule.
_PASTED: Final = re.compile(
    # a numbered source line: "1548:    self.x = y", "23:def f():", "  12\tcode", "12 | code" (not "10:30")
    r"^\s*\d{1,6}(?::(?:[^\s\d]|\s{2,}|$)|\t|\s+[|│]\s)"
    # a shell or REPL prompt, a terminal's status lines
    r"|^\s*(?:\$|>>>|bash-[\d.]*\$|[\w.-]+@[\w.-]+(?::\S*)?[$#%]|[A-Z]:\\[^>\n]*>)(?:\s|$)"
    r"|^[(\[]\s*(?:[\w ]{1,30}:\s*(?:n/a|[~./]\S*)|\d+ (?:more )?(?:lines?|rows?)\b).*[)\]]$"
    # package managers and build tools
    r"|^\s*(?:Requirement already satisfied:|Successfully (?:installed|built|uninstalled) |Installing collected packages:|"
    r"Building wheels? for |Created wheel for |Stored in directory:|Attempting uninstall:|Looking in indexes:|"
    r"Preparing (?:editable )?metadata|Getting requirements to build|Installing build dependencies|"
    r"Checking if build backend|Building (?:editable|wheel) for|Running setup\.py|"
    r"npm (?:WARN|notice|info|http)\b|added \d+ packages?|Reading package lists|Get:\d+ https?:|Hit:\d+ https?:|"
    r"go: downloading )|^\s*(?:Compiling|Downloaded|Fresh|Checking) [\w-]+ v\d[\w.+-]*(?: \(.*\))?$"
    r"|^\s*(?:Collecting|Obtaining|Downloading|Using cached|Uninstalling|Found existing installation:)\s+\S+"
    r"(?:\s+\([^)]*\))?\s*$"
    # log lines: a timestamp with seconds (loggers print them), one without seconds followed by a level or a
    # logger's name, or a level first (a person's "WARNING: never ..." or "2025-03-14 17:00 is the deadline"
    # is no log line: a logger brackets the level or names itself)
    r"|^\s*\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d\b|(?:Z|[+-]\d\d:?\d\d)?\]?[\s|-]*"
    r"(?:\[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b|\[|[\w-]+(?:\.[\w-]+)+|[\w.-]+:\s))"
    r"|^\s*\[(?:DEBUG|INFO|WARN|WARNING|TRACE|NOTICE)\]|^(?:DEBUG|INFO|WARNING):[\w.]*:"
    # tracebacks and diffs
    r"|^\s*Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+"
    r"|^(?:diff --git |index [0-9a-f]{7,}\.\.|@@ -\d|--- [ab]/|\+\+\+ [ab]/)"
    # code by its shape: a definition, an import, a statement or a block's head or end
    r"|^[+-]?\s*(?:(?:async\s+)?def|class|fn|func|function)\s+\w+\s*[(<:{]"
    r"|^[+-]?\s*(?:import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+)*\s*;?\s*$|from\s+[\w.]+\s+import\s+[\w*(])"
    r"|^[+-]?\s*(?:return|raise|throw|yield|assert|await)\s+[\w.]+\s*\("
    r"|^[+-]?\s*(?:else|try|finally|do)\s*[:{]\s*$|^[+-]?\s*@\w+(?:\.\w+)*(?:\(|\s*$)"
    r"|^[+-]?\s*[)}\]]|\{\s*$|^[+-]?\s*(?://|/\*|\*/|#include\b|#define\b|#!)"
)
# An assignment ("limit = only_rows(max_rows)", "n = 3 if prod else 5") is code when its value is code all the
# way through; the speaker's "PORT=11311 always, never 8080." goes on in words.
_ASSIGNMENT: Final = re.compile(
    r"^[+-]?\s*(?:(?:const|let|var|val|auto|final)\s+)?[A-Za-z_$][\w.$]*(?:\[[^\]]*\])*\s*"
    r"(?:[-+*/%&|^]|//|\*\*|<<|>>)?=(?!=)\s*(?P<value>\S+)(?P<rest>.*)$"
)
# Characters that prose does not use; a line ending in ";" is code only with one of them ("i++;",
# "return f(x);"), or as a bare statement ("break;", "return x;"), not the speaker's "Never touch X;".
# (an apostrophe inside a word is prose: "don't")
_CODE_CHARS: Final = re.compile(r"[()\[\]{}=<>\"+*&|\\$`@#]|(?<!\w)'|'(?!\w)|\s/\s|->|::")
_STATEMENT: Final = re.compile(r"^\s*\w+(?:\s+\w+)?\s*;\s*$")
# A value's words joined by operators are code too ("3 if prod else 5", "y and z", "not disabled"); a prose
# comparative, a sentence's full stop or an "if" without "else" is the speaker's ("retries = 3 or more",
# "timeout = 30 if possible.").
_OPERAND: Final = r"(?:not\s+)?(?!(?:more|less|fewer|newer|older|higher|lower|later|earlier|possible|needed)\b)[\w.]*\w"
_EXPRESSION: Final = re.compile(rf"{_OPERAND}(?:\s+(?:and|or)\s+{_OPERAND}|\s+if\s+{_OPERAND}\s+else\s+{_OPERAND})*\s*")


def _is_code(line: str) -> bool:
    """True for an assignment or a ";"-ended line shaped like code all the way through."""
    assignment = _ASSIGNMENT.match(line)
    if assignment is not None:
        value, rest = assignment.group("value", "rest")
        return (
            not re.search(r"[^\W\d_]", rest)
            or _CODE_CHARS.search(value + rest) is not None
            or _EXPRESSION.fullmatch(value + rest) is not None
        )
    if line.rstrip().endswith(";"):
        return _CODE_CHARS.search(line) is not None or _STATEMENT.match(line) is not None
    return False


def is_pasted_line(line: str) -> bool:
    """True for a line pasted from code, a terminal, a log or a diff (a numbered file view's line, an
    assignment, a prompt, a pip or npm line), not written by the speaker. An error report
    (``ValueError: ...``, ``npm ERR!``) is none: it reports what failed."""
    return (_PASTED.search(line) is not None or _is_code(line)) and not is_strong_error_line(line)


def substantive(sentences: Sequence[str]) -> list[str]:
    """The sentences that say something (no greetings, thanks, bare acknowledgements or other phatic talk)."""
    return [s for s in sentences if classify_sentence(s, speaker="user") != "greeting" and not is_phatic(s)]


def written(content: str) -> str:
    """``content`` without the lines pasted into it (file views, code, terminal, log and diff lines): what its
    speaker wrote. A pasted "1548: self.x.only = self.only" is no rule of theirs, whatever its words."""
    return "\n".join(line for line in content.splitlines() if not is_pasted_line(line))
