"""Entity extraction and query mentions as Python did them before the core
took them over (`jevmem._core.extract_entities`, `jevmem._core.entity_mentions`):
a frozen copy kept as the tests' oracle for the port. Nothing in the package
imports it.

The rules, as they were documented:

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

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

__all__ = [
    "ENTITY_PROVENANCE_KEYS",
    "LIST_PROVENANCE_KEYS",
    "clear_caches",
    "extract_entities",
    "mentions",
    "normalise",
]

#: Provenance keys whose values name an entity (a person, an agent, a place).
ENTITY_PROVENANCE_KEYS = frozenset(
    {
        "speaker",
        "author",
        "user",
        "user_name",
        "username",
        "sender",
        "recipient",
        "addressee",
        "agent",
        "person",
        "name",
        "entity",
        "participant",
        "participants",
        "entities",
        "mentions",
        "location",
        "place",
        "organization",
        "organisation",
    }
)
#: Of those, the keys whose value may list several ids ("Ann, Bob; Carl").
LIST_PROVENANCE_KEYS = frozenset({"participants", "entities", "mentions"})

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_POSSESSIVE = re.compile(r"(?:'s|')$")


def normalise(s: str) -> str:
    """The canonical id for a name: trimmed, casefolded, single-spaced, no possessive."""
    out = " ".join(s.translate(_APOSTROPHES).casefold().split())
    return _POSSESSIVE.sub("", out).strip() if out.endswith("'") or out.endswith("'s") else out


# --------------------------------------------------------------------------- vocabularies

_FUNCTION_WORDS = frozenset(
    """
    i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves one ones
    i'm i've i'll i'd you're you've you'll you'd he's he'll he'd she's she'll she'd it's it'll
    we're we've we'll we'd they're they've they'll they'd that's there's here's what's who's
    let's
    a an the this that these those some any each every either neither no none all both few many
    much more most other another such what which who whom whose whatever whoever whichever
    and or but nor so yet for if then than because since though although while whereas unless
    until till as whether
    of in on at by to from with without into onto upon about above below over under between
    among through during before after around near off out up down across against along
    behind beyond inside outside toward towards via per
    is am are was were be been being have has had having do does did doing will would shall
    should can could may might must ought isn't aren't wasn't weren't don't doesn't didn't
    won't wouldn't can't couldn't shouldn't haven't hasn't hadn't
    not no yes yeah yep nope ok okay oh ah hey hi hello bye
    here there where when why how now just also too very really only even still again
    """.split()
)

_CALENDAR_WORDS = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs
    fri sat sun january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec today tomorrow yesterday tonight
    """.split()
)

# Common words that appear capitalised because they open a sentence.
_SENTENCE_STARTERS = frozenset(
    """
    about absolutely actually after afterwards again agreed ah aha alright also although
    always amazing and anyway anyways anything apparently appreciate as at aw aww awesome
    awww back basically be because been before being besides best better big both brilliant
    btw but by can cause certainly check cheers come congrats congratulations cool could
    count currently dear definitely did do does done don't during each earlier either
    enjoy especially even eventually ever every everyone everything exactly excited
    excellent fantastic feel feeling feels finally first for fortunately from fun funny
    gee get getting give glad go going good gosh got gotta great guess guys ha haha happy
    has have having he hello hey hi hmm honestly hope hopefully how however huh i if
    imagine in indeed interesting is it its just keep kind last later let lately like
    literally lol look looking looks lots love lovely luckily made make making maybe me
    meanwhile might mine more moreover most mostly much my nah naturally nearly never
    nevertheless new next nice no nope not nothing now of oh ok okay omg on once one only
    or other otherwise our overall perfect perhaps personally please plus possibly pretty
    probably quite rather ready really recently right same say see seems seriously she
    should since so some someday somehow someone something sometimes soon sorry sounds
    speaking still such sure sweet take taking talk tell thank thankfully thanks that
    that's the then there therefore these they thing things think this those though
    thought thx to today together too totally true truly try trying ugh um umm unfortunately
    until up us usually very wait want wanted was watch watching we well were what
    whatever when whenever where wherever whether which while who whoa why will wish with
    without woah won't wonderful wow wow yay yeah yes yesterday yet you your yup
    almost animals anytime art bet books brave bummer care catch challenges change chat
    clay contemporary crazy create cute dance expression family fingers gather game gonna
    hard highly impressive kids life little long lost lucky makes man mixed mm mmm moments
    music nature need oof oops ouch pets people phew proud remember reminds respect rock
    setbacks show small spill stay strong stuff super takes thoughts time tough unconditional
    wanna way woohoo yea young yum
    """.split()
)

