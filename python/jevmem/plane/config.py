"""The settings and tunables of a Memory: `MemoryConfig` and the constants of its read path."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from jevmem._core import DEFAULT_MAX_TEXT_BYTES, Node, TraversalConfig
from jevmem.controller.types import Answer, DecisionRequest
from jevmem.errors import InvalidConfigError
from jevmem.system_two import SystemTwo

Mode = Literal["lexical", "anchors", "traversal", "full"]
VIEWS = ("semantic", "temporal", "causal", "entity")
#: Share of a seed's score that is its own relevance (the rest: support from
#: its temporal neighbours and its episode).
ANCHOR_RELEVANCE_WEIGHT = 0.6
DAY_S = 86_400
#: At most this many nodes of a time window are scored to choose the pool's share.
WINDOW_SCAN = 4096
#: How many of the best evidence items an assessment looks at.
ASSESSED_ITEMS = 8
#: A fact ranked above the one that replaced it (at the query's time) gives
#: it its place and follows just below: this share of its score.
REPLACED_BELOW = 0.999
Summariser = Callable[[Sequence[Node]], str]
#: ``summariser=`` also takes a System Two (an object with ``complete``),
#: wrapped in `jevmem.answering.SystemTwoSummariser`.
SummariserLike = Summariser | SystemTwo
#: A query's read path: yields controller requests, receives their answers.
Steps = Generator[list[DecisionRequest], Sequence[Mapping[str, Answer]], None]


#: The largest integer setting: the core takes counts and limits as 64-bit numbers.
MAX_SETTING = 2**63 - 1


def _real(v: object) -> float:
    """``v`` as a float, or NaN when it is no number a float holds: a bool
    is an int to Python but never a setting's number; numbers.Real takes
    numpy's floats and integers too, and not numpy's bool. NaN then fails
    every range check."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return math.nan
    try:
        return float(v)
    except OverflowError:  # an int past a float's range
        return math.nan


def count_setting(name: str, v: object, minimum: int, what: str = "an integer") -> int:
    """``v`` as an integer setting in ``minimum`` .. `MAX_SETTING`, or
    InvalidConfigError naming it (a bool is refused; numpy's integers are
    taken, as every other setting takes numpy's numbers)."""
    if (
        isinstance(v, bool)
        or not isinstance(v, numbers.Integral)
        or not minimum <= int(v) <= MAX_SETTING
    ):
        raise InvalidConfigError(f"{name} must be {what} in {minimum} .. 2**63 - 1, got {v!r:.80}")
    return int(v)


