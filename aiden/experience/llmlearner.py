"""The LLM learner: a model phrases the lessons the embedded learner decided on.

One chat completion per :class:`~aiden.experience.learner.LessonGroup`; ids, statuses and evidence
stay the embedded learner's. Any model error, timeout, open breaker or unusable answer keeps the
embedded text: counted in :meth:`LLMLearner.stats`, logged once at WARNING, never raised. litellm
is imported only on the first call.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
import msgspec

from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerTimeout
from aiden.experience.learner import LessonGroup
from aiden.experience.messages import LearnerStats
from aiden.intake import without_surrogates
from aiden.summarizers.llm.client import (
    Breaker,
    _loop_thread,
    completion_kwargs,
    first_choice,
    load_litellm,
    token_usage,
)
from aiden.summarizers.llm.repair import load_mapping

__all__ = ["LLMLearner", "Phrasing", "build_messages", "parse_phrasing"]

log = logging.getLogger("aiden.experience")

MAX_TEXT_CHARS: Final = 600
"""A phrased note longer than this is cut (a lesson is a hint, not an essay)."""
_MAX_REPLY_CHARS: Final = 8_000
_PROCEDURE_KEYS: Final = ("procedure", "what_worked", "what worked", "lesson", "fix")
_FAILURE_KEYS: Final = ("failure", "what_failed", "what failed", "avoid", "pitfall")
_LINE: Final = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?(procedure|failure|what worked|what failed)(?:\*\*)?\s*[:=-]\s*(.+)$",
    re.IGNORECASE,
)
_REFUSAL: Final = re.compile(r"^(?:i (?:cannot|can't|am unable)|sorry\b|as an ai\b|error\b)", re.IGNORECASE)

_SYSTEM: Final = (
    "You write the lessons an agent learned from one episode of tool use, for its later runs. "
    "You get the task, the step that failed with its error, and the step that worked. Answer with "
    'ONE JSON object and nothing else: {"procedure": "...", "failure": "..."}. '
    '"procedure": one or two sentences: what to do for this task, naming the working step verbatim, '
    "and why it is needed if the error shows it. "
    '"failure": one sentence: which step fails and with what error. '
    "Use only the facts given; invent no command, flag, path or version."
)


@dataclass(frozen=True, slots=True)
class Phrasing:
    """A model's wording of one group: the procedure note and the failure note ("" = keep embedded)."""

    procedure: str
    failure: str


def build_messages(group: LessonGroup) -> list[dict[str, str]]:
    """The chat messages asking for ``group``'s phrasing (only the episode's own evidence)."""
    failed = "\n".join(f"- `{step}` failed with: {error}" for step, error in group.failed)
    user = (
        f"Task: {group.goal}\n"
        f"Environment: {group.environment or '(any)'}\n"
        f"Failed:\n{failed}\n"
        f"Worked: `{group.step}` (output: {group.output})"
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _text(value: object) -> str:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value if isinstance(v, str | int | float))
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return ""
    # A lone surrogate (half an emoji, ``"\\ud83d"`` in the JSON) decodes fine but cannot be stored.
    flat: str = without_surrogates(" ".join(str(value).split()))
    return flat if len(flat) <= MAX_TEXT_CHARS else flat[: MAX_TEXT_CHARS - 4].rstrip() + " ..."