_TITLES = frozenset(
    "mr mrs ms miss mx dr prof sir dame lord lady st mt fr rev sgt capt col gen".split()
)
_CONNECTORS = frozenset("of de da di du del der van von la le for & the".split())
# Chat acronyms that are not entities.
_CHAT_ACRONYMS = frozenset(
    "ok omg lol lmao rofl btw tbh imo imho idk fyi asap brb ty thx pls plz np irl fomo yolo "
    "tl dr".split()
)

_TOKEN = re.compile(
    r"[@#][\w][\w.-]*\w|[@#]\w"  # handle or tag
    r"|[^\W\d_](?:[\w'\u2019&+-]*[\w+])?"  # a word (may hold apostrophes, hyphens, & and +)
    r"|&"
)
_SENT_BREAK = re.compile(r"[.!?:;\n\"\u201c\u2018(\[\u2014\u2013]|\s-\s|^\s*-")


_CONTRACTION = re.compile(r"'(?:re|ve|d|ll|m|t|all)$|n't$")


def _common_opener(key: str, lower_seen: set[str]) -> bool:
    """A sentence-initial word that is probably an ordinary word, not a name."""
    return (
        key in _SENTENCE_STARTERS
        or key in lower_seen
        or (len(key) > 5 and key.endswith("ing"))  # "Seeing", "Finding"
    )


def _is_capitalised(tok: str) -> bool:
    return tok[0].isupper() or (len(tok) > 1 and tok[0].islower() and tok[1].isupper())


def _strip_possessive(tok: str) -> str:
    t = tok.translate(_APOSTROPHES)
    if t.endswith("'s") or t.endswith("'S"):
        return tok[:-2]
    if t.endswith("'"):
        return tok[:-1]
    return tok


def _is_acronym(tok: str) -> bool:
    core = tok.rstrip("+")
    return len(core) >= 2 and core.isupper() and any(c.isalpha() for c in core)


