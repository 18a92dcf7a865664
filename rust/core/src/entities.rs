//! Light, deterministic entity extraction (no LLM) and query-to-entity
//! matching, under `jevmem.entities`, whose module docstring states the rules.
//! It replaced a Python implementation, kept as the tests' oracle
//! (`tests/support/entities_reference.py`), and must agree with it id for id,
//! since exact shared ids are what create entity edges; `tests/entities_oracle.rs`
//! and the Python tests check this on the development data.
//!
//! Python works on code points and Rust on bytes: positions here are byte
//! offsets, used only for ordering, which the two share.
//!
//! Known differences from the Python, on exotic input only: code points
//! that Python 3.11's Unicode (14.0) leaves unassigned but Rust's newer
//! Unicode assigns may differ in case or casefolding (see [`pystr`]). The
//! typed signatures leave out what the Python skips at run time (non-string
//! `extra` items or provenance values), and a provenance given as pairs is
//! taken as a mapping: keys are expected to be distinct.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

use crate::hashing::ShortKeySet;

pub mod pystr;
mod pyunicode;

use pystr::{casefold, casefold_into, is_space, is_word};

// ------------------------------------------------------------------ vocabularies
// Sorted (byte order), a unit test keeps them so; the ones read per token
// are looked up as hash sets (`WordSet`), the rest by binary search.

/// Pronouns and other function words: never a name, wherever they stand.
#[rustfmt::skip]
static FUNCTION_WORDS: &[&str] = &[
    "a", "about", "above", "across", "after", "again", "against", "ah", "all", "along", "also",
    "although", "am", "among", "an", "and", "another", "any", "are", "aren't", "around", "as",
    "at", "be", "because", "been", "before", "behind", "being", "below", "between", "beyond",
    "both", "but", "by", "bye", "can", "can't", "could", "couldn't", "did", "didn't", "do", "does",
    "doesn't", "doing", "don't", "down", "during", "each", "either", "even", "every", "few", "for",
    "from", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll",
    "he's", "hello", "her", "here", "here's", "hers", "herself", "hey", "hi", "him", "himself",
    "his", "how", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "inside", "into", "is", "isn't",
    "it", "it'll", "it's", "its", "itself", "just", "let's", "many", "may", "me", "might", "mine",
    "more", "most", "much", "must", "my", "myself", "near", "neither", "no", "none", "nope", "nor",
    "not", "now", "of", "off", "oh", "ok", "okay", "on", "one", "ones", "only", "onto", "or",
    "other", "ought", "our", "ours", "ourselves", "out", "outside", "over", "per", "really",
    "shall", "she", "she'd", "she'll", "she's", "should", "shouldn't", "since", "so", "some",
    "still", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves",
    "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this",
    "those", "though", "through", "till", "to", "too", "toward", "towards", "under", "unless",
    "until", "up", "upon", "us", "very", "via", "was", "wasn't", "we", "we'd", "we'll", "we're",
    "we've", "were", "weren't", "what", "what's", "whatever", "when", "where", "whereas",
    "whether", "which", "whichever", "while", "who", "who's", "whoever", "whom", "whose", "why",
    "will", "with", "without", "won't", "would", "wouldn't", "yeah", "yep", "yes", "yet", "you",
    "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves",
];

/// Weekdays, months and relative days: capitalised, yet not entities.
#[rustfmt::skip]
static CALENDAR_WORDS: &[&str] = &[
    "apr", "april", "aug", "august", "dec", "december", "feb", "february", "fri", "friday", "jan",
    "january", "jul", "july", "jun", "june", "mar", "march", "may", "mon", "monday", "nov",
    "november", "oct", "october", "sat", "saturday", "sep", "sept", "september", "sun", "sunday",
    "thu", "thur", "thurs", "thursday", "today", "tomorrow", "tonight", "tue", "tues", "tuesday",
    "wed", "wednesday", "yesterday",
];

