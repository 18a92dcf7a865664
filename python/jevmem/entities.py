"""Light, deterministic entity extraction (no LLM) and query-to-entity matching.

The core computes both (`jevmem._core`); this module states the rules and
gives them a Python signature.

Entity ids are *normalised* strings (:func:`normalise`): trimmed, lowercased
(``str.casefold``), inner whitespace collapsed to one space, curly apostrophes
made straight, a trailing possessive (``'s`` / ``'``) removed. Exact shared ids
are what create entity edges (SPEC §2.4), so the same name must always give the
same id.

:func:`extract_entities` collects, in this order and without duplicates:

1. the ``speaker`` argument;
2. from the text, in order of appearance:

   * ``@handles`` and ``#tags``, kept with their sigil (``@mel``, ``#pride``);
   * capitalised words and runs of them ("Caroline", "New York", "Lord of the
     Rings", "Bank of America"): a run may contain the lowercase connectors
     ``of``, ``of the``, ``de``, ``da``, ``di``, ``du``, ``del``, ``der``,
     ``van``, ``von``, ``la``, ``le``, ``for`` and ``&`` when a capitalised
     word follows them; words with an inner capital (``iPhone``, ``eBay``)
     count as capitalised; titles (Mr, Mrs, Ms, Dr, Prof, St...) are dropped
     from the front of a run;
   * acronyms in capitals, a trailing ``+`` dropped ("LGBTQ+" -> ``lgbtq``);

   skipping pronouns and other function words everywhere, weekday and month
   names everywhere, and at the start of a sentence (text start, after
   ``. ! ? : ;``, a newline, an opening quote or bracket, or a dash) common
   words that are capitalised only because they open the sentence ("Yesterday",
   "Thanks", "Wow"), plus any sentence-initial word that also occurs in
   lowercase elsewhere in the same text. Text written mostly in capitals is
   treated as shouting: only handles and tags are taken from it;
3. provenance values under the keys in :data:`ENTITY_PROVENANCE_KEYS`
   (case-insensitive), in the mapping's order; the keys in
   :data:`LIST_PROVENANCE_KEYS` may hold several names separated by ``,`` or
   ``;``;
4. ``extra`` ids supplied by the caller.

:func:`mentions` says which known ids a query mentions: case-insensitive,
whole words, whitespace-insensitive, possessives ("Caroline's") included; an
occurrence that lies inside the occurrence of a longer mentioned id does not
count ("New York" does not also mention "york").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jevmem import _core

__all__ = [
    "ENTITY_PROVENANCE_KEYS",
    "LIST_PROVENANCE_KEYS",
    "extract_entities",
    "extract_entities_batch",
    "mentions",
    "normalise",
]

#: Provenance keys whose values name an entity (a person, an agent, a place).
ENTITY_PROVENANCE_KEYS = frozenset(_core.ENTITY_PROVENANCE_KEYS)
#: Of those, the keys whose value may list several ids ("Ann, Bob; Carl").
LIST_PROVENANCE_KEYS = frozenset(_core.LIST_PROVENANCE_KEYS)

Provenance = list[tuple[str, str]]


def normalise(s: str) -> str:
    """The canonical id for a name: trimmed, casefolded, single-spaced, no possessive."""
    return _core.normalise_entity(s)


def _pairs(provenance: Mapping[str, str] | None) -> Provenance:
    # what the rules read: string values, under their keys as strings
    if not provenance:
        return []
    return [(str(k), v) for k, v in provenance.items() if isinstance(v, str)]


def _strings(values: Iterable[object]) -> list[str]:
    return [x for x in values if isinstance(x, str)]


def extract_entities(
    text: str,
    *,
    speaker: str | None = None,
    provenance: Mapping[str, str] | None = None,
    extra: Iterable[str] = (),
) -> list[str]:
    """Normalised entity ids for one observation, deduplicated, in a stable order.

    Order: ``speaker``, then text entities by position, then provenance ids,
    then ``extra``. See the module docstring for the rules. A ``text`` that is
    not a string, and provenance values or ``extra`` items that are not, are
    skipped.

    >>> extract_entities("I went to a LGBTQ support group in New York with Mel.",
    ...                  speaker="Caroline")
    ['caroline', 'lgbtq', 'new york', 'mel']
    """
    return _core.extract_entities(
        text if isinstance(text, str) else "",
        speaker=speaker if isinstance(speaker, str) and speaker else None,
        provenance=_pairs(provenance),
        extra=_strings(extra),
    )


def extract_entities_batch(
    texts: Iterable[str],
    speakers: Iterable[str | None],
    provenances: Iterable[Mapping[str, str] | None],
    extras: Iterable[Iterable[str] | None],
) -> list[list[str]]:
    """`extract_entities` over columns, in one call into the core (which
    releases the GIL for the whole batch)."""
    return _core.extract_entities_batch(
        [t if isinstance(t, str) else "" for t in texts],
        [s if isinstance(s, str) and s else None for s in speakers],
        [_pairs(p) for p in provenances],
        [_strings(e or ()) for e in extras],
    )


def mentions(query: str, known_entities: Iterable[str]) -> list[str]:
    """The known entity ids that ``query`` mentions, in order of first mention.

    Matching is case-insensitive on whole words, tolerant of extra whitespace,
    and counts possessives ("Caroline's" mentions ``caroline``). An id is
    matched as given after :func:`normalise`. When one mentioned id's
    occurrence lies inside a longer one's ("york" inside "new york"), only the
    longer counts.
    """
    if not isinstance(query, str) or not query:
        return []
    return _core.entity_mentions(query, _strings(known_entities))
