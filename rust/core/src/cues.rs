//! What a query asks about time: whether it asks when, how long, in what
//! order or about the latest state, the times it names (grounded), and at
//! which time the facts it asks about should hold.
//!
//! The rules of `jevmem.temporal.query_time_cues` and `query_fact_time`,
//! with the patterns in Python's `re` syntax compiled as the grounding
//! patterns are (`grounding::compile_python`); `tests/test_cues.py` holds
//! them to the Python they replaced over every development question.

use std::sync::LazyLock;

use fancy_regex::Regex;
use regex_automata::{meta, Input, MatchKind, PatternID, PatternSet};

use crate::error::Result;
use crate::grounding::{compile_python, ground, loose_syntax, GroundedRef};
use crate::validity::FactTime;

/// The day a query without `now` grounds absolute times against
/// (2000-01-01T00:00:00Z; relative ones are dropped then).
const NO_NOW_ANCHOR: i64 = 946_684_800;

/// (name, family, weight, pattern): a cue's name, what it asks about and
/// how strongly it says the query needs time.
const CUES: [(&str, &str, f64, &str); 13] = [
    ("when", "when", 0.95, r"^\W*(?:and\s+|so\s+|but\s+)?when\b"),
    ("since_when", "when", 0.95, r"\bsince\s+when\b"),
    (
        "what_time",
        "when",
        0.95,
        r"\b(?:what|which)\s+(?:date|day|time|year|month|week|weekend|season|decade|day\s+of\s+the\s+week)\b",
    ),
    (
        "on_what_date",
        "when",
        0.9,
        r"\b(?:on|in|at)\s+what\s+(?:date|day|year)\b",
    ),
    ("when_inner", "when", 0.55, r"\bwhen\b"),
    (
        "how_long",
        "duration",
        0.9,
        r"\bhow\s+(?:long|many\s+(?:days|weeks|weekends|months|years|times)|often|recently|soon|old)\b",
    ),
    ("how_long_ago", "duration", 0.95, r"\bhow\s+long\s+ago\b"),
    (
        "date_word",
        "when",
        0.6,
        r"\b(?:date|dates|dated|timeline|schedule)\b",
    ),
    (
        "before_after",
        "order",
        0.7,
        r"\b(?:before|after|prior\s+to|earlier\s+than|later\s+than|until|since)\b",
    ),
    (
        "first_last",
        "order",
        0.75,
        r"\b(?:(?:the\s+)?(?:first|last|previous|next|latest|earliest|final)\s+time|for\s+the\s+first\s+time|first|earliest|initially|originally|in\s+what\s+order|which\s+came\s+first|in\s+order|chronolog\w*|sequence)\b",
    ),
    // recency, in two parts: a recent event (asked for by its time) and
    // what holds at present (see `asks_for_a_time`)
    (
        "recent",
        "recency",
        0.6,
        r"\b(?:latest|most\s+recent(?:ly)?|recently|lately|last\s+(?:thing|one|update))\b",
    ),
    (
        "present",
        "recency",
        0.6,
        r"\b(?:currently|nowadays|these\s+days|right\s+now|now|still|anymore|any\s+more|up\s+to\s+date|current)\b",
    ),
    (
        "time_word",
        "when",
        0.5,
        r"\b(?:ago|yesterday|today|tomorrow|tonight|weekend|week|month|year|years|morning|evening|afternoon|night|season|summer|winter|spring|autumn|fall|birthday|anniversary|holiday|holidays|vacation)\b",
    ),
];

/// "The last", "the latest": with a first/last cue, the query wants recency.
const LAST: &str = r"\b(?:last|latest|most\s+recent)\b";

/// Explicit present words: "as things stand".
const PRESENT: &str = r"\b(?:now|nowadays|currently|current|these\s+days|at\s+the\s+moment|at\s+present|presently|right\s+now|today|still|any\s*more|latest)\b";

/// Present-tense auxiliaries, and the modals of a plan ("what time should I
/// join", "when will the sync be"): a present tense asks what holds now, and
/// a plan is made on what holds now, unless the query asks what someone
/// said (`REPORTED`).
const TENSE: &str = r"\b(?:is|are|am|isn't|aren't|does|do|doesn't|don't|has|have|hasn't|haven't|should|shall|will|must|can)\b";

/// What comes before a "do" or "have" that is a past question's main verb,
/// not a present tense ("what did I do", "what didn't Anna have"): "did" or
/// "didn't" and its subject of one or two words, up to the end of the text
/// it is run on (the query before the verb).
const DID_BEFORE: &str = r"\bdid(?:n't)?\s+(?:\w+\s+){1,2}$";