@dataclass(frozen=True)
class MemoryConfig:
    """Write- and read-path settings; defaults are the paper's values."""

    theta_rel: float = 0.60
    consolidation_period: int = 20
    consolidation_neighbours: int = 5
    summary_min_prob: float = 0.85
    summary_max_contradiction: float = 0.85
    #: How deep each of the lexical and vector lists is before fusion.
    anchor_depth: int = 100
    #: How many fused nodes the controller scores before seeding.
    anchor_pool: int = 100
    #: How many of the strongest pool nodes bring their temporal context (the
    #: observations up to two steps before and after, same episode) into the pool.
    context_seeds: int = 30
    #: At most this many nodes observed inside a time window the query names
    #: ("on 9 November 2022") join the pool.
    time_window_nodes: int = 64
    #: Pseudo-relevance feedback: the query vector moves towards the mean of
    #: its `feedback_nodes` best pool matches by this weight (0 turns it off).
    feedback_weight: float = 0.5
    feedback_nodes: int = 3
    #: Support through a second temporal step counts this much of a first (a
    #: reply to a reply: "How was it?" / "Super good!").
    second_step_decay: float = 0.7
    #: A reply to a question answers it: the step from a question to the next
    #: turn (by someone else) weighs 1 + reply_link x the question's question
    #: share, so a turn that asks what the query asks lifts its reply above
    #: plain neighbours.
    reply_link: float = 1.0
    #: When a query asks about one of the memory's speakers ("What does
    #: Melanie play?"), what the other speakers said ranks at this share of
    #: its score in the answer (1 turns it off): the person asked about
    #: says most of what answers it, while the turns around theirs earn as
    #: much support from the same exchange.
    other_speaker_share: float = 0.85
    #: How many of the best-scored pool nodes seed the traversal.
    anchors: int = 20
    kappa: float = 60.0
    #: The lexical ranking the anchors fuse also reads related words of the
    #: query's rare words ("job" for "work"; a table compiled into the core,
    #: `jevmem_core::related`) and every query word's other spelling,
    #: British or American, at a query term's weight ("colour" for "color",
    #: `jevmem_core::spelling`).
    related_words: bool = True
    traversal: TraversalConfig = field(default_factory=TraversalConfig)
    #: Texts longer than this (UTF-8 bytes) are refused; the limit of the
    #: store a Memory creates (a store passed in keeps its own).
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    #: The window a passage may fill, in tokens; None: the embedder's
    #: ``max_length`` (128 when it has none, at 4 characters a token). Texts
    #: longer than one window are also indexed passage by passage.
    passage_tokens: int | None = None
    #: Index long texts passage by passage (embedding every passage costs
    #: embedder time in proportion to the text's length); False: node vectors only.
    index_passages: bool = True

    def __post_init__(self) -> None:
        for name in (
            "theta_rel",
            "summary_min_prob",
            "summary_max_contradiction",
            "other_speaker_share",
            "second_step_decay",
        ):
            v = getattr(self, name)
            if not 0.0 <= _real(v) <= 1.0:
                raise InvalidConfigError(f"{name} must be in [0, 1], got {v!r:.80}")
        for name in (
            "consolidation_period",
            "consolidation_neighbours",
            "anchor_depth",
            "anchor_pool",
            "anchors",
            "max_text_bytes",
        ):
            object.__setattr__(self, name, count_setting(name, getattr(self, name), 1))
        for name in ("context_seeds", "time_window_nodes", "feedback_nodes"):
            object.__setattr__(self, name, count_setting(name, getattr(self, name), 0))
        if self.passage_tokens is not None:
            tokens = count_setting("passage_tokens", self.passage_tokens, 4, "None or an integer")
            object.__setattr__(self, "passage_tokens", tokens)
        for name in ("feedback_weight", "reply_link"):
            v = getattr(self, name)
            if not (math.isfinite(_real(v)) and _real(v) >= 0):
                raise InvalidConfigError(f"{name} must be a non-negative number, got {v!r:.80}")
        if not (math.isfinite(_real(self.kappa)) and _real(self.kappa) > 0):
            raise InvalidConfigError(f"kappa must be a positive number, got {self.kappa!r:.80}")
        for name in ("related_words", "index_passages"):
            v = getattr(self, name)
            if not isinstance(v, bool):
                raise InvalidConfigError(f"{name} must be a bool, got {v!r:.80}")
        if not isinstance(self.traversal, TraversalConfig):
            raise InvalidConfigError(
                f"traversal must be a jevmem.TraversalConfig, got {type(self.traversal).__name__}"
            )

    @property
    def traversal_limits(self) -> Mapping[str, object]:
        """``traversal.as_dict()``, read-only, built once: every query reads
        it (the config and its `TraversalConfig` are both frozen)."""
        got: dict[str, object] | None = self.__dict__.get("_traversal_limits")
        if got is None:  # a plain dict kept (a config pickles), a read-only view given
            got = self.traversal.as_dict()
            object.__setattr__(self, "_traversal_limits", got)
        return MappingProxyType(got)


def memory_config(config: object) -> MemoryConfig:
    """The config a Memory runs with: ``config``, or the defaults for None;
    anything else (a dict, the class itself) is an InvalidConfigError."""
    if config is None:
        return MemoryConfig()
    if not isinstance(config, MemoryConfig):
        raise InvalidConfigError(
            f"config must be a MemoryConfig or None, got {type(config).__name__}"
            + (" (the class: call it)" if config is MemoryConfig else "")
        )
    return config
