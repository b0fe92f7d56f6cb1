"""Configuration: ``<config>/memory/extraction.yaml`` -> a frozen :class:`Config`.

Every key has a default, so an empty file is a valid configuration. The file is read with a
``yaml.SafeLoader`` that also refuses duplicate and ``<<`` merge keys, and converted strictly:
an unknown key, a wrong type or a value out of range raises :class:`~aiden.errors.ConfigError`
naming the file and the key.

Model context windows (:class:`ModelResolver`) come from litellm's bundled model map, read once per
process without importing litellm: the runtime asks for the window on every open, so this stays
cheap and offline.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeGuard

import msgspec

from aiden.errors import ConfigError

__all__ = ["MAX_CONTEXT_WINDOW", "SUMMARY_CHARS_PER_TOKEN", "Config", "ModelResolver", "config_from_mapping", "load_config"]

MAX_CONTEXT_WINDOW: Final = 1_000_000_000
"""The largest context window (tokens) aiden plans for."""

SUMMARY_CHARS_PER_TOKEN: Final = 8
"""Most characters a summary takes per token of its budget (real text takes 3 to 5). The extractive
summarizer keeps within it, and :meth:`Config.chunk_summary_tokens` keeps the budget at most
``summary_max_chars`` / 8: a summary made to the budget is never too long to store."""

Positive = Annotated[int, msgspec.Meta(gt=0)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]
Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]

# A config file larger than this is not a config file; refuse before parsing
# (YAML alias bombs expand in memory, size is the cheap first line of defence).
_MAX_CONFIG_BYTES = 1 << 20


class _Checked(msgspec.StructMeta):
    """Makes ``Config(...)`` refuse an unknown or positional argument with ConfigError, as
    load_config does: msgspec's ``__init__`` raises TypeError before ``__post_init__`` runs."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # Only such arguments make the TypeError a config error: one raised with valid arguments
        # comes from __post_init__ (a bug), and is not to be reported as the caller's config.
        bad_arguments = bool(args) or not kwargs.keys() <= set(cls.__struct_fields__)
        try:
            return super().__call__(*args, **kwargs)
        except TypeError as exc:
            if not bad_arguments:
                raise
            raise ConfigError(f"Config: {exc}") from None


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, metaclass=_Checked):
    """Every tunable of aiden. Build with keyword arguments, :func:`load_config` or :func:`config_from_mapping`."""

    # --- trigger and cut points (seed 000) ---------------------------------
    context_window: Annotated[int, msgspec.Meta(gt=0, le=MAX_CONTEXT_WINDOW)] = 32000
    """The context window (tokens, at most 1,000,000,000). ``open_memory`` replaces it by the active model's
    window when the model is known; every token-sized default below left unset is derived from it."""
    reserve_tokens: NonNegative | None = None
    """Headroom kept free for the next completion (default: window/8, at most 8,192); clamped to at most
    half the window. Every built prompt stays at or under ``window - reserve``."""
    compress_at_percent: Percent = 50.0
    """Compact when prompt_tokens / window reaches this percentage."""
    keep_recent_tokens: Positive | None = None
    """Token path: the hot window keeps about this many of the newest tokens (default: window/4, at most
    20,000)."""
    hot_window_events: Positive = 30
    """Count fallback: the hot window keeps about this many newest events."""
    count_compress_after_events: Positive | None = None
    """Without a provider's prompt size, compact when the hot window has more events than this. Unset
    (default): aiden's own estimate of the prompts it builds (else of the hot window) stands in for the
    provider's figure, and the count fallback (60 events) applies only when nothing can be estimated."""
    summary_max_chunks: Positive = 10
    """How many chunk summaries stay under ``## Recent Chunks`` in summary.md."""
    max_rolling_summary_lines: Positive = 100
    """Hard cap on the Rolling Summary's lines (backstop behind the rolling fold)."""

    # --- seed 001 triggers (0 = off) ---------------------------------------
    compact_every_turns: NonNegative = 0
    """Compact every N completed turns (0 disables)."""
    tool_output_spike_tokens: NonNegative = 0
    """Compact when one turn added more than this many tokens of tool output (0 disables)."""
    cost_ceiling_usd: NonNegativeFloat = 0.0
    """Compact when provider cost since the last compaction passes this (0 disables)."""
    token_profile: Literal["auto", "o200k", "cl100k"] = "auto"
    """Token estimator profile; ``auto`` picks it from the model name (cl100k when unknown)."""
    token_calibration_weight: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.2
    """EMA weight of each provider-reported prompt size in the per-model estimate correction."""
    compact_batch_turns: NonNegative = 0
    """Cache-aware batching: a soft (percent) trigger waits until this many turns passed since the
    last compaction, so one stable prompt prefix serves many calls; the hard reserve trigger never waits
    (0 disables)."""
    max_pinned_events: NonNegative = 16
    """Sticky pins are rare: at most this many pinned events per session."""
    max_pass_events: NonNegative = 1000
    """A pass compacts at most this many events (the oldest): a backlog drains over several passes,
    each with bounded summarizer work on the event loop, instead of one pass over all of it (0: no cap)."""

    # --- session writer -----------------------------------------------------
    durability: Literal["fsync", "none"] = "fsync"
    """``fsync``: an append is acknowledged after its batch is fsynced. ``none``: after write(2) only."""
    max_event_bytes: Positive = 1_000_000
    """Encoded size limit of one event; larger events are rejected before any write."""
    writer_queue_size: Positive = 4096
    """Most append requests of one memory waiting for the session writer; more make appenders wait
    (back-pressure)."""
    max_batch_events: Positive = 4096
    """Most events one group commit writes."""
    lock_timeout_s: PositiveFloat = 180.0
    """How long an operation waits for a lock before raising LockError. Another process's pass holds
    the compaction lock while its summarizer runs, so keep this above the summarizer's deadline:
    ``summarizer_timeout_s``, stretched up to 4x for a provider observed to be slow. A pass that
    times out waiting is logged and runs again at the next trigger; ``maintain()`` raises it."""
    dedupe_window: NonNegative = 65536
    """How many recent client event_ids the writer remembers beyond the hot window."""

    # --- summarizer ---------------------------------------------------------
    summarizer_timeout_s: PositiveFloat = 120.0
    """Deadline of one summarizer call. The summarizer actor stretches it for a provider observed to be
    slow, to at most 4x this value (:mod:`aiden.policy.summarizer_deadline`)."""
    summarizer_retries: NonNegative = 2
    """Retries on transient provider errors (LLM summarizer)."""
    summarizer_backoff_s: NonNegativeFloat = 1.0
    """First retry delay; doubles each retry."""
    circuit_breaker_failures: Positive = 3
    """Consecutive failed calls that open the circuit breaker."""
    circuit_breaker_reset_s: PositiveFloat = 300.0
    """How long the breaker stays open before one trial call."""
    summary_max_tokens: Positive | None = None
    """Token budget of one chunk summary (default: window/20, at most 2,000); clamped to at most
    ``summary_max_chars`` / 8."""
    summary_layer_percent: Percent = 15.0
    """Share of the window the summary layer (rolling summary + recent chunks) may take."""
    summary_max_chars: Annotated[int, msgspec.Meta(ge=SUMMARY_CHARS_PER_TOKEN)] = 40000
    """An LLM summary longer than this is rejected as invalid output (at least 8). The chunk summary
    budget is at most an eighth of it (:data:`SUMMARY_CHARS_PER_TOKEN`), so no summary made to the
    budget is rejected."""
    failure_fallback: Literal["none", "breadcrumb"] = "none"
    """On summarizer failure: ``none`` leaves everything unchanged; ``breadcrumb``
    compacts the range with a bounded raw breadcrumb marked degraded."""
    breadcrumb_max_chars: Positive = 2000
    """Size bound of a raw breadcrumb summary."""
    must_keep_max_items: NonNegative = 40
    """Most items the deterministic must-keep check may append to a summary."""

    # --- recall -------------------------------------------------------------
    recall_max_results: Positive = 100
    """Most results of one recall answer (default and maximum ``k``). The answer is packed best
    first until ``recall_max_chars`` is full, so this is a ceiling to lower, not the packing rule."""
    recall_max_chars: Positive = 4800
    """Character bound of one recall answer: its serialized JSON, as the agent reads it."""
    recall_snippet_chars: Positive = 240
    """Most characters of the neighbouring event shown as ``context`` beside a recall hit."""

    # --- lifecycle ----------------------------------------------------------
    session_continue_gap_s: NonNegativeFloat = 300.0
    """A turn within this many seconds of the last continues the session."""
    session_new_gap_s: NonNegativeFloat = 1800.0
    """A turn after this many idle seconds starts a new session."""

    # --- governance ---------------------------------------------------------
    governance_keep_turns: NonNegative = 2
    """Tool results of the newest N turns stay verbatim in the prompt."""
    governance_max_tool_tokens: Positive | None = None
    """Older tool results larger than this are stubbed in the prompt (default: window/8, at most 2,000)."""
    oversized_tool_percent: Percent = 25.0
    """A tool result larger than this share of the prompt budget is stubbed in the prompt even in the
    current turn (verbatim stays in the log, recallable by seq)."""
    governance_keep_steps: NonNegative = 0
    """Inside the current turn, stub acted-on tool results older than the newest N model steps
    (0 keeps the whole current turn verbatim)."""
    replay_max_messages: NonNegative = 0
    """Most hot-window messages replayed per call (0 = no bound)."""

    # --- long term ----------------------------------------------------------
    idle_compact_after_minutes: NonNegativeFloat = 15.0
    """AutoCompact: compact sessions idle longer than this (0 disables)."""
    evict_after_idle_minutes: NonNegativeFloat = 30.0
    """An open memory nobody called for this long, with no work in flight, stops its background
    tasks until the next call starts them again (0: never). Keep it above
    ``idle_compact_after_minutes``: AutoCompact and scheduled Dream runs happen only while they run."""
    project_memory_tokens: Positive | None = None
    """Token budget of the PROJECT MEMORY block, and again of the saved memories' profile in the
    prompt (default: window/20, at most 800; the block takes up to
    :func:`aiden.policy.triggers.fresh_session_budget` until the session compacts or its log grows:
    :func:`~aiden.policy.triggers.fresh_block_fits`). Setting it fixes the block at that size in every prompt."""
    project_memory_sessions: Positive = 3
    """No longer used (the PROJECT MEMORY block merges every kept summary): accepted so existing configs load."""
    session_summaries_keep: Positive = 10
    """Session summaries kept before the oldest merge into the digest; the PROJECT MEMORY block merges
    the digest and every kept summary of earlier sessions."""
    session_summary_on_close: bool = True
    """Write the durable session summary when the memory is closed (seed 004's session end)."""
    close_timeout_s: NonNegativeFloat = 5.0
    """How long closing a memory waits behind a running-summary merge in flight, then gives the
    summarizer for the session summary; past it the extractive fallback writes it, and a
    maintenance pass still in flight is cancelled (each logged), instead of waiting out
    ``summarizer_timeout_s``."""
    dream_interval_hours: NonNegativeFloat = 0.0
    """Run Dream on this schedule (0: only on demand, ``memory.dream()``)."""
    idle_gap_compact_minutes: NonNegativeFloat = 60.0
    """A turn resuming a session after this idle gap compacts first (seed 001; 0 disables)."""

    # --- experience memory (seed 002) ---------------------------------------
    experience: bool = True
    """Record an episode per run (``begin_run`` to ``commit_run``) and learn from it when idle."""
    experience_environment: Annotated[str, msgspec.Meta(max_length=200, pattern="^[^\x00]*$")] = ""
    """The environment (repo, service, app) episodes run in when ``begin_run`` names none (at most 200 characters)."""
    experience_ttl_days: NonNegativeFloat = 0.0
    """Learned records expire this long after the episode that last taught them (0: never)."""

    def __post_init__(self) -> None:
        # Keyword construction must validate exactly like load_config: msgspec checks the
        # Meta constraints only when converting, so convert once (guarded against re-entry).
        if not _VALIDATING.active:
            _check_unicode(msgspec.structs.asdict(self), "Config")
            _VALIDATING.active = True
            try:
                msgspec.convert(msgspec.structs.asdict(self), Config, strict=True)
            except msgspec.ValidationError as exc:
                raise _translate(exc, "Config") from None
            finally:
                _VALIDATING.active = False
        problems = _inconsistencies(self)
        if problems:
            if _VALIDATING.active:
                raise ValueError("; ".join(problems))  # msgspec reports it; the caller names the source
            raise ConfigError("Config: " + "; ".join(problems))

    @classmethod
    def for_window(cls, context_window: int) -> Config:
        """A preset for ``context_window`` with its token-sized values derived and set explicitly; not
        ``project_memory_tokens``, whose default is a rule (setting it fixes the block's size)."""
        base = cls(context_window=context_window)
        return cls(
            context_window=context_window,
            reserve_tokens=base.reserve(),
            keep_recent_tokens=base.keep_recent(),
            summary_max_tokens=base.chunk_summary_tokens(),
            governance_max_tool_tokens=base.governance_tool_tokens(),
        )

    def with_window(self, context_window: int) -> Config:
        """This configuration for another window (explicit settings kept, derived ones follow it)."""
        return msgspec.structs.replace(self, context_window=context_window)

    # --- token sizes for the active window (explicit setting, else derived) ------------
    def reserve(self, window: int | None = None) -> int:
        """Tokens kept free for the completion, clamped to half the window (``window`` or the configured)."""
        window = self.context_window if window is None else window
        value = self.reserve_tokens if self.reserve_tokens is not None else min(8192, window // 8)
        return min(value, window // 2)

    def count_limit(self) -> int:
        """The event-count fallback of the trigger (explicit setting, else 60)."""
        return 60 if self.count_compress_after_events is None else self.count_compress_after_events

    def prompt_budget(self) -> int:
        """The most tokens a built prompt may take: ``window - reserve``."""
        return self.context_window - self.reserve()

    def keep_recent(self) -> int:
        """Target size of the hot window after a compaction."""
        return self.keep_recent_tokens if self.keep_recent_tokens is not None else max(1, min(20000, self.context_window // 4))

    def chunk_summary_tokens(self) -> int:
        """Token bound of one chunk summary, clamped to what ``summary_max_chars`` can hold."""
        value = self.summary_max_tokens if self.summary_max_tokens is not None else max(64, min(2000, self.context_window // 20))
        # A summary made to a budget summary_max_chars cannot hold is rejected: every compaction would fail.
        return min(value, self.summary_max_chars // SUMMARY_CHARS_PER_TOKEN)

    def max_pass_tokens(self) -> int:
        """Tokens one pass compacts at most (with ``max_pass_events`` set): 100 chunk summaries' worth,
        at least 40,000.

        A count alone does not bound a pass: many large tool outputs can exceed the summarizer's
        deadline with nothing committed. A bigger backlog drains in passes that each commit.
        """
        return max(40_000, 100 * self.chunk_summary_tokens())

    def summary_layer_tokens(self) -> int:
        """Token budget of the whole summary layer in the prompt."""
        return max(1, int(self.context_window * self.summary_layer_percent / 100))

    def governance_tool_tokens(self) -> int:
        """Older tool results larger than this are stubbed in the prompt."""
        return self.governance_max_tool_tokens if self.governance_max_tool_tokens is not None else max(64, min(2000, self.context_window // 8))

    def oversized_tool_tokens(self) -> int:
        """A tool result above this is stubbed in the prompt even in the current turn."""
        return max(64, int(self.prompt_budget() * self.oversized_tool_percent / 100))

    def project_memory_budget(self) -> int:
        """Token budget of the saved memories' profile and of the PROJECT MEMORY block: in every prompt when
        ``project_memory_tokens`` is set, else once the session compacted or its log grew (``fresh_block_fits``)."""
        return self.project_memory_tokens if self.project_memory_tokens is not None else max(64, min(800, self.context_window // 20))


class _Reentry(threading.local):
    active = False


_VALIDATING = _Reentry()


def _inconsistencies(cfg: Config) -> list[str]:
    problems = []
    if cfg.session_new_gap_s < cfg.session_continue_gap_s:
        problems.append("session_new_gap_s must be >= session_continue_gap_s")
    for name in ("keep_recent_tokens", "reserve_tokens", "summary_max_tokens"):
        value = getattr(cfg, name)
        if value is not None and value >= cfg.context_window:
            problems.append(f"{name} ({value}) must be below context_window ({cfg.context_window})")
    return problems


def _check_unicode(data: Mapping[Any, Any], source: str) -> None:
    """Refuse a key or text value with a lone surrogate (a YAML "\\ud800" escape) before msgspec reads it.

    No file or message can carry it: every later write holding it (an episode's environment) would
    fail, and msgspec itself raises a UnicodeEncodeError wording its error about one.
    """
    for key, value in data.items():
        for text in (key, value):
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    name = key if text is value else f"key {key!r}"
                    raise ConfigError(f"{source}: {name} is not valid Unicode (a lone surrogate)") from None


_PATH_IN_MSG = re.compile(r"at `\$\.?([^`]*)`")


def _translate(exc: msgspec.ValidationError, source: str) -> ConfigError:
    text = str(exc)
    match = _PATH_IN_MSG.search(text)
    key = match.group(1) if match else ""
    detail = _PATH_IN_MSG.sub("", text).rstrip(" -")
    if "Object contains unknown field" in text:
        unknown = re.search(r"unknown field `([^`]*)`", text)
        name = unknown.group(1) if unknown else key
        return ConfigError(f"{source}: unknown key {name!r}")
    if key:
        return ConfigError(f"{source}: key {key!r}: {detail}")
    return ConfigError(f"{source}: {detail}")


def config_from_mapping(data: Any, *, source: str = "<config>") -> Config:
    """Validate a mapping (as parsed from YAML) into a :class:`Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys, got {type(data).__name__}")
    _check_unicode(data, source)
    _VALIDATING.active = True
    try:
        return msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        raise _translate(exc, source) from exc
    finally:
        _VALIDATING.active = False


def load_config(path: str | os.PathLike[str]) -> Config:
    """Load ``extraction.yaml`` from ``path``; a missing file is an error, an empty one gives defaults."""
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise ConfigError(f"load_config: path must be a str or path, got {type(path).__name__}")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config: {exc.strerror}") from exc
    except ValueError as exc:  # a NUL byte or a lone surrogate: no file has that name
        raise ConfigError(f"{os.fspath(p)!r}: cannot read config: {exc}") from None
    if len(raw) > _MAX_CONFIG_BYTES:
        raise ConfigError(f"{p}: config larger than {_MAX_CONFIG_BYTES} bytes")
    import yaml  # only needed when a file is loaded: keeps `import aiden` light

    try:
        # A SafeLoader subclass: no tags, no code, as with safe_load.
        data = yaml.load(raw, Loader=_strict_loader(yaml))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{p}: invalid YAML: nested too deeply") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    return config_from_mapping(data, source=str(p))


def _strict_loader(yaml: Any) -> Any:
    """``yaml.SafeLoader`` that refuses duplicate keys and ``<<`` merge keys (PyYAML takes them silently)."""

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        None, None, "merge keys (<<) are not allowed", key_node.start_mark
                    )
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


_BACKUP_MAP: Final = "model_prices_and_context_window_backup.json"


@functools.cache
def _default_windows() -> dict[str, int]:
    """The map bundled with the installed litellm, read once per process."""
    # find_spec locates the package without importing (and so without running) it.
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return {}
    if spec is None or spec.origin is None:
        return {}
    return _load_windows(Path(spec.origin).parent / _BACKUP_MAP)


def _load_windows(path: Path) -> dict[str, int]:
    """``{model: context window}`` from a litellm-format model map; ``{}`` if unreadable."""
    try:
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    windows: dict[str, int] = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            continue
        for key in ("max_input_tokens", "max_tokens"):
            value = spec.get(key)
            if _positive_int(value):
                windows[str(name)] = value
                break
    return windows


def _positive_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class ModelResolver:
    """Context windows of models, from litellm's bundled model map, without importing litellm.

    ``path`` points at a map in litellm's format (default: the one inside the installed litellm,
    read once per process); ``overrides`` wins over the map. Nothing raises: an unknown model or a
    missing map gives the caller's fallback.
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self._overrides = dict(overrides or {})
        self._windows: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        if self._windows is None:
            self._windows = _default_windows() if self._path is None else _load_windows(self._path)
        return self._windows

    def lookup(self, model: str | None) -> int | None:
        """The known context window of ``model`` (tokens), or ``None``.

        Tries the name as given, then without provider prefixes
        (``openai/gpt-4o`` -> ``gpt-4o``; ``azure/eu/gpt-4o`` -> ``eu/gpt-4o`` -> ``gpt-4o``).
        """
        if not model:
            return None
        parts = model.strip().split("/")
        candidates = ["/".join(parts[i:]) for i in range(len(parts))]
        for name in candidates:
            if name in self._overrides and _positive_int(self._overrides[name]):
                return self._overrides[name]
        table = self._table()
        for name in candidates:
            window = table.get(name)
            if window is not None:
                return window
        return None

    def context_window(self, model: str | None, fallback: int) -> int:
        """The context window of ``model``, or ``fallback`` if unknown."""
        window = self.lookup(model)
        return window if window is not None else fallback