/// A question about what someone said or advised, in a past or perfect
/// tense ("which days did I say my kids have...", "how many sizes have I
/// mentioned", "what did you recommend"): it asks for the statements
/// themselves, whatever changed after them, so its present tense ("my kids
/// have") is the statement's and asks for no time.
const REPORTED: &str = r"\b(?:(?:did|have|has|had)\s+(?:\w+\s+){1,2}(?:say|said|mention|mentioned|tell|told|share|shared|note|noted|state|stated|describe|described|list|listed|bring\s+up|brought\s+up|recommend|recommended|suggest|suggested|explain|explained|outline|outlined|propose|proposed|advise|advised)|(?:i|you|we|he|she|they)\s+(?:said|mentioned|told|shared|noted|stated|described|listed|brought\s+up|recommended|suggested|explained|outlined|proposed|advised))\b";

/// What points at what held before a change without naming a time (a plain
/// past tense does not: "What did she switch to?" asks for the new value).
const PAST: &str = r"\b(?:before|used\s+to|previously|originally|formerly|at\s+first|initially|in\s+the\s+past|back\s+then|earlier|prior\s+to|former|previous)\b";

/// A pattern run only where its loose form (no word boundaries or
/// lookarounds, one of the multi-pattern scan's) matched.
struct Pattern {
    exact: Regex,
}

impl Pattern {
    fn new(py: &str) -> Self {
        Pattern {
            exact: compile_python(py),
        }
    }
}

/// A request for help or advice ("can you", "how do I", "recommend"): such
/// a query is answered by standing instructions and tastes as much as by facts.
const REQUEST: &str = r"\b(?:can you|could you|would you|will you|please|help me|show me|tell me how|suggest|recommend|advise|should i|how (?:can|do|should) i|what (?:would|should)|give me|walk me through|explain)\b";

/// A request for a summary or an overview ("summarize", "a recap of"): what
/// answers it is the substance of many turns, not one that matches best.
const SUMMARY: &str = r"\b(?:summar(?:y|ies|ise|ised|ising|ize|ized|izing)|recap(?:s|ped|ping)?|overview|rundown|round-?up)\b";

/// A question about what the one who answers said before, asked of them in
/// the second person ("what did you recommend", "the options you
/// suggested", "your earlier advice"): in an agent's log its answer is the
/// agent's own reply, not the user's turn that asked for it.
const ANSWERER_SAID: &str = r"\b(?:(?:did|have|had)\s+you\s+(?:\w+\s+)?(?:say|mention|tell|share|note|state|describe|list|bring\s+up|recommend|suggest|explain|outline|propose|advise|give|provide)|you\s+(?:\w+\s+)?(?:said|mentioned|told|shared|noted|stated|described|listed|brought\s+up|recommended|suggested|explained|outlined|proposed|advised|gave|provided)|your\s+(?:earlier\s+|previous\s+|last\s+)?(?:advice|recommendations?|suggestions?|answers?|explanations?|tips))\b";

/// Where `LAST`, `PRESENT`, `PAST`, `REQUEST`, `SUMMARY`, `TENSE`,
/// `REPORTED` and `ANSWERER_SAID` sit in the scan, after the cues.
const LAST_AT: usize = CUES.len();
const PRESENT_AT: usize = LAST_AT + 1;
const PAST_AT: usize = LAST_AT + 2;
const REQUEST_AT: usize = LAST_AT + 3;
const SUMMARY_AT: usize = LAST_AT + 4;
const TENSE_AT: usize = LAST_AT + 5;
const REPORTED_AT: usize = LAST_AT + 6;
const ANSWERER_SAID_AT: usize = LAST_AT + 7;
/// The patterns at `LAST_AT`.., in scan order.
const AFTER_CUES: [&str; 8] = [
    LAST,
    PRESENT,
    PAST,
    REQUEST,
    SUMMARY,
    TENSE,
    REPORTED,
    ANSWERER_SAID,
];

