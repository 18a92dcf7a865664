"""Passages of long observations: spans of a text that each fit an embedder's window.

An embedder reads a bounded window of a text (the ONNX encoders: ``max_length``
tokens); a longer observation is kept whole as one node, and its passages are
embedded one by one so the vector index sees all of it. :func:`passage_spans`
cuts a text into consecutive ``[start, end)`` character spans, each within a
budget, preferring to cut after a paragraph break, then a line break, then a
sentence end, then any whitespace, and cutting inside a word only when a
single word exceeds the budget. Whitespace between passages belongs to none.

The budget is counted in the embedder's own tokens when it can say where they
start (``token_starts``, as :class:`~jevmem.embed.OnnxEmbedder` does), else in
characters at :data:`CHARS_PER_TOKEN` per token of its window. The work is
linear in the text's length: one tokenisation, and every cut looks back over
at most one passage.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_WINDOW_TOKENS",
    "PassagePlanner",
    "passage_spans",
]

#: A cautious average for English WordPiece (about 4.2 characters per token on
#: prose, fewer on code and numbers).
CHARS_PER_TOKEN = 4
#: The window assumed for an embedder that states none (``max_length``).
DEFAULT_WINDOW_TOKENS = 128
#: Boundaries to cut after, most preferred first.
_BOUNDARIES = (
    re.compile(r"\n\s*\n\s*"),  # paragraph break
    re.compile(r"\n\s*"),  # line break
    re.compile(r"[.!?;:][\"')\]]*\s+"),  # sentence end
    re.compile(r"\s+"),  # any whitespace
)
_SPACE = re.compile(r"\s*")


def passage_spans(
    text: str, budget: int, token_starts: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """Consecutive spans of ``text``, each holding at most ``budget`` units.

    A unit is a token when ``token_starts`` (ascending character offsets of
    the text's tokens) is given, else a character. A text within the budget
    is one span. Every non-whitespace character lies in exactly one span.
    """
    if budget < 1:
        raise ValueError("budget must be at least 1")
    n = len(text)
    start = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    spans: list[tuple[int, int]] = []
    while start < n:
        limit = _limit(start, n, budget, token_starts)
        if limit >= n:
            end = n
        else:
            end = _cut(text, start, limit)
        piece_end = len(text[start:end].rstrip()) + start
        if piece_end > start:
            spans.append((start, piece_end))
        start = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    return spans


def _limit(start: int, n: int, budget: int, token_starts: Sequence[int] | None) -> int:
    """The furthest end a passage opening at ``start`` may have."""
    if token_starts is None:
        return min(n, start + budget)
    first = bisect.bisect_left(token_starts, start)
    nxt = first + budget
    return n if nxt >= len(token_starts) else max(start + 1, token_starts[nxt])


def _cut(text: str, start: int, limit: int) -> int:
    """Where to end a passage in ``(start, limit]``: after the best boundary
    in its second half (a passage stays at least half full), else after the
    best one anywhere, else at ``limit`` itself."""
    half = start + (limit - start) // 2
    for lo in (half, start + 1):
        for pattern in _BOUNDARIES:
            last = None
            for m in pattern.finditer(text, lo, limit):
                last = m
            if last is not None and last.start() > start:
                return last.end() if last.end() <= limit else last.start() + 1
    return limit


class PassagePlanner:
    """How one embedder's texts are cut into passages.

    ``window`` is the embedder's window in tokens (its ``max_length``, else
    ``window_tokens``, else :data:`DEFAULT_WINDOW_TOKENS`), two of them taken
    by the encoder's start and end markers. Texts are planned as embedded:
    with the speaker prefix (``"Ann: "``), whose tokens count against the
    budget of every passage.
    """

    def __init__(self, embedder: Any, window_tokens: int | None = None) -> None:
        window = window_tokens or getattr(embedder, "max_length", None) or DEFAULT_WINDOW_TOKENS
        if not isinstance(window, int) or window < 4:
            raise ValueError(f"a passage window needs at least 4 tokens, got {window!r}")
        self.window = window
        starts = getattr(embedder, "token_starts", None)
        self._token_starts = starts if callable(starts) else None

    def spans(self, text: str, prefix: str = "") -> list[tuple[int, int]]:
        """The passage spans of ``text``; ``[]`` when it fits one window."""
        room = self.window - 2
        if self._token_starts is None:
            budget = max(1, (room - len(prefix) // CHARS_PER_TOKEN) * CHARS_PER_TOKEN)
            if len(text) <= budget:
                return []
            return passage_spans(text, budget)
        # a token covers at least one non-space character: a text with no
        # more characters than the window holds cannot overflow it
        if len(prefix) + len(text) <= room:
            return []
        prefix_tokens = len(self._token_starts(prefix)) if prefix else 0
        budget = max(1, room - prefix_tokens)
        starts = self._token_starts(text)
        if len(starts) <= budget:
            return []
        return passage_spans(text, budget, starts)