/// Common words that are capitalised only because they open a sentence.
#[rustfmt::skip]
static SENTENCE_STARTERS: &[&str] = &[
    "about", "absolutely", "actually", "after", "afterwards", "again", "agreed", "ah", "aha",
    "almost", "alright", "also", "although", "always", "amazing", "and", "animals", "anything",
    "anytime", "anyway", "anyways", "apparently", "appreciate", "art", "as", "at", "aw", "awesome",
    "aww", "awww", "back", "basically", "be", "because", "been", "before", "being", "besides",
    "best", "bet", "better", "big", "books", "both", "brave", "brilliant", "btw", "bummer", "but",
    "by", "can", "care", "catch", "cause", "certainly", "challenges", "change", "chat", "check",
    "cheers", "clay", "come", "congrats", "congratulations", "contemporary", "cool", "could",
    "count", "crazy", "create", "currently", "cute", "dance", "dear", "definitely", "did", "do",
    "does", "don't", "done", "during", "each", "earlier", "either", "enjoy", "especially", "even",
    "eventually", "ever", "every", "everyone", "everything", "exactly", "excellent", "excited",
    "expression", "family", "fantastic", "feel", "feeling", "feels", "finally", "fingers", "first",
    "for", "fortunately", "from", "fun", "funny", "game", "gather", "gee", "get", "getting",
    "give", "glad", "go", "going", "gonna", "good", "gosh", "got", "gotta", "great", "guess",
    "guys", "ha", "haha", "happy", "hard", "has", "have", "having", "he", "hello", "hey", "hi",
    "highly", "hmm", "honestly", "hope", "hopefully", "how", "however", "huh", "i", "if",
    "imagine", "impressive", "in", "indeed", "interesting", "is", "it", "its", "just", "keep",
    "kids", "kind", "last", "lately", "later", "let", "life", "like", "literally", "little", "lol",
    "long", "look", "looking", "looks", "lost", "lots", "love", "lovely", "luckily", "lucky",
    "made", "make", "makes", "making", "man", "maybe", "me", "meanwhile", "might", "mine", "mixed",
    "mm", "mmm", "moments", "more", "moreover", "most", "mostly", "much", "music", "my", "nah",
    "naturally", "nature", "nearly", "need", "never", "nevertheless", "new", "next", "nice", "no",
    "nope", "not", "nothing", "now", "of", "oh", "ok", "okay", "omg", "on", "once", "one", "only",
    "oof", "oops", "or", "other", "otherwise", "ouch", "our", "overall", "people", "perfect",
    "perhaps", "personally", "pets", "phew", "please", "plus", "possibly", "pretty", "probably",
    "proud", "quite", "rather", "ready", "really", "recently", "remember", "reminds", "respect",
    "right", "rock", "same", "say", "see", "seems", "seriously", "setbacks", "she", "should",
    "show", "since", "small", "so", "some", "someday", "somehow", "someone", "something",
    "sometimes", "soon", "sorry", "sounds", "speaking", "spill", "stay", "still", "strong",
    "stuff", "such", "super", "sure", "sweet", "take", "takes", "taking", "talk", "tell", "thank",
    "thankfully", "thanks", "that", "that's", "the", "then", "there", "therefore", "these", "they",
    "thing", "things", "think", "this", "those", "though", "thought", "thoughts", "thx", "time",
    "to", "today", "together", "too", "totally", "tough", "true", "truly", "try", "trying", "ugh",
    "um", "umm", "unconditional", "unfortunately", "until", "up", "us", "usually", "very", "wait",
    "wanna", "want", "wanted", "was", "watch", "watching", "way", "we", "well", "were", "what",
    "whatever", "when", "whenever", "where", "wherever", "whether", "which", "while", "who",
    "whoa", "why", "will", "wish", "with", "without", "woah", "won't", "wonderful", "woohoo",
    "wow", "yay", "yea", "yeah", "yes", "yesterday", "yet", "you", "young", "your", "yum", "yup",
];

/// Titles dropped from the front of a name ("Dr Smith" -> `smith`).
#[rustfmt::skip]
static TITLES: &[&str] = &[
    "capt", "col", "dame", "dr", "fr", "gen", "lady", "lord", "miss", "mr", "mrs", "ms", "mt",
    "mx", "prof", "rev", "sgt", "sir", "st",
];

/// Lowercase words that may join two capitalised ones inside a name.
#[rustfmt::skip]
static CONNECTORS: &[&str] = &[
    "&", "da", "de", "del", "der", "di", "du", "for", "la", "le", "of", "the", "van", "von",
];

/// Chat acronyms in capitals that are not entities.
#[rustfmt::skip]
static CHAT_ACRONYMS: &[&str] = &[
    "asap", "brb", "btw", "dr", "fomo", "fyi", "idk", "imho", "imo", "irl", "lmao", "lol", "np",
    "ok", "omg", "pls", "plz", "rofl", "tbh", "thx", "tl", "ty", "yolo",
];

/// Provenance keys whose values name an entity (a person, an agent, a place).
#[rustfmt::skip]
pub static ENTITY_PROVENANCE_KEYS: &[&str] = &[
    "addressee", "agent", "author", "entities", "entity", "location", "mentions", "name",
    "organisation", "organization", "participant", "participants", "person", "place", "recipient",
    "sender", "speaker", "user", "user_name", "username",
];

/// Of those, the keys whose value may list several ids ("Ann, Bob; Carl").
#[rustfmt::skip]
pub static LIST_PROVENANCE_KEYS: &[&str] = &[
    "entities", "mentions", "participants",
];

// ------------------------------------------------------------------ extraction

fn contains(set: &[&str], word: &str) -> bool {
    set.binary_search(&word).is_ok()
}

/// Vocabularies as hash sets for the per-token lookups: one short hash
/// where a binary search compared a dozen strings (the keys are fixed, so
/// no input can crowd a bucket).
type WordSet = ShortKeySet<&'static str>;