struct Patterns {
    cues: Vec<Pattern>,
    last: Pattern,
    present: Pattern,
    past: Pattern,
    request: Pattern,
    summary: Pattern,
    tense: Pattern,
    reported: Pattern,
    answerer_said: Pattern,
    did_before: Pattern,
    /// Every pattern's loose form, in one multi-pattern search (cues in
    /// table order, then `LAST_AT`..=`ANSWERER_SAID_AT`): one pass over a query
    /// rules most patterns out, where one search each cost a pass each.
    loose: meta::Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let all: Vec<&str> = CUES.iter().map(|c| c.3).chain(AFTER_CUES).collect();
    let loose: Vec<String> = all.iter().map(|py| loose_syntax(py)).collect();
    Patterns {
        cues: CUES.iter().map(|c| Pattern::new(c.3)).collect(),
        last: Pattern::new(LAST),
        present: Pattern::new(PRESENT),
        past: Pattern::new(PAST),
        request: Pattern::new(REQUEST),
        summary: Pattern::new(SUMMARY),
        tense: Pattern::new(TENSE),
        reported: Pattern::new(REPORTED),
        answerer_said: Pattern::new(ANSWERER_SAID),
        did_before: Pattern::new(DID_BEFORE),
        loose: meta::Builder::new()
            // every pattern that matches anywhere, as a regex set reports them
            .configure(meta::Config::new().match_kind(MatchKind::All))
            .build_many(&loose)
            .expect("the cue patterns compile"),
    }
});

/// Which patterns' loose forms a query matches: what the cue functions
/// read (`scan` it once and pass it to each).
#[derive(Clone, Debug)]
pub struct CueScan {
    hits: PatternSet,
}

/// One pass of every cue pattern's loose form over `query`.
pub fn scan(query: &str) -> CueScan {
    let p = &*PATTERNS;
    let mut hits = PatternSet::new(p.loose.pattern_len());
    p.loose
        .which_overlapping_matches(&Input::new(query), &mut hits);
    CueScan { hits }
}

impl CueScan {
    /// Whether the pattern at `at` (its loose form matched) matches `text`.
    fn found(&self, at: usize, p: &Pattern, text: &str) -> bool {
        // the patterns cannot fail at run time (no backtracking limit)
        self.hits.contains(PatternID::new_unchecked(at)) && p.exact.is_match(text).unwrap_or(false)
    }
}

/// Whether a query asks for help or advice (see `REQUEST`).
pub fn asks_for_help(query: &str) -> bool {
    asks_for_help_scanned(query, &scan(query))
}

/// `asks_for_help` with the query's scan.
pub fn asks_for_help_scanned(query: &str, scan: &CueScan) -> bool {
    scan.found(REQUEST_AT, &PATTERNS.request, query)
}

/// Whether a query asks for a summary or an overview (see `SUMMARY`).
pub fn asks_for_summary(query: &str) -> bool {
    asks_for_summary_scanned(query, &scan(query))
}

/// `asks_for_summary` with the query's scan.
pub fn asks_for_summary_scanned(query: &str, scan: &CueScan) -> bool {
    scan.found(SUMMARY_AT, &PATTERNS.summary, query)
}

/// Whether a query asks what the one who answers it said before (see
/// `ANSWERER_SAID`).
pub fn asks_what_answerer_said(query: &str) -> bool {
    asks_what_answerer_said_scanned(query, &scan(query))
}

/// `asks_what_answerer_said` with the query's scan.
pub fn asks_what_answerer_said_scanned(query: &str, scan: &CueScan) -> bool {
    scan.found(ANSWERER_SAID_AT, &PATTERNS.answerer_said, query)
}

/// Whether a query with these cues asks for a time, so that a turn stating
/// one may be what it wants: any time cue but the present's alone. A query
/// that asks only what holds now ("now", "currently", "still") wants the
/// current fact, which validity decides, not a turn that names some date; a
/// recent event ("recently", "the latest") is still asked for by its time.
pub fn asks_for_a_time(cues: &TimeCues) -> bool {
    cues.asks_when || cues.cues.iter().any(|c| *c != "present")
}

/// What `query_time_cues` found in a query (see `jevmem.temporal.TimeCues`).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeCues {
    /// `score` >= 0.5.
    pub temporal: bool,
    /// The temporal need in [0, 1]: the strongest cue's weight (0.85 at
    /// least when the query names a time).
    pub score: f64,
    pub asks_when: bool,
    pub asks_duration: bool,
    pub asks_order: bool,
    pub recency: bool,
    /// The cues found, in table order ("explicit_time" last).
    pub cues: Vec<&'static str>,
    /// The times the query names (relative ones only with `now`).
    pub refs: Vec<GroundedRef>,
    /// The hull `[start, end)` of `refs`.
    pub constraint: Option<(i64, i64)>,
}