def _pick(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    folded = {str(k).strip().casefold().replace("-", "_"): v for k, v in mapping.items()}
    for key in keys:
        found = _text(folded.get(key.replace(" ", "_"), folded.get(key)))
        if found:
            return found
    return ""


def parse_phrasing(content: str) -> Phrasing:
    """Read a model's answer; :class:`InvalidSummaryError` when it holds no procedure note.

    Accepted: a JSON object (bare, fenced or inside prose), a YAML mapping, or ``procedure: ...`` /
    ``failure: ...`` lines. A missing failure note is allowed (those records keep their embedded
    text); a missing, empty or refusal-shaped procedure note is not.
    """
    if len(content) > _MAX_REPLY_CHARS:
        raise InvalidSummaryError(f"learner answer of {len(content)} characters is runaway output")
    loaded = load_mapping(content, (*_PROCEDURE_KEYS, *_FAILURE_KEYS))
    procedure = failure = ""
    if loaded is not None:
        procedure, failure = _pick(loaded, _PROCEDURE_KEYS), _pick(loaded, _FAILURE_KEYS)
    if not procedure:
        for line in content.splitlines():
            match = _LINE.match(line)
            if match is None:
                continue
            name, text = match.group(1).casefold(), _text(match.group(2).strip().strip('"'))
            if name in ("procedure", "what worked") and not procedure:
                procedure = text
            elif name in ("failure", "what failed") and not failure:
                failure = text
    if not procedure:
        raise InvalidSummaryError("learner answer has no procedure note")
    if _REFUSAL.match(procedure):
        raise InvalidSummaryError("learner answer looks like a refusal or an error message")
    return Phrasing(procedure=procedure, failure="" if _REFUSAL.match(failure) else failure)


class LLMLearner:
    """Phrases lesson groups with any litellm model, one call per group and no retries.

    After ``breaker_failures`` consecutive failed calls no call goes out for ``breaker_reset_s``:
    a model that is down costs a few timeouts, not one per group.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        extra_kwargs: Mapping[str, Any] | None = None,
        timeout_s: float = 60.0,
        breaker_failures: int = 3,
        breaker_reset_s: float = 300.0,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty litellm model name")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.extra_kwargs = dict(extra_kwargs or {})
        self.timeout_s = timeout_s
        self._breaker = Breaker(breaker_failures, breaker_reset_s)
        self._stats = LearnerStats()

    @classmethod
    def from_summarizer(cls, summarizer: object) -> LLMLearner | None:
        """The learner using the same model as ``summarizer`` if it is a
        :class:`~aiden.LiteLLMSummarizer`, else None (the embedded learner)."""
        from aiden.summarizers.llm.summarizer import LiteLLMSummarizer

        if not isinstance(summarizer, LiteLLMSummarizer):
            return None
        config = summarizer.config
        return cls(
            summarizer.model,
            api_base=summarizer.api_base,
            api_key=summarizer.api_key,
            temperature=summarizer.temperature,
            extra_kwargs=summarizer.extra_kwargs,
            timeout_s=config.summarizer_timeout_s,
            breaker_failures=config.circuit_breaker_failures,
            breaker_reset_s=config.circuit_breaker_reset_s,
        )

    def stats(self) -> LearnerStats:
        """A snapshot of the counters."""
        return self._stats

    def _count(self, **changes: Any) -> None:
        s = self._stats
        self._stats = msgspec.structs.replace(
            s, **{k: (getattr(s, k) + v if isinstance(v, int) else v) for k, v in changes.items()}
        )

    async def phrase_or_none(self, group: LessonGroup) -> Phrasing | None:
        """``group``'s phrasing, or None after any model failure (counted; the first one logged).

        Any other error (a bug) is noted in :meth:`stats` too, and raised.
        """
        self._count(groups=1)
        try:
            phrasing = await self.phrase(group)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"[:300]
            self._count(last_error=detail, **({"first_error": detail} if not self._stats.first_error else {}))
            if not isinstance(exc, SummarizerError):
                raise
            self._count(fallbacks=1, malformed=int(isinstance(exc, InvalidSummaryError)))
            if self._stats.fallbacks == 1:  # the first one
                log.warning("LLM learner failed, the embedded lesson text is kept (%s)", detail)
            else:
                log.debug("LLM learner failed again: %s", detail)
            return None
        self._count(phrased=1)
        return phrasing

    async def phrase(self, group: LessonGroup) -> Phrasing:
        """One chat completion phrasing ``group``; a :class:`SummarizerError` on any failure."""
        self._breaker.admit(anyio.current_time())
        try:
            content = await self._complete(build_messages(group))
        except InvalidSummaryError:
            self._breaker.succeeded()  # the provider answered: not an outage
            raise
        except (anyio.get_cancelled_exc_class(), SummarizerError):
            self._breaker.failed(anyio.current_time())
            raise
        except Exception:
            self._breaker.abandon()  # a bug on this side: no word on the provider, no trial kept in flight
            raise
        self._breaker.succeeded()
        return parse_phrasing(content)

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        handle = await load_litellm()
        kwargs = completion_kwargs(self, messages, max_tokens=400)
        self._count(calls=1)
        try:
            with anyio.fail_after(self.timeout_s):
                response = await _loop_thread.run(functools.partial(handle.module.acompletion, **kwargs))
        except TimeoutError as exc:
            raise SummarizerTimeout(f"learner call timed out after {self.timeout_s}s") from exc
        except SummarizerError:
            raise
        except Exception as exc:  # the provider boundary: litellm's errors become aiden's
            raise handle.translate(exc) from exc
        prompt, completion, _cached = token_usage(response)
        self._count(prompt_tokens=prompt, completion_tokens=completion)
        content, _truncated = first_choice(
            response, "learner", truncated_error="learner answer was truncated (finish_reason=length)"
        )
        return content