fn word_set(lists: &[&[&'static str]]) -> WordSet {
    lists.iter().flat_map(|l| l.iter().copied()).collect()
}

/// Words that are never a name, capitalised or not.
static NOT_NAMES: LazyLock<WordSet> =
    LazyLock::new(|| word_set(&[FUNCTION_WORDS, CALENDAR_WORDS, CHAT_ACRONYMS]));
static STARTERS: LazyLock<WordSet> = LazyLock::new(|| word_set(&[SENTENCE_STARTERS]));
static TITLE_WORDS: LazyLock<WordSet> = LazyLock::new(|| word_set(&[TITLES]));
static JOINERS: LazyLock<WordSet> = LazyLock::new(|| word_set(&[CONNECTORS]));

/// The apostrophes that `normalise` makes straight.
#[inline]
fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{2018}' | '\u{2bc}')
}

/// `s` with curly apostrophes made straight, casefolded, with its
/// whitespace runs collapsed to one space and no leading/trailing space.
fn fold_and_squash(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in pystr::split(s) {
        if !out.is_empty() {
            out.push(' ');
        }
        if word.chars().any(is_apostrophe) {
            let straight: String = word
                .chars()
                .map(|c| if is_apostrophe(c) { '\'' } else { c })
                .collect();
            casefold_into(&straight, &mut out);
        } else {
            casefold_into(word, &mut out);
        }
    }
    out
}

/// The canonical id for a name: trimmed, casefolded (Python's
/// `str.casefold`), single-spaced, curly apostrophes made straight and one
/// trailing possessive (`'s` or `'`) removed.
///
/// ```
/// use jevmem_core::entities::normalise;
/// assert_eq!(normalise("  New   York "), "new york");
/// assert_eq!(normalise("Caroline\u{2019}s"), "caroline");
/// assert_eq!(normalise("Straße"), "strasse");
/// ```
pub fn normalise(s: &str) -> String {
    let out = fold_and_squash(s);
    let cut = if let Some(rest) = out.strip_suffix("'s") {
        rest
    } else if let Some(rest) = out.strip_suffix('\'') {
        rest
    } else {
        return out;
    };
    pystr::strip(cut).to_string()
}

/// Python's `tok.translate(_APOSTROPHES)` then a trailing `'s`, `'S` or `'`
/// cut from the original token.
fn strip_possessive(tok: &str) -> &str {
    let mut rev = tok.char_indices().rev();
    match rev.next() {
        Some((i, c)) if is_apostrophe(c) => &tok[..i],
        Some((_, 's' | 'S')) => match rev.next() {
            Some((i, c)) if is_apostrophe(c) => &tok[..i],
            _ => tok,
        },
        _ => tok,
    }
}

/// Capitalised: an upper-case first letter, or an inner capital right after
/// a lower-case first one ("iPhone", "eBay").
fn is_capitalised(tok: &str) -> bool {
    let mut chars = tok.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    pystr::char_is_upper(first)
        || (pystr::char_is_lower(first) && chars.next().is_some_and(pystr::char_is_upper))
}

fn is_acronym(tok: &str) -> bool {
    let core = tok.trim_end_matches('+');
    core.chars().nth(1).is_some() && pystr::is_upper(core) && core.chars().any(pystr::is_alpha)
}

/// A casefolded word ending as a contraction ("I'll", "Don't").
fn is_contraction(key: &str) -> bool {
    ["'re", "'ve", "'d", "'ll", "'m", "'t", "'all", "n't"]
        .iter()
        .any(|end| key.ends_with(end))
}

/// Byte spans of the tokens of Python's `_TOKEN` regex: a handle or tag
/// (`@mel_r`, `#pride`), a word that starts with a letter and may hold
/// apostrophes, hyphens, `&` and `+`, or a lone `&`.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    // walked by byte offset, each char decoded where it is read (no table
    // of every char's offset: a long turn's was most of the scan)
    let next = |p: usize| text[p..].chars().next().map(|c| (c, p + c.len_utf8()));
    let mut out = Vec::with_capacity(text.len() / 6);
    let mut i = 0;
    while let Some((c, after)) = next(i) {
        if c == '@' || c == '#' {
            match next(after) {
                Some((d, word_end)) if is_word(d) => {
                    // `[@#]\w[\w.-]*\w`, else `[@#]\w`: the greedy run backs
                    // off to its last word character
                    let mut end = word_end;
                    let mut j = word_end;
                    while let Some((d, after_d)) = next(j) {
                        if is_word(d) {
                            end = after_d;
                        } else if d != '.' && d != '-' {
                            break;
                        }
                        j = after_d;
                    }
                    out.push((i, end));
                    i = end;
                }
                _ => i = after,
            }
            continue;
        }
        if pystr::is_word_start(c) {
            // `[^\W\d_](?:[\w'’&+-]*[\w+])?`: the run ends at its last `\w` or `+`
            let mut end = after;
            let mut j = after;
            while let Some((d, after_d)) = next(j) {
                if is_word(d) || d == '+' {
                    end = after_d;
                } else if !matches!(d, '\'' | '\u{2019}' | '&' | '-') {
                    break;
                }
                j = after_d;
            }
            out.push((i, end));
            i = end;
            continue;
        }
        if c == '&' {
            out.push((i, after));
        }
        i = after;
    }
    out
}