/// Whether `query` asks about time, and the times it names, grounded
/// against `now` (without it only absolute times are kept). An invalid
/// `now` (outside the calendar) is an error.
pub fn query_time_cues(query: &str, now: Option<i64>) -> Result<TimeCues> {
    query_time_cues_scanned(query, now, &scan(query))
}

/// `query_time_cues` with the query's scan.
pub fn query_time_cues_scanned(query: &str, now: Option<i64>, scan: &CueScan) -> Result<TimeCues> {
    let p = &*PATTERNS;
    let mut cues: Vec<&'static str> = Vec::new();
    let mut families: Vec<&'static str> = Vec::new();
    let mut score: f64 = 0.0;
    for (at, ((name, family, weight, _), rx)) in CUES.iter().zip(&p.cues).enumerate() {
        if scan.found(at, rx, query) {
            if *name == "when_inner" && cues.contains(&"when") {
                continue;
            }
            cues.push(name);
            families.push(family);
            score = score.max(*weight);
        }
    }
    let refs: Vec<GroundedRef> = ground(query, now.unwrap_or(NO_NOW_ANCHOR))?
        .into_iter()
        .filter(|r| now.is_some() || !r.relative)
        .collect();
    if !refs.is_empty() {
        cues.push("explicit_time");
        score = score.max(0.85);
    }
    let constraint = refs
        .iter()
        .map(|r| r.start)
        .min()
        .zip(refs.iter().map(|r| r.end).max());
    let family = |f: &str| families.contains(&f);
    let asks_when = family("when")
        && [
            "when",
            "since_when",
            "what_time",
            "on_what_date",
            "when_inner",
        ]
        .iter()
        .any(|c| cues.contains(c));
    let recency =
        family("recency") || (cues.contains(&"first_last") && scan.found(LAST_AT, &p.last, query));
    Ok(TimeCues {
        temporal: score >= 0.5,
        score,
        asks_when,
        asks_duration: family("duration"),
        asks_order: family("order"),
        recency,
        cues,
        refs,
        constraint,
    })
}

/// Whether the query speaks in a present tense of its own: a present-tense
/// auxiliary before any report of what someone said ("which plans am I
/// making, and which did I mention": yes; "which days did I say my kids
/// have", "how many sizes have I mentioned": no, the tense is the report's;
/// "what did I do": no, the "do" is a past question's verb).
fn own_present_tense(query: &str, scan: &CueScan) -> bool {
    let p = &*PATTERNS;
    // the first match of a pattern whose loose form the scan found
    let first = |at: usize, pattern: &Pattern| {
        scan.hits
            .contains(PatternID::new_unchecked(at))
            .then(|| pattern.exact.find(query).ok().flatten().map(|m| m.start()))
            .flatten()
    };
    if !scan.hits.contains(PatternID::new_unchecked(TENSE_AT)) {
        return false;
    }
    // the first auxiliary that is no past question's verb ("did I do")
    let tense = p
        .tense
        .exact
        .find_iter(query)
        .filter_map(|m| m.ok())
        .find(|m| !past_main_verb(query, m.start(), m.as_str()))
        .map(|m| m.start());
    let Some(tense) = tense else {
        return false;
    };
    first(REPORTED_AT, &p.reported).is_none_or(|report| tense < report)
}

/// Whether the "do" or "have" at `start` is the main verb of a question in
/// the past ("what did I do", "did you have"): its tense is the "did".
fn past_main_verb(query: &str, start: usize, word: &str) -> bool {
    ["do", "have"].iter().any(|w| word.eq_ignore_ascii_case(w))
        && PATTERNS
            .did_before
            .exact
            .is_match(&query[..start])
            .unwrap_or(false)
}

/// The time a query wants facts to hold at: a time it names (its window);
/// then words that point before a change; then present words, or a
/// present tense of the query's own, not of a report it asks about (at
/// `now`, else the latest state); otherwise none.
pub fn query_fact_time(query: &str, constraint: Option<(i64, i64)>, now: Option<i64>) -> FactTime {
    query_fact_time_scanned(query, constraint, now, &scan(query))
}