def _text_entities(text: str) -> list[tuple[int, str]]:
    """(position, id) pairs found in ``text``."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)]
    if not tokens:
        return []
    words = [t for _, _, t in tokens if t[0] not in "@#&"]
    shouting = len(words) >= 3 and sum(1 for w in words if w.isupper() and len(w) > 1) * 2 > len(
        words
    )
    lower_seen = {t.casefold() for t in words if t[0].islower()}

    out: list[tuple[int, str]] = []
    run: list[tuple[int, str]] = []  # (position, token) of the current capitalised run
    pending: list[tuple[int, str]] = []  # lowercase connectors waiting for a capitalised word

    def flush() -> None:
        nonlocal run, pending
        if not run:  # nothing to end (pending only grows beside an open run)
            return
        pending = []
        parts = run
        run = []
        while (
            len(parts) > 1
            and parts[0][1].casefold() in _TITLES
            and parts[1][1].casefold() not in _CONNECTORS
        ):
            parts = parts[1:]
        if len(parts) == 1 and (parts[0][1].casefold() in _TITLES or len(parts[0][1]) == 1):
            parts = []  # a lone title or initial
        while parts and parts[-1][1].casefold() in _CONNECTORS:
            parts = parts[:-1]
        if not parts:
            return
        name = " ".join(
            _strip_possessive(t) if i == len(parts) - 1 else t for i, (_, t) in enumerate(parts)
        )
        if len(parts) == 1 and _is_acronym(parts[0][1]):
            name = _strip_possessive(parts[0][1]).rstrip("+")
        ident = normalise(name)
        if ident:
            out.append((parts[0][0], ident))

    # the text's leading whitespace: a token at or before it opens the text
    # (found once; slicing the text up to every token would be quadratic)
    lead = len(text) - len(text.lstrip())
    prev_end = 0
    for start, end, tok in tokens:
        gap = text[prev_end:start]
        prev_end = end
        if gap == " ":  # most gaps: no break, no punctuation (the regex is the cost)
            sentence_start = start <= lead
        else:
            sentence_start = start <= lead or _SENT_BREAK.search(gap) is not None
            if gap.strip():  # any punctuation between two words ends a name
                flush()
        if tok[0] in "@#":
            flush()
            out.append((start, normalise(tok)))
            continue
        if shouting:
            continue
        bare = _strip_possessive(tok)
        key = bare.casefold()
        if not _is_capitalised(tok) or tok == "&":
            if run and (key in _CONNECTORS or tok == "&"):
                pending.append((start, tok))
            else:
                flush()
            continue
        if key in _FUNCTION_WORDS or key in _CALENDAR_WORDS or key in _CHAT_ACRONYMS:
            flush()
            continue
        if _CONTRACTION.search(key):
            flush()
            continue
        if sentence_start and not run and _common_opener(key, lower_seen):
            continue
        if pending:
            run.extend(pending)
            pending = []
        run.append((start, tok))
        if bare != tok:  # a possessive ends the name: "Caroline's Mom"
            flush()
    flush()
    return out


def _provenance_entities(provenance: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in provenance.items():
        k = str(key).strip().casefold()
        if k not in ENTITY_PROVENANCE_KEYS or not isinstance(value, str):
            continue
        values = re.split(r"[,;]", value) if k in LIST_PROVENANCE_KEYS else [value]
        out.extend(v for v in (normalise(x) for x in values) if v)
    return out


def extract_entities(
    text: str,
    *,
    speaker: str | None = None,
    provenance: Mapping[str, str] | None = None,
    extra: Iterable[str] = (),
) -> list[str]:
    """Normalised entity ids for one observation, deduplicated, in a stable order.

    Order: ``speaker``, then text entities by position, then provenance ids,
    then ``extra``. See the module docstring for the rules.

    >>> extract_entities("I went to a LGBTQ support group in New York with Mel.",
    ...                  speaker="Caroline")
    ['caroline', 'lgbtq', 'new york', 'mel']
    """
    ids: list[str] = []
    if speaker:
        ids.append(normalise(speaker))
    if isinstance(text, str) and text:
        ids.extend(ident for _, ident in _text_entities(text))
    if provenance:
        ids.extend(_provenance_entities(provenance))
    ids.extend(normalise(x) for x in extra if isinstance(x, str))
    seen: set[str] = set()
    result: list[str] = []
    for ident in ids:
        if ident and ident not in seen:
            seen.add(ident)
            result.append(ident)
    return result


# --------------------------------------------------------------------------- mentions

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65_536)
def _entity_pattern(ident: str) -> tuple[frozenset[str], re.Pattern[str]]:
    words = frozenset(_WORD.findall(ident))
    body = r"\s+".join(re.escape(part) for part in ident.split(" "))
    left = r"(?<![\w@#])" if ident[:1].isalnum() or ident[:1] == "_" else r"(?<![\w])"
    right = r"(?!\w)" if ident[-1:].isalnum() or ident[-1:] == "_" else ""
    return words, re.compile(left + body + right)


def clear_caches() -> None:
    """Empty the cache of entity patterns (keyed by the entities of observations)."""
    _entity_pattern.cache_clear()


def mentions(query: str, known_entities: Iterable[str]) -> list[str]:
    """The known entity ids that ``query`` mentions, in order of first mention.

    Matching is case-insensitive on whole words, tolerant of extra whitespace,
    and counts possessives ("Caroline's" mentions ``caroline``). An id is
    matched as given after :func:`normalise`. When one mentioned id's
    occurrence lies inside a longer one's ("york" inside "new york"), only the
    longer counts.
    """
    q = " ".join(query.translate(_APOSTROPHES).casefold().split()) if isinstance(query, str) else ""
    if not q:
        return []
    qwords = set(_WORD.findall(q))
    hits: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for raw in known_entities:
        if not isinstance(raw, str):
            continue
        ident = normalise(raw)
        if not ident or ident in seen:
            continue
        seen.add(ident)
        words, pattern = _entity_pattern(ident)
        if not words <= qwords:
            continue
        for m in pattern.finditer(q):
            hits.append((m.start(), m.end(), ident))
    if not hits:
        return []
    kept: dict[str, int] = {}
    for start, end, ident in sorted(hits):
        if any(s <= start and end <= e and e - s > end - start for s, e, _ in hits):
            continue  # inside a longer mentioned id
        kept.setdefault(ident, start)
    return sorted(kept, key=lambda i: kept[i])