/// Python's `_SENT_BREAK` searched in the gap between two tokens: a
/// sentence-ending or opening mark, a newline, a dash, or a spaced hyphen.
fn is_sentence_break(gap: &str) -> bool {
    if gap.chars().any(|c| {
        matches!(
            c,
            '.' | '!'
                | '?'
                | ':'
                | ';'
                | '\n'
                | '"'
                | '\u{201c}'
                | '\u{2018}'
                | '('
                | '['
                | '\u{2014}'
                | '\u{2013}'
        )
    }) {
        return true;
    }
    if gap.trim_start_matches(is_space).starts_with('-') {
        return true;
    }
    if !gap.contains('-') {
        return false;
    }
    let chars: Vec<char> = gap.chars().collect();
    chars
        .windows(3)
        .any(|w| is_space(w[0]) && w[1] == '-' && is_space(w[2]))
}

/// The state of one pass over a text: the capitalised run being built and the
/// connectors waiting for a capitalised word to join it.
struct Scan<'a> {
    run: Vec<&'a str>,
    pending: Vec<&'a str>,
    out: Vec<String>,
}

impl Scan<'_> {
    /// Ends the current run and records the name it makes, if any.
    fn flush(&mut self) {
        if self.run.is_empty() {
            return; // pending only grows beside an open run
        }
        self.pending.clear();
        let ident = name_of(&self.run);
        self.run.clear();
        if let Some(ident) = ident {
            self.out.push(ident);
        }
    }
}

fn folded_in(set: &WordSet, tok: &str) -> bool {
    set.contains(casefold(tok).as_str())
}

/// The id a run of capitalised words names, after dropping leading titles,
/// a lone title or initial, and trailing connectors.
fn name_of(run: &[&str]) -> Option<String> {
    let mut parts = run;
    while parts.len() > 1 && folded_in(&TITLE_WORDS, parts[0]) && !folded_in(&JOINERS, parts[1]) {
        parts = &parts[1..];
    }
    if parts.len() == 1 && (folded_in(&TITLE_WORDS, parts[0]) || parts[0].chars().nth(1).is_none())
    {
        return None;
    }
    while let Some((last, rest)) = parts.split_last() {
        if !folded_in(&JOINERS, last) {
            break;
        }
        parts = rest;
    }
    let (&last, rest) = parts.split_last()?;
    let ident = if rest.is_empty() && is_acronym(last) {
        normalise(strip_possessive(last).trim_end_matches('+'))
    } else {
        let mut name = String::new();
        for part in rest {
            name.push_str(part);
            name.push(' ');
        }
        name.push_str(strip_possessive(last));
        normalise(&name)
    };
    (!ident.is_empty()).then_some(ident)
}

/// The casefolded words of `text` that start in lower case (handles, tags and
/// `&` never do). One allocation per distinct word: most repeat.
fn lower_words<'t>(text: &'t str, toks: &[(usize, usize)]) -> ShortKeySet<Cow<'t, str>> {
    // a per-call table: the fast hasher (see `hashing`), sized for the
    // text's words at once (growing it rehashed a long text's table often)
    let mut set = ShortKeySet::with_capacity_and_hasher(toks.len(), Default::default());
    let mut buf = String::new();
    for &(s, e) in toks {
        let w = &text[s..e];
        if w.chars().next().is_some_and(pystr::char_is_lower) {
            // an ASCII word without capitals is its own case fold: borrowed
            if w.is_ascii() && !w.bytes().any(|b| b.is_ascii_uppercase()) {
                set.insert(Cow::Borrowed(w));
                continue;
            }
            buf.clear();
            casefold_into(w, &mut buf);
            if !set.contains(buf.as_str()) {
                set.insert(Cow::Owned(buf.clone()));
            }
        }
    }
    set
}