/// `query_fact_time` with the query's scan.
pub fn query_fact_time_scanned(
    query: &str,
    constraint: Option<(i64, i64)>,
    now: Option<i64>,
    scan: &CueScan,
) -> FactTime {
    let p = &*PATTERNS;
    if let Some((lo, hi)) = constraint {
        return FactTime::Window(lo, hi);
    }
    if scan.found(PAST_AT, &p.past, query) {
        return FactTime::Past;
    }
    if scan.found(PRESENT_AT, &p.present, query) || own_present_tense(query, scan) {
        return FactTime::Present(now);
    }
    FactTime::Neutral
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every pattern's Python source, in the scan's order.
    fn sources() -> Vec<&'static str> {
        CUES.iter().map(|c| c.3).chain(AFTER_CUES).collect()
    }

    /// Words of the patterns, near misses, and characters that case
    /// folding maps onto ASCII letters (Kelvin sign, long s, dotted I).
    const WORDS: [&str; 33] = [
        "summarize",
        "recap",
        "when",
        "When",
        "since",
        "what",
        "date",
        "day of the week",
        "how",
        "long",
        "ago",
        "many",
        "times",
        "before",
        "prior to",
        "first",
        "LAST",
        "latest",
        "now",
        "is",
        "isn't",
        "can you",
        "help me",
        "chronological",
        "used to",
        "recently",
        "\u{212a}",
        "\u{17f}",
        "\u{130}",
        "snow",
        "whenever",
        "?",
        ",",
    ];

    proptest! {
        /// The one-pass scan finds exactly the patterns whose loose form,
        /// compiled alone (as each was searched before), matches the query.
        #[test]
        fn the_scan_matches_each_loose_form_alone(
            words in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(WORDS.to_vec()).prop_map(String::from),
                    "[a-zA-Z\u{e0}-\u{ff}]{1,6}",
                ],
                0..12,
            ),
            glue in proptest::collection::vec(prop_oneof![Just(" "), Just(""), Just("  "), Just("-")], 12),
        ) {
            let q: String = words.iter().zip(&glue).flat_map(|(w, g)| [w.as_str(), *g]).collect();
            let got = scan(&q);
            for (at, py) in sources().into_iter().enumerate() {
                let alone = crate::grounding::try_compile(&crate::grounding::loose_form(py))
                    .unwrap()
                    .is_match(&q)
                    .unwrap();
                prop_assert_eq!(got.hits.contains(PatternID::new_unchecked(at)), alone, "{} in {:?}", py, q);
            }
        }
    }

    #[test]
    fn cues_of_plain_questions() {
        let c = query_time_cues("When did Caroline go to the support group?", None).unwrap();
        assert_eq!(c.cues, vec!["when"]);
        assert!(c.asks_when && c.temporal && c.score == 0.95);
        let c = query_time_cues("How long ago was Caroline's 18th birthday?", None).unwrap();
        assert!(c.asks_duration && !c.asks_when);
        let c = query_time_cues("What did Melanie paint in 2022?", None).unwrap();
        assert_eq!(c.cues, vec!["explicit_time"]);
        assert!(c.constraint.is_some());
        let c = query_time_cues("What is Caroline's identity?", None).unwrap();
        assert!(c.cues.is_empty() && !c.temporal && c.score == 0.0);
        // relative times only with now
        assert!(query_time_cues("what did I eat yesterday", None)
            .unwrap()
            .refs
            .is_empty());
        assert_eq!(
            query_time_cues("what did I eat yesterday", Some(1_700_000_000))
                .unwrap()
                .refs
                .len(),
            1
        );
        assert!(query_time_cues("when", Some(i64::MAX)).is_err());
    }

    #[test]
    fn fact_times() {
        assert_eq!(
            query_fact_time("What milk did she drink before?", None, None),
            FactTime::Past
        );
        assert_eq!(
            query_fact_time("What milk does she drink?", None, Some(5)),
            FactTime::Present(Some(5))
        );
        assert_eq!(
            query_fact_time("What milk?", Some((1, 2)), None),
            FactTime::Window(1, 2)
        );
        assert_eq!(query_fact_time("Milk?", None, None), FactTime::Neutral);
        // a report's own present tense asks for no time; the query's own does
        for q in [
            "Which days did I say my kids have swimming?",
            "How many sizes have I mentioned?",
            "What did you recommend for the cache I have?",
            "Which cities has she told you she likes?",
            // "do"/"have" after "did": the question is in the past
            "What did I do?",
            "What did I have for dinner?",
            "What didn't Anna have?",
        ] {
            assert_eq!(query_fact_time(q, None, None), FactTime::Neutral, "{q}");
        }
        for q in [
            "Which milk did I say I drink now?",
            "Which plans am I making, and which did I mention?",
            "What snacks do you recommend?",
            "What did I do, and what do I have?",
        ] {
            assert_eq!(
                query_fact_time(q, None, None),
                FactTime::Present(None),
                "{q}"
            );
        }
    }
}