/// The ids found in `text`, in the order the Python appends them.
fn text_entities(text: &str) -> Vec<String> {
    let toks = tokens(text);
    if toks.is_empty() {
        return Vec::new();
    }
    let is_word_tok =
        |&&(s, _): &&(usize, usize)| !matches!(text.as_bytes()[s], b'@' | b'#' | b'&');
    let mut n_words = 0usize;
    let mut n_loud = 0usize;
    for &(s, e) in toks.iter().filter(is_word_tok) {
        n_words += 1;
        let w = &text[s..e];
        if w.chars().nth(1).is_some() && pystr::is_upper(w) {
            n_loud += 1;
        }
    }
    let shouting = n_words >= 3 && n_loud * 2 > n_words;
    // the words seen in lower case, built on first need (most texts never ask)
    let mut lower_seen: Option<ShortKeySet<Cow<str>>> = None;

    let mut scan = Scan {
        run: Vec::new(),
        pending: Vec::new(),
        out: Vec::new(),
    };
    let lead = text.len() - text.trim_start_matches(is_space).len();
    let mut key = String::new();
    let mut prev_end = 0;
    for &(start, end) in &toks {
        let tok = &text[start..end];
        let gap = &text[prev_end..start];
        prev_end = end;
        let sentence_start = if gap == " " {
            start <= lead
        } else {
            if gap.chars().any(|c| !is_space(c)) {
                scan.flush(); // any punctuation between two words ends a name
            }
            start <= lead || is_sentence_break(gap)
        };
        let first = text.as_bytes()[start];
        if first == b'@' || first == b'#' {
            scan.flush();
            scan.out.push(normalise(tok));
            continue;
        }
        if shouting {
            continue;
        }
        let bare = strip_possessive(tok);
        if tok == "&" || !is_capitalised(tok) {
            let joins = !scan.run.is_empty()
                && (tok == "&" || {
                    key.clear();
                    casefold_into(bare, &mut key);
                    JOINERS.contains(key.as_str())
                });
            if joins {
                scan.pending.push(tok);
            } else {
                scan.flush();
            }
            continue;
        }
        key.clear();
        casefold_into(bare, &mut key);
        if NOT_NAMES.contains(key.as_str()) || is_contraction(&key) {
            scan.flush();
            continue;
        }
        if sentence_start && scan.run.is_empty() {
            let common = STARTERS.contains(key.as_str())
                || (key.chars().nth(5).is_some() && key.ends_with("ing")) // "Seeing"
                || lower_seen
                    .get_or_insert_with(|| lower_words(text, &toks))
                    .contains(key.as_str());
            if common {
                continue;
            }
        }
        if !scan.pending.is_empty() {
            let pending = std::mem::take(&mut scan.pending);
            scan.run.extend(pending);
        }
        scan.run.push(tok);
        if bare.len() != tok.len() {
            scan.flush(); // a possessive ends the name: "Caroline's Mom"
        }
    }
    scan.flush();
    scan.out
}

/// Ids named by provenance values under the entity keys, in the given order.
fn provenance_entities(provenance: &[(String, String)], out: &mut Vec<String>) {
    for (key, value) in provenance {
        let k = casefold(pystr::strip(key));
        if !contains(ENTITY_PROVENANCE_KEYS, &k) {
            continue;
        }
        if contains(LIST_PROVENANCE_KEYS, &k) {
            out.extend(
                value
                    .split([',', ';'])
                    .map(normalise)
                    .filter(|v| !v.is_empty()),
            );
        } else {
            let v = normalise(value);
            if !v.is_empty() {
                out.push(v);
            }
        }
    }
}

/// Normalised entity ids for one observation, without duplicates, in a
/// stable order: the `speaker`, then the text's entities by position
/// (handles and tags, capitalised names, acronyms), then the ids in
/// `provenance` (pairs in the mapping's order), then `extra`.
///
/// ```
/// use jevmem_core::entities::extract_entities;
/// let ids = extract_entities(
///     "I went to a LGBTQ support group in New York with Mel.",
///     Some("Caroline"),
///     &[],
///     &[],
/// );
/// assert_eq!(ids, ["caroline", "lgbtq", "new york", "mel"]);
/// ```
pub fn extract_entities(
    text: &str,
    speaker: Option<&str>,
    provenance: &[(String, String)],
    extra: &[String],
) -> Vec<String> {
    let mut ids = Vec::new();
    if let Some(speaker) = speaker.filter(|s| !s.is_empty()) {
        ids.push(normalise(speaker));
    }
    if !text.is_empty() {
        ids.extend(text_entities(text));
    }
    provenance_entities(provenance, &mut ids);
    ids.extend(extra.iter().map(|x| normalise(x)));
    let mut seen: ShortKeySet<String> =
        ShortKeySet::with_capacity_and_hasher(ids.len(), Default::default());
    ids.retain(|id| !id.is_empty() && seen.insert(id.clone()));
    ids
}

/// The runs of word characters (`\w+`) in `s`.
fn word_runs(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !is_word(c)).filter(|w| !w.is_empty())
}

/// The `known` ids (normalised) that `query` mentions, in order of first
/// mention: case-insensitive, whole words, whitespace-insensitive,
/// possessives included ("Caroline's" mentions `caroline`). An occurrence
/// inside a longer mentioned id's occurrence does not count ("New York" does
/// not mention `york`).
///
/// ```
/// use jevmem_core::entities::mentions;
/// let known = ["york".to_string(), "New York".to_string(), "mel".to_string()];
/// assert_eq!(mentions("Did Mel's trip to New   York go well?", &known), ["mel", "new york"]);
/// ```
pub fn mentions(query: &str, known: &[String]) -> Vec<String> {
    let q = fold_and_squash(query);
    if q.is_empty() {
        return Vec::new();
    }
    let qwords: HashSet<&str> = word_runs(&q).collect();
    let mut idents: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut hits: Vec<(usize, usize, usize)> = Vec::new(); // (start, end, index into idents)
    for raw in known {
        let ident = normalise(raw);
        if ident.is_empty() || seen.contains(&ident) {
            continue;
        }
        seen.insert(ident.clone());
        // every word of a whole-word occurrence is a word of the query
        if !word_runs(&ident).all(|w| qwords.contains(w)) {
            continue;
        }
        let (Some(first), Some(last)) = (ident.chars().next(), ident.chars().next_back()) else {
            continue;
        };
        // an id that starts with a word character must not follow a word
        // character, `@` or `#`; one that ends with one must not precede one
        let guard_left = is_word(first);
        let guard_right = is_word(last);
        let index = idents.len();
        let mut from = 0;
        let mut found = false;
        while let Some(off) = q[from..].find(ident.as_str()) {
            let start = from + off;
            let end = start + ident.len();
            let left_ok = q[..start]
                .chars()
                .next_back()
                .is_none_or(|b| !(is_word(b) || (guard_left && (b == '@' || b == '#'))));
            let right_ok = !guard_right || q[end..].chars().next().is_none_or(|a| !is_word(a));
            if left_ok && right_ok {
                hits.push((start, end, index));
                found = true;
                from = end; // matches do not overlap
            } else {
                from = start + first.len_utf8();
            }
        }
        if found {
            idents.push(ident);
        }
    }
    hits.sort_unstable();
    let mut kept: Vec<(usize, usize)> = Vec::new(); // (first start, index)
    let mut kept_ids: HashSet<usize> = HashSet::new();
    for &(start, end, index) in &hits {
        let inside_longer = hits
            .iter()
            .any(|&(s, e, _)| s <= start && end <= e && e - s > end - start);
        if !inside_longer && kept_ids.insert(index) {
            kept.push((start, index));
        }
    }
    kept.sort_by_key(|&(start, _)| start);
    kept.into_iter().map(|(_, i)| idents[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(text: &str) -> Vec<String> {
        extract_entities(text, None, &[], &[])
    }

    /// `tokens` as first written: over a table of every char's offset.
    fn tokens_by_char_table(text: &str) -> Vec<(usize, usize)> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let n = chars.len();
        let at = |i: usize| if i < n { chars[i].0 } else { text.len() };
        let mut out = Vec::new();
        let mut i = 0;
        while i < n {
            let c = chars[i].1;
            if c == '@' || c == '#' {
                if i + 1 < n && is_word(chars[i + 1].1) {
                    // `[@#]\w[\w.-]*\w`, else `[@#]\w`: the greedy run backs off
                    // to its last word character
                    let mut end = i + 2;
                    let mut j = i + 2;
                    while j < n {
                        let d = chars[j].1;
                        if is_word(d) {
                            end = j + 1;
                        } else if d != '.' && d != '-' {
                            break;
                        }
                        j += 1;
                    }
                    out.push((at(i), at(end)));
                    i = end;
                } else {
                    i += 1;
                }
                continue;
            }
            if pystr::is_word_start(c) {
                // `[^\W\d_](?:[\w'’&+-]*[\w+])?`: the run ends at its last `\w` or `+`
                let mut end = i + 1;
                let mut j = i + 1;
                while j < n {
                    let d = chars[j].1;
                    if is_word(d) || d == '+' {
                        end = j + 1;
                    } else if !matches!(d, '\'' | '\u{2019}' | '&' | '-') {
                        break;
                    }
                    j += 1;
                }
                out.push((at(i), at(end)));
                i = end;
                continue;
            }
            if c == '&' {
                out.push((at(i), at(i + 1)));
            }
            i += 1;
        }
        out
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn vocabularies_are_sorted_for_binary_search() {
        for set in [
            FUNCTION_WORDS,
            CALENDAR_WORDS,
            SENTENCE_STARTERS,
            TITLES,
            CONNECTORS,
            CHAT_ACRONYMS,
            ENTITY_PROVENANCE_KEYS,
            LIST_PROVENANCE_KEYS,
        ] {
            assert!(set.windows(2).all(|w| w[0] < w[1]), "{set:?}");
        }
    }

    #[test]
    fn normalise_examples() {
        assert_eq!(normalise("  New   York "), "new york");
        assert_eq!(normalise("Caroline\u{2019}s"), "caroline");
        assert_eq!(normalise("James'"), "james");
        assert_eq!(normalise("LGBTQ"), "lgbtq");
        assert_eq!(normalise(""), "");
        assert_eq!(normalise("   "), "");
        // casefold, not lowercase
        assert_eq!(normalise("STRASSE"), normalise("Straße"));
        assert_eq!(normalise("\u{1e9e}"), "ss");
        assert_eq!(normalise("ΣΑΣ"), "σασ"); // no final sigma
        assert_eq!(normalise("\u{fb01}sh"), "fish");
        // one possessive only, then trimmed
        assert_eq!(normalise("a 's"), "a");
        assert_eq!(normalise("''"), "'");
        assert_eq!(normalise("Bob\u{2bc}S"), "bob");
        // Python's whitespace includes the information separators
        assert_eq!(normalise("a\u{1f}b\u{a0}c"), "a b c");
    }

    #[test]
    fn extract_from_text_examples() {
        let cases: &[(&str, &[&str])] = &[
            (
                "I went to a LGBTQ support group in New York with Mel.",
                &["lgbtq", "new york", "mel"],
            ),
            (
                "Hey Caroline! Good to see you! I'm swamped with the kids & work.",
                &["caroline"],
            ),
            (
                "Yesterday I watched Lord of the Rings with Dr. Smith and Caroline's mom.",
                &["lord of the rings", "smith", "caroline"],
            ),
            (
                "Thanks, Melanie! This necklace is from Sweden.",
                &["melanie", "sweden"],
            ),
            (
                "I love the LGBTQ+ community and #Pride, ping @mel_r.",
                &["lgbtq", "#pride", "@mel_r"],
            ),
            (
                "We went to Bank of America on Monday in May.",
                &["bank of america"],
            ),
            (
                "My new iPhone from Barnes & Noble",
                &["iphone", "barnes & noble"],
            ),
            (
                "Caroline and Melanie met John in Paris, France.",
                &["caroline", "melanie", "john", "paris", "france"],
            ),
            ("Wow, that's awesome! Seeing you happy makes me happy.", &[]),
            ("I LOVE THIS SO MUCH #yay", &["#yay"]),
            ("OMG lol, BTW I met Tim", &["tim"]),
            ("The Beatles played in Hamburg.", &["beatles", "hamburg"]),
            (
                "On Friday we visited the Grand Canyon. It was huge.",
                &["grand canyon"],
            ),
            (
                "I'm reading Patrick Rothfuss's book.",
                &["patrick rothfuss"],
            ),
            (
                "Painting is fun. I paint every day, painting is my life.",
                &[],
            ),
            ("", &[]),
            ("   ", &[]),
        ];
        for (text, expected) in cases {
            assert_eq!(ids(text), strings(expected), "{text:?}");
        }
    }

    #[test]
    fn tricky_cases() {
        // a curly possessive ends the name
        assert_eq!(ids("I met Caroline\u{2019}s Mom."), ["caroline", "mom"]);
        // a possessive acronym, and one with a trailing plus
        assert_eq!(ids("we met NASA's team and the AI++ crowd"), ["nasa", "ai"]);
        // a title alone is nothing, a title before a connector stays
        assert_eq!(ids("we saw Mr and then St of Paris"), ["st of paris"]);
        // trailing connectors are dropped, "&" joins only before a capital
        assert_eq!(ids("see Van Halen & the band"), ["van halen"]);
        // an opener that is also seen lower-case elsewhere is no name
        assert_eq!(
            ids("Painting rocks. I like painting."),
            Vec::<String>::new()
        );
        assert_eq!(ids("Mel said hi. mel is nice."), Vec::<String>::new());
        // after a dash or an opening quote a sentence starts again
        assert_eq!(ids("we went - Anyway it was fine"), Vec::<String>::new());
        assert_eq!(ids("she said \u{201c}Great job\u{201d} to Ann"), ["ann"]);
        // contractions are not names, straight apostrophe only
        assert_eq!(ids("we said You'll see"), Vec::<String>::new());
        // handles keep dots and hyphens inside, not at their end
        assert_eq!(ids("ping @ann.b-c. now"), ["@ann.b-c"]);
        assert_eq!(ids("#a #"), ["#a"]);
        // shouting keeps only handles and tags
        assert_eq!(ids("WE ARE AT PARIS WITH @bob"), ["@bob"]);
        // an initial alone is dropped, within a run it stays
        assert_eq!(ids("we met J and then J. R. R. Tolkien"), ["tolkien"]);
        assert_eq!(ids("we met John F Kennedy"), ["john f kennedy"]);
        // a word starts after the digits
        assert_eq!(ids("we met 3Ann and Éloïse"), ["ann", "éloïse"]);
    }

    #[test]
    fn speaker_provenance_extra_order_and_dedupe() {
        let prov: Vec<(String, String)> = [
            ("session", "3"),
            ("dia_id", "D1:3"),
            ("Author", "Caroline"),
            ("participants", "Mel; Jon ,  Gina"),
            ("source", "Chat Log"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let got = extract_entities(
            "Hey Mel, Caroline here. Caroline loves Sweden.",
            Some(" Caroline "),
            &prov,
            &strings(&["Support Group", "mel"]),
        );
        assert_eq!(
            got,
            ["caroline", "mel", "sweden", "jon", "gina", "support group"]
        );
        assert_eq!(
            extract_entities("nothing here", None, &[], &strings(&["  A  B "])),
            ["a b"]
        );
    }

    #[test]
    fn mentions_examples() {
        let known = strings(&[
            "caroline",
            "New York",
            "york",
            "mel",
            "LGBTQ",
            "@mel_r",
            "lord of the rings",
        ]);
        assert_eq!(
            mentions("When did Caroline's friend visit New   York?", &known),
            ["caroline", "new york"]
        );
        assert_eq!(mentions("Does York have a team?", &known), ["york"]);
        assert!(mentions("What did Melanie say?", &known).is_empty());
        assert_eq!(
            mentions("Is mel into the LGBTQ+ scene?", &known),
            ["mel", "lgbtq"]
        );
        assert_eq!(mentions("Did @mel_r post?", &known), ["@mel_r"]);
        assert_eq!(
            mentions("Who likes Lord of the Rings?", &known),
            ["lord of the rings"]
        );
        assert!(mentions("", &known).is_empty());
        assert!(mentions("Caroline", &[]).is_empty());
        assert_eq!(
            mentions("CAROLINE\u{2019}S plan", &strings(&["Caroline"])),
            ["caroline"]
        );
        // a bare word does not match inside a handle
        assert!(mentions("ask @mel", &strings(&["mel"])).is_empty());
        // a failed boundary does not hide a later whole-word match
        assert_eq!(mentions("mels and mel", &strings(&["mel"])), ["mel"]);
        // ids that start or end with a non-word character
        assert_eq!(mentions("meet at c++ club", &strings(&["c++"])), ["c++"]);
    }

    fn names() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "Caroline", "Mel", "New York", "Sweden", "Jon", "the", "Dr.", "of", "&", "LGBTQ+",
            "@ann", "#tag", "é", "ß", "Über", "’s", "'s", "I'm", "lol", "OK", "-", ".", "\n",
            "iPhone", "42", "x",
        ])
        .prop_map(str::to_string)
    }

    fn texts() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::collection::vec(names(), 0..12).prop_map(|w| w.join(" ")),
            any::<String>(),
        ]
    }

    /// Texts heavy in what the token rule reads: handles, tags, joiners,
    /// apostrophes (straight and curly), digits and non-ASCII letters.
    fn token_texts() -> impl Strategy<Value = String> {
        prop_oneof!["[a-zA-Z0-9@#&+'’._ \\-é\u{0301}ß\u{1F600}]{0,40}", texts(),]
    }

    proptest! {
        #[test]
        fn tokens_read_by_offset_are_the_char_table_ones(text in token_texts()) {
            prop_assert_eq!(tokens(&text), tokens_by_char_table(&text));
        }

        #[test]
        fn ids_are_normal_unique_and_stable(text in texts(), speaker in prop::option::of(names())) {
            let got = extract_entities(&text, speaker.as_deref(), &[], &[]);
            let unique: HashSet<&String> = got.iter().collect();
            prop_assert_eq!(unique.len(), got.len());
            for id in &got {
                prop_assert!(!id.is_empty());
                prop_assert_eq!(&normalise(id), id);
            }
            if let Some(s) = speaker.as_deref().map(normalise).filter(|s| !s.is_empty()) {
                prop_assert_eq!(&got[0], &s);
            }
            prop_assert_eq!(&got, &extract_entities(&text, speaker.as_deref(), &[], &[]));
        }

        #[test]
        fn mentions_are_known_unique_ids(query in texts(), known in prop::collection::vec(texts(), 0..8)) {
            let got = mentions(&query, &known);
            let unique: HashSet<&String> = got.iter().collect();
            prop_assert_eq!(unique.len(), got.len());
            let normal: HashSet<String> = known.iter().map(|k| normalise(k)).collect();
            for id in &got {
                prop_assert!(normal.contains(id));
            }
        }

        #[test]
        fn extracted_names_are_mentioned(picks in prop::collection::vec(0usize..5, 1..5)) {
            let pool = ["Caroline", "Mel", "New York", "Sweden", "Jon"];
            let names: Vec<&str> = picks.iter().map(|&i| pool[i]).collect();
            let text = format!("I talked to {} today.", names.join(" and "));
            let got: HashSet<String> = mentions(&text, &ids(&text)).into_iter().collect();
            let want: HashSet<String> = names.iter().map(|n| normalise(n)).collect();
            prop_assert_eq!(got, want);
        }
    }
}
