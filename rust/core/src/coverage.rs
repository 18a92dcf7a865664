//! What the evidence asserts about whom a query asks about: each node's
//! sentences with their person marks (first person, second person, a
//! question), the names it uses other than to address someone, and from
//! them the share of the query's content words asserted about the asked
//! people and about other people ("content coverage", read by the
//! assessment). Also which query tokens the best evidence contains at all.
//!
//! The sentence marks are made once, when a node is written (`marks`), and
//! kept in the snapshot; a node without them (one without a lexical entry)
//! is read off its text, sentence by sentence, the reading the marks are
//! held to. Nothing is cached per query, so a memory's size per node does
//! not grow with the queries it answers.
//!
//! The rules are the read path's former Python ones, which stay as the
//! oracle in `tests/support/coverage_reference.py`; the character classes
//! and case folding are Python `re`'s (`entities::pystr`).

use crate::hashing::{ShortKeyMap, ShortKeySet};
use crate::marks::{self, NodeMarks};

use crate::context::speaker_of;
use crate::entities::pystr::{is_space, is_word};
use crate::error::Result;
use crate::filter::Allowed;
use crate::pair_signals::session_of;
use crate::store::MemoryStore;
use crate::style::{labelled, text_label};
use crate::text::Tokenizer;
use crate::types::{NodeId, View};

/// Words that make a sentence speak in the first person.
const FIRST_PERSON: [&str; 14] = [
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "our", "ours",
    "us",
];

/// Words that make a sentence speak to someone (the second person).
const SECOND_PERSON: [&str; 7] = [
    "you", "your", "yours", "you're", "you've", "you'll", "yourself",
];

/// Words that, right before a name, make it a form of address ("Hey Gina,").
const GREETINGS: [&str; 22] = [
    "hey",
    "hi",
    "hello",
    "thanks",
    "thank you",
    "congrats",
    "congratulations",
    "wow",
    "oh",
    "yes",
    "yeah",
    "yep",
    "sure",
    "ok",
    "okay",
    "well",
    "great",
    "bye",
    "dear",
    "aww",
    "haha",
    "omg",
];

/// How far before a name a greeting is looked for, in characters.
const GREETING_REACH: usize = 24;

/// One sentence of a node's text, as coverage reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sentence {
    /// Its tokens, in order (the store's tokenizer).
    pub words: Vec<String>,
    /// 0.5 for a question (it asserts less), else 1.
    pub weight: f64,
    pub first_person: bool,
    pub second_person: bool,
}

/// What coverage reads off one text, whatever the query.
#[derive(Clone, Debug, PartialEq)]
pub struct TextMarks {
    /// Capitalised names (lower-cased) used other than to address someone,
    /// in order of first appearance.
    pub named: Vec<String>,
    pub sentences: Vec<Sentence>,
}

/// A character as Python `re` compares it with IGNORECASE against the
/// lower-case ASCII letters and the apostrophe of the word lists above:
/// ASCII lower-cased, and the few non-ASCII characters `re` folds onto them.
#[inline]
fn fold(c: char) -> char {
    match c {
        'A'..='Z' => c.to_ascii_lowercase(),
        '\u{130}' | '\u{131}' => 'i',
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        _ => c,
    }
}

/// Whether `chars[at..]` starts with `word` (case-folded as `fold`).
fn folded_at(chars: &[char], at: usize, word: &str) -> bool {
    let mut i = at;
    for w in word.chars() {
        match chars.get(i) {
            Some(&c) if fold(c) == w => i += 1,
            _ => return false,
        }
    }
    true
}

/// A word boundary at `at` (Python `re`'s `\b`): a word character on one side only.
#[inline]
fn boundary(chars: &[char], at: usize) -> bool {
    let before = at > 0 && is_word(chars[at - 1]);
    let after = chars.get(at).is_some_and(|&c| is_word(c));
    before != after
}

/// Whether one of `words` occurs in `chars` as a whole word (case-insensitive).
/// Every word starts with a letter, so a match starts a run of word characters.
/// The words are ASCII (`w.len()` counts their chars; a test checks), so a
/// word's first byte is its first char: compared as bytes (a `starts_with`
/// per word and word start went through `memcmp`).
fn has_word(chars: &[char], words: &[&str]) -> bool {
    let mut prev_word = false;
    for (at, &c) in chars.iter().enumerate() {
        let word = is_word(c);
        if word && !prev_word {
            let first = fold(c);
            let found = first.is_ascii()
                && words.iter().any(|w| {
                    w.as_bytes().first() == Some(&(first as u8))
                        && folded_at(chars, at, w)
                        && boundary(chars, at + w.len())
                });
            if found {
                return true;
            }
        }
        prev_word = word;
    }
    false
}

/// Whether the text right before a name (`before`, trailing spaces and
/// commas already stripped) ends in a greeting, or is empty: the name then
/// addresses someone. Python's `re` form: `(?:^|\b(?:hey|...)[\s,!]*)$`.
fn greets(before: &[char]) -> bool {
    // `$` also matches before a final newline
    if before.is_empty() || before == ['\n'] {
        return true;
    }
    let mut end = before.len();
    while end > 0 && (is_space(before[end - 1]) || matches!(before[end - 1], ',' | '!')) {
        end -= 1;
    }
    GREETINGS.iter().any(|g| {
        let len = g.chars().count();
        end >= len && {
            let at = end - len;
            folded_at(before, at, g) && (at == 0 || !is_word(before[at - 1]))
        }
    })
}

/// A name at `chars[start..end]` used to address someone: "Hey Gina, ...",
/// "Thanks, Mel!", "..., Caroline!".
pub(crate) fn is_vocative(chars: &[char], start: usize, end: usize) -> bool {
    if !chars
        .get(end)
        .is_some_and(|c| matches!(c, ',' | '!' | '?' | '.'))
    {
        return false;
    }
    let before = &chars[start.saturating_sub(GREETING_REACH)..start];
    let mut trimmed = before.len();
    while trimmed > 0 && matches!(before[trimmed - 1], ' ' | ',') {
        trimmed -= 1;
    }
    if greets(&before[..trimmed]) {
        return true;
    }
    let mut stripped = before.len();
    while stripped > 0 && is_space(before[stripped - 1]) {
        stripped -= 1;
    }
    stripped > 0 && before[stripped - 1] == ','
}

/// Whether the word at bytes `start..end` of `text` addresses someone, as
/// `is_vocative` reads a name ("hey mel,", "thanks, Mel!"), whatever its
/// case: read in a window of the text around it, as `is_vocative` reads no
/// further than `GREETING_REACH` chars back and one forward.
pub(crate) fn addressed_at(text: &str, start: usize, end: usize) -> bool {
    // the byte where the last GREETING_REACH chars before the word start
    let from = text[..start]
        .char_indices()
        .rev()
        .nth(GREETING_REACH - 1)
        .map_or(0, |(i, _)| i);
    let mut chars: Vec<char> = text[from..start].chars().collect();
    let at = chars.len();
    let word = text[start..end].chars().count();
    chars.extend(text[start..].chars().take(word + 1));
    is_vocative(&chars, at, at + word)
}

/// Capitalised words (`[A-Z][a-z]{2,}` between word boundaries) that do not
/// address someone, lower-cased, each once, in order of appearance.
fn names(chars: &[char]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let starts = chars[at].is_ascii_uppercase() && (at == 0 || !is_word(chars[at - 1]));
        if !starts {
            at += 1;
            continue;
        }
        let mut end = at + 1;
        while end < chars.len() && chars[end].is_ascii_lowercase() {
            end += 1;
        }
        // the lower-case run must end the word; a shorter run cannot (its
        // next character is a letter)
        if end - at >= 3
            && !chars.get(end).is_some_and(|&c| is_word(c))
            && !is_vocative(chars, at, end)
        {
            let name: String = chars[at..end]
                .iter()
                .map(char::to_ascii_lowercase)
                .collect();
            if !out.contains(&name) {
                out.push(name);
            }
        }
        at = end;
    }
    out
}

/// The text's sentences: each maximal run of characters other than `.!?`
/// with the run of those that follows it (ASCII all three, so the runs are
/// found on the bytes).
pub(crate) fn sentence_spans(text: &str) -> Vec<&str> {
    let stop = |b: u8| matches!(b, b'.' | b'!' | b'?');
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if stop(bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && !stop(bytes[at]) {
            at += 1;
        }
        while at < bytes.len() && stop(bytes[at]) {
            at += 1;
        }
        out.push(&text[start..at]);
    }
    out
}

/// Whether a sentence asks. It ends in "?"; or, without an end mark at
/// all (only a text's last sentence lacks one: a quick message typed
/// without punctuation), it asks about the one addressed: an auxiliary of
/// state or experience right before "you" ("did you", "r u", "have u
/// been"), not after "to" or a subject ("glad to have u"). A request ("can
/// you help me with ...") is not counted: it states what the speaker needs.
pub(crate) fn is_question(sentence: &str) -> bool {
    let s = sentence.trim_end();
    if s.ends_with('?') {
        return true;
    }
    if s.ends_with(['.', '!']) {
        return false;
    }
    const AUX: [&str; 7] = ["are", "did", "do", "does", "have", "r", "were"];
    const YOU: [&str; 3] = ["u", "ya", "you"];
    const NOT_AFTER: [&str; 9] = ["he", "i", "it", "she", "that", "they", "to", "we", "who"];
    let lower = s.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).enumerate().any(|(k, pair)| {
        AUX.contains(&pair[0])
            && YOU.contains(&pair[1])
            && (k == 0 || !NOT_AFTER.contains(&words[k - 1]))
    })
}

/// A sentence's weight: 0.5 for a question (it asserts less), else 1.
fn sentence_weight(sentence: &str) -> f64 {
    if is_question(sentence) {
        0.5
    } else {
        1.0
    }
}

/// Whether a sentence speaks in the first person, and in the second.
pub(crate) fn person_marks(sentence: &str) -> (bool, bool) {
    if sentence.is_ascii() {
        return person_marks_ascii(sentence.as_bytes());
    }
    let chars: Vec<char> = sentence.chars().collect();
    (
        has_word(&chars, &FIRST_PERSON),
        has_word(&chars, &SECOND_PERSON),
    )
}

/// Whether some word of either list starts with each (lower-case) byte:
/// most words of a sentence start with one no list word does.
const PERSON_FIRST_BYTES: [bool; 256] =
    first_bytes(&SECOND_PERSON, first_bytes(&FIRST_PERSON, [false; 256]));

/// `table` with the first byte of each of `words` marked.
const fn first_bytes(words: &[&str], mut table: [bool; 256]) -> [bool; 256] {
    let mut i = 0;
    while i < words.len() {
        table[words[i].as_bytes()[0] as usize] = true;
        i += 1;
    }
    table
}

/// `person_marks` of an ASCII sentence, on its bytes in one pass: there a
/// word character is `[A-Za-z0-9_]` and case folding is ASCII's.
fn person_marks_ascii(b: &[u8]) -> (bool, bool) {
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let at_word = |at: usize, w: &str| {
        let end = at + w.len();
        end <= b.len()
            && b[at..end].eq_ignore_ascii_case(w.as_bytes())
            && !b.get(end).is_some_and(|&c| is_word(c))
    };
    let (mut first, mut second) = (false, false);
    let mut prev_word = false;
    for (at, &c) in b.iter().enumerate() {
        let word = is_word(c);
        if word && !prev_word {
            // a word's first byte rules most candidates out
            let lower = c.to_ascii_lowercase();
            if !PERSON_FIRST_BYTES[usize::from(lower)] {
                prev_word = word;
                continue;
            }
            let starts = |w: &&str| w.as_bytes()[0] == lower && at_word(at, w);
            first = first || FIRST_PERSON.iter().any(starts);
            second = second || SECOND_PERSON.iter().any(starts);
            if first && second {
                break;
            }
        }
        prev_word = word;
    }
    (first, second)
}

/// A text's names and sentences, as coverage reads them.
pub fn text_marks(text: &str, tokenizer: &Tokenizer) -> TextMarks {
    let sentences = sentence_spans(text)
        .into_iter()
        .map(|sentence| {
            let (first_person, second_person) = person_marks(sentence);
            Sentence {
                words: tokenizer.tokenize(sentence),
                weight: sentence_weight(sentence),
                first_person,
                second_person,
            }
        })
        .collect();
    let chars: Vec<char> = text.chars().collect();
    TextMarks {
        named: names(&chars),
        sentences,
    }
}

/// The share of a text's sentences that are questions (0 without any): how
/// much of it asks rather than asserts. Sentences of white space alone do
/// not count.
pub fn question_share(text: &str) -> f64 {
    let (mut sentences, mut questions) = (0usize, 0usize);
    for sentence in sentence_spans(text) {
        if sentence.chars().all(is_space) {
            continue;
        }
        sentences += 1;
        questions += usize::from(is_question(sentence));
    }
    if sentences == 0 {
        0.0
    } else {
        questions as f64 / sentences as f64
    }
}

/// Whether a text speaks in the first person anywhere (a query that does
/// asks about the one who talks to the memory).
pub fn speaks_in_first_person(text: &str) -> bool {
    person_marks(text).0
}

/// Whether `name` names the person `entity` names: equal, equal to its first
/// word, or a prefix of 3+ characters either way between that word and
/// `name` ("mel" and "caro" name "melanie" and "caroline").
pub fn is_alias(entity: &str, name: &str) -> bool {
    if name.is_empty() || entity.is_empty() {
        return false;
    }
    let first = entity.split(is_space).find(|w| !w.is_empty()).unwrap_or("");
    if entity == name || first == name {
        return true;
    }
    let (first_len, name_len) = (first.chars().count(), name.chars().count());
    // the shorter first; the entity's word on a tie
    let (short, short_len, long) = if name_len < first_len {
        (name, name_len, first)
    } else {
        (first, first_len, name)
    };
    short_len >= 3 && long.starts_with(short)
}

/// What one query asks of coverage.
#[derive(Clone, Debug, Default)]
pub struct CoverageQuery {
    /// The query's content tokens (without the names of whom it asks about
    /// and the words that frame a question).
    pub content_tokens: ShortKeySet<String>,
    /// The people it asks about (entity ids); empty: it names nobody.
    pub asked: Vec<String>,
    /// The people the memory knows (lower-cased: its speakers and the
    /// labels heading its transcript lines, `MemoryStore::people`), in the
    /// search's scope.
    pub people: ShortKeySet<String>,
}

/// The distinct first chars of `tokens` (what `Tokenizer::for_each_token_starting` reads).
fn first_chars<'a>(tokens: impl Iterator<Item = &'a str>) -> Vec<char> {
    let mut out: Vec<char> = tokens.filter_map(|t| t.chars().next()).collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl CoverageQuery {
    /// The first chars of the content tokens.
    fn first_chars(&self) -> Vec<char> {
        first_chars(self.content_tokens.iter().map(String::as_str))
    }

    fn names_asked(&self, name: &str) -> bool {
        self.asked.iter().any(|q| is_alias(q, name))
    }

    /// A known person the query does not ask about.
    fn someone_else(&self, name: &str) -> bool {
        self.people.contains(name) && !self.names_asked(name)
    }
}

/// Whether a document's sorted term list holds one of `terms` (sorted).
fn shares_a_term(doc: &[(u32, u32)], terms: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < doc.len() && j < terms.len() {
        match doc[i].0.cmp(&terms[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// One node's credits for a query, sentence by sentence: each content
/// token's best credit for the people asked about and for other people.
struct Credits<'a> {
    store: &'a MemoryStore,
    id: NodeId,
    text: &'a str,
    q: &'a CoverageQuery,
    allowed: Option<&'a Allowed>,
    own: String,
    addressees: Option<ShortKeySet<String>>,
    /// in a transcript: everyone who speaks in or around it (a segment's
    /// addressees are the others, worked out when a sentence first needs them)
    voices: Option<&'a ShortKeySet<String>>,
    /// what the names alone decide, once per node (a long text names many)
    by_name: Option<(bool, bool)>,
    // per-node tables (the sums below are exact in any order)
    credit: ShortKeyMap<&'a str, f64>,
    other: ShortKeyMap<&'a str, f64>,
}

impl<'a> Credits<'a> {
    fn new(
        store: &'a MemoryStore,
        id: NodeId,
        text: &'a str,
        q: &'a CoverageQuery,
        allowed: Option<&'a Allowed>,
    ) -> Self {
        Credits {
            store,
            id,
            text,
            q,
            allowed,
            own: speaker(store, id),
            addressees: None,
            voices: None,
            by_name: None,
            credit: ShortKeyMap::default(),
            other: ShortKeyMap::default(),
        }
    }

    /// Read what follows as the words of `own` in `text` (a transcript's
    /// segment): its names are read from `text`, and the second person
    /// speaks to the `voices` other than `own`.
    fn segment(&mut self, text: &'a str, own: &str, voices: &'a ShortKeySet<String>) {
        self.text = text;
        own.clone_into(&mut self.own);
        self.voices = Some(voices);
        self.addressees = None;
        self.by_name = None;
    }

    /// Credit a sentence holding the content tokens `hits`, of `weight`,
    /// in the first and the second person or not (read only when the query
    /// asks about people).
    fn sentence(&mut self, hits: &[&'a str], weight: f64, first: bool, second: bool) {
        let q = self.q;
        if q.asked.is_empty() {
            for &h in hits {
                let c = self.credit.entry(h).or_insert(0.0);
                *c = c.max(weight);
            }
            return;
        }
        let text = self.text;
        let (named_mine, named_others) = *self.by_name.get_or_insert_with(|| {
            let named = names(&text.chars().collect::<Vec<char>>());
            (
                named.iter().any(|a| q.names_asked(a)),
                named.iter().any(|a| q.someone_else(a)),
            )
        });
        let own = self.own.as_str();
        let mut about: Vec<&str> = Vec::new();
        if first {
            about.push(own);
        }
        if second {
            let (store, id, allowed, voices) = (self.store, self.id, self.allowed, self.voices);
            let found = self.addressees.get_or_insert_with(|| match voices {
                Some(v) => v.iter().filter(|s| *s != own).cloned().collect(),
                None => store.addressees(id, own, &q.people, allowed),
            });
            about.extend(found.iter().map(String::as_str));
        }
        let unmarked = !first && !second;
        let mut mine = if named_mine || about.iter().any(|a| q.names_asked(a)) {
            weight
        } else {
            0.0
        };
        if mine == 0.0 && unmarked && q.names_asked(own) {
            mine = 0.5 * weight;
        }
        let others = named_others || about.iter().any(|a| q.someone_else(a));
        let mut theirs = if others { weight } else { 0.0 };
        if theirs == 0.0 && unmarked && q.someone_else(own) {
            theirs = 0.5 * weight;
        }
        for &h in hits {
            let c = self.credit.entry(h).or_insert(0.0);
            *c = c.max(mine);
            let o = self.other.entry(h).or_insert(0.0);
            *o = o.max(theirs);
        }
    }

    /// The shares: summed credits over the query's content tokens.
    fn finish(self) -> (f64, f64) {
        let n = self.q.content_tokens.len() as f64;
        // every value is a multiple of 1/4: the sums are exact in any order
        (
            self.credit.values().sum::<f64>() / n,
            self.other.values().sum::<f64>() / n,
        )
    }
}

/// The longest speakerless text coverage reads as a transcript, in bytes:
/// the segments are tokenised again for each query (the write-time marks
/// do not know them), so a longer one (a pasted log of megabytes) is read
/// whole from its marks, as before, and a query's cost stays bounded.
pub const TRANSCRIPT_READ_BYTES: usize = 16 * 1024;

/// A speakerless text read as a transcript: where its lines are headed by
/// the labels of known people ("Caroline: I ran ...", `style::text_label`),
/// each such line opens a segment that person speaks, up to the next one;
/// text before the first is spoken by no one known (""). Each segment's
/// words start after its label's colon. None when no line is so headed.
pub(crate) fn transcript_segments<'t>(
    text: &'t str,
    is_person: impl Fn(&str) -> bool,
) -> Option<Vec<(String, &'t str)>> {
    let mut out: Vec<(String, &'t str)> = Vec::new();
    let (mut own, mut from) = (String::new(), 0);
    let mut found = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some((label, words)) = labelled(line).filter(|(l, _)| is_person(l)) {
            out.push((std::mem::take(&mut own), &text[from..at]));
            from = at + words;
            own = label;
            found = true;
        }
        at += line.len();
    }
    if !found {
        return None;
    }
    out.push((own, &text[from..]));
    Some(out)
}

/// The one person who says a speakerless text, when it is a transcript of
/// one voice: it starts with a line a label of `people` (sorted) heads,
/// and every such line has the same label (`transcript_segments`). None for
/// a text of several voices, of none, or over `TRANSCRIPT_READ_BYTES`.
pub fn single_voice(text: &str, people: &[String]) -> Option<String> {
    if people.is_empty() || text.len() > TRANSCRIPT_READ_BYTES {
        return None;
    }
    let is_person = |l: &str| people.binary_search_by(|p| p.as_str().cmp(l)).is_ok();
    let segments = transcript_segments(text, is_person)?;
    let ((_, before), spoken) = segments.split_first()?;
    let voice = &spoken.first()?.0;
    (before.trim().is_empty() && spoken.iter().all(|(s, _)| s == voice)).then(|| voice.clone())
}

/// A node's speaker as coverage compares it: lower-cased, "" when none.
fn speaker(store: &MemoryStore, id: NodeId) -> String {
    store
        .get(id)
        .and_then(speaker_of)
        .map(str::to_lowercase)
        .unwrap_or_default()
}

impl MemoryStore {
    /// Who speaks the turns next to `id` in time (its temporal edges, the
    /// `allowed` ones; `voice`), other than `own`: whom it talks to.
    fn addressees(
        &self,
        id: NodeId,
        own: &str,
        people: &ShortKeySet<String>,
        allowed: Option<&Allowed>,
    ) -> ShortKeySet<String> {
        let mut out = ShortKeySet::default();
        for e in self.graph().incident_edges(id) {
            if e.view != View::Temporal {
                continue;
            }
            let other = if e.src == id { e.dst } else { e.src };
            if allowed.is_some_and(|a| !a.contains(other)) {
                continue;
            }
            let spk = self.voice(other, people);
            if !spk.is_empty() && spk != own {
                out.insert(spk);
            }
        }
        out
    }

    /// Who speaks a node as coverage reads it: its speaker, or for a node
    /// without one the label heading its text when that names one of
    /// `people` (lower-cased; "" for neither).
    fn voice(&self, id: NodeId, people: &ShortKeySet<String>) -> String {
        let spk = speaker(self, id);
        if !spk.is_empty() {
            return spk;
        }
        self.get(id)
            .and_then(|n| text_label(&n.content))
            .filter(|l| people.contains(l))
            .unwrap_or_default()
    }

    /// A speakerless node's content coverage read as a transcript
    /// (`transcript_segments`): each segment's sentences credited as its
    /// speaker's turn (the first person is the segment's speaker, the
    /// second the transcript's other speakers and the node's neighbours'),
    /// with the names the segment uses; each token keeps its best credit
    /// over the whole text.
    fn transcript_coverage(
        &self,
        id: NodeId,
        text: &str,
        segments: Vec<(String, &str)>,
        q: &CoverageQuery,
        allowed: Option<&Allowed>,
    ) -> (f64, f64) {
        let mut voices = self.addressees(id, "", &q.people, allowed);
        voices.extend(
            segments
                .iter()
                .filter(|(s, _)| !s.is_empty())
                .map(|(s, _)| s.clone()),
        );
        let mut credits = Credits::new(self, id, text, q, allowed);
        let firsts = q.first_chars();
        for (own, body) in &segments {
            credits.segment(body, own, &voices);
            self.credit_sentences(&mut credits, body, &firsts);
        }
        credits.finish()
    }

    /// Each node's content coverage for a query: the share of its content
    /// tokens the node asserts about the people it asks about, and the share
    /// it asserts about other known people.
    ///
    /// Sentence by sentence: a sentence is about its speaker in the first
    /// person, about the addressees in the second person, and about whoever
    /// the text names (not as a form of address). A sentence with no person
    /// mark is credited to its speaker at half weight (likely, not certain);
    /// a question's words count half. Each token keeps its best credit; an
    /// unknown id raises `NodeNotFound`.
    pub fn content_coverage(
        &self,
        ids: &[NodeId],
        q: &CoverageQuery,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<(f64, f64)>> {
        let nodes = ids
            .iter()
            .map(|&id| self.require(id))
            .collect::<Result<Vec<_>>>()?;
        // A text without any of the query's content tokens covers nothing:
        // its lexical entry (which holds every token of its text) says so
        // without tokenising the text sentence by sentence.
        let mut terms: Vec<u32> = q
            .content_tokens
            .iter()
            .filter_map(|t| self.bm25.term_id(t))
            .collect();
        terms.sort_unstable();
        // the content tokens the memory holds, by term id (what marks read)
        let mut by_term: Vec<(u32, &str)> = q
            .content_tokens
            .iter()
            .filter_map(|t| self.bm25.term_id(t).map(|id| (id, t.as_str())))
            .collect();
        by_term.sort_unstable();
        Ok(ids
            .iter()
            .zip(nodes)
            .map(|(&id, node)| {
                if q.content_tokens.is_empty() {
                    return (0.0, 0.0);
                }
                let doc = self.bm25.doc_terms(id);
                if let Some(doc) = doc {
                    if !shares_a_term(doc, &terms) {
                        return (0.0, 0.0);
                    }
                }
                if !q.asked.is_empty()
                    && !q.people.is_empty()
                    && speaker_of(node).is_none()
                    && node.content.len() <= TRANSCRIPT_READ_BYTES
                {
                    if let Some(segments) =
                        transcript_segments(&node.content, |l| q.people.contains(l))
                    {
                        return self.transcript_coverage(id, &node.content, segments, q, allowed);
                    }
                }
                match (self.marks.get(id), doc) {
                    (Some(marks), Some(doc)) => {
                        self.marked_coverage(id, &node.content, marks, doc, q, &by_term, allowed)
                    }
                    _ => self.node_coverage(id, &node.content, q, allowed),
                }
            })
            .collect())
    }

    /// `node_coverage` read off the node's sentence marks: the same credits,
    /// without splitting or tokenising the text.
    #[allow(clippy::too_many_arguments)]
    fn marked_coverage(
        &self,
        id: NodeId,
        text: &str,
        marks: &NodeMarks,
        doc: &[(u32, u32)],
        q: &CoverageQuery,
        by_term: &[(u32, &str)],
        allowed: Option<&Allowed>,
    ) -> (f64, f64) {
        // the query's content tokens this node holds: (position in its
        // lexical entry, the token)
        let wanted: Vec<(u32, &str)> = by_term
            .iter()
            .filter_map(|&(term, token)| {
                doc.binary_search_by_key(&term, |p| p.0)
                    .ok()
                    .map(|at| (at as u32, token))
            })
            .collect();
        let mut credits = Credits::new(self, id, text, q, allowed);
        let mut hits: Vec<&str> = Vec::new();
        for (k, (terms, m)) in marks.iter().enumerate() {
            hits.clear();
            hits.extend(
                wanted
                    .iter()
                    .filter(|(at, _)| terms.binary_search(at).is_ok())
                    .map(|&(_, token)| token),
            );
            // the pieces of a word spanning a stop, as the text reading splits it
            hits.extend(
                marks
                    .pieces_of(k)
                    .filter_map(|t| q.content_tokens.get(t))
                    .map(String::as_str),
            );
            if !hits.is_empty() {
                let weight = if m & marks::QUESTION != 0 { 0.5 } else { 1.0 };
                credits.sentence(
                    &hits,
                    weight,
                    m & marks::FIRST_PERSON != 0,
                    m & marks::SECOND_PERSON != 0,
                );
            }
        }
        credits.finish()
    }

    /// A node's content coverage read off its text, sentence by sentence
    /// (a node without marks, and the reference the marks are held to).
    pub(crate) fn node_coverage(
        &self,
        id: NodeId,
        text: &str,
        q: &CoverageQuery,
        allowed: Option<&Allowed>,
    ) -> (f64, f64) {
        let mut credits = Credits::new(self, id, text, q, allowed);
        self.credit_sentences(&mut credits, text, &q.first_chars());
        credits.finish()
    }

    /// Credit each sentence of `text` that holds content tokens, read off
    /// the text (tokenised sentence by sentence; `firsts`: the content
    /// tokens' first chars).
    fn credit_sentences<'a>(&self, credits: &mut Credits<'a>, text: &'a str, firsts: &[char]) {
        let q = credits.q;
        let mut hits: Vec<&'a str> = Vec::new();
        for sentence in sentence_spans(text) {
            hits.clear();
            self.tokenizer()
                .for_each_token_starting(sentence, firsts, |t| {
                    if let Some(c) = q.content_tokens.get(t) {
                        hits.push(c);
                    }
                });
            if hits.is_empty() {
                continue;
            }
            let (first, second) = if q.asked.is_empty() {
                (false, false) // not read without people asked about
            } else {
                person_marks(sentence)
            };
            credits.sentence(&hits, sentence_weight(sentence), first, second);
        }
    }

    /// For each pair `(ids[k], others[k])`, whether both nodes name the same
    /// session (`pair_signals::session_of`: the same key and value). An
    /// unknown id raises `NodeNotFound`; unequal lengths are invalid input.
    pub fn same_sessions(&self, ids: &[NodeId], others: &[NodeId]) -> Result<Vec<bool>> {
        if ids.len() != others.len() {
            return Err(crate::error::Error::InvalidInput(format!(
                "{} ids but {} others",
                ids.len(),
                others.len()
            )));
        }
        ids.iter()
            .zip(others)
            .map(|(&a, &b)| {
                let (a, b) = (self.require(a)?, self.require(b)?);
                Ok(session_of(a).is_some_and(|s| session_of(b) == Some(s)))
            })
            .collect()
    }

    /// Each node's text, in the order of `ids`. An unknown id raises `NodeNotFound`.
    pub fn texts(&self, ids: &[NodeId]) -> Result<Vec<&str>> {
        ids.iter()
            .map(|&id| self.require(id).map(|n| n.content.as_str()))
            .collect()
    }

    /// For each of `ids`, which of `tokens` its text holds (as the lexical
    /// index tokenizes it). An unknown id raises `NodeNotFound`.
    pub fn tokens_present(&self, ids: &[NodeId], tokens: &[String]) -> Result<Vec<Vec<bool>>> {
        let nodes = ids
            .iter()
            .map(|&id| self.require(id))
            .collect::<Result<Vec<_>>>()?;
        // a token the lexical index has never seen is in no text
        let terms: Vec<Option<u32>> = tokens.iter().map(|t| self.bm25.term_id(t)).collect();
        Ok(nodes
            .into_iter()
            .map(|node| {
                let mut row = vec![false; tokens.len()];
                let Some(doc) = self.bm25.doc_terms(node.id) else {
                    self.scan_tokens(&node.content, tokens, &mut row, |_| true);
                    return row;
                };
                if let Some(marks) = self.marks.get(node.id).filter(|m| m.whole) {
                    // its sentences' terms are its text's tokens: a term of
                    // the entry in none of them came from a field alone
                    for (i, term) in terms.iter().enumerate() {
                        let at = term.and_then(|t| doc.binary_search_by_key(&t, |&(d, _)| d).ok());
                        row[i] = at.is_some_and(|at| marks.terms.contains(&(at as u32)));
                    }
                    return row;
                }
                // The node's lexical entry holds its text's tokens and its
                // lexical fields' (the speaker's name): read from it without
                // tokenising the text again, unless a token it holds may come
                // from a field alone.
                let fields = self.field_tokens(node);
                let mut confirm: Vec<usize> = Vec::new();
                for (i, term) in terms.iter().enumerate() {
                    let held =
                        term.is_some_and(|t| doc.binary_search_by_key(&t, |&(d, _)| d).is_ok());
                    if !held {
                        continue;
                    }
                    if fields.contains(tokens[i].as_str()) {
                        confirm.push(i);
                    } else {
                        row[i] = true;
                    }
                }
                if !confirm.is_empty() {
                    self.scan_tokens(&node.content, tokens, &mut row, |i| confirm.contains(&i));
                }
                row
            })
            .collect())
    }

    /// The tokens of a node's lexical fields (see `StoreConfig::lexical_fields`).
    fn field_tokens(&self, node: &crate::types::Node) -> ShortKeySet<String> {
        let mut out = ShortKeySet::default();
        for field in &self.config().lexical_fields {
            for (key, value) in &node.provenance {
                if key == field {
                    self.tokenizer().for_each_token(value, |t| {
                        out.insert(t.to_string());
                    });
                }
            }
        }
        out
    }

    /// Marks in `row` which of `tokens` (those `wanted` by index) `text` holds.
    fn scan_tokens(
        &self,
        text: &str,
        tokens: &[String],
        row: &mut [bool],
        wanted: impl Fn(usize) -> bool,
    ) {
        // a token may be asked for twice
        let mut columns: ShortKeyMap<&str, Vec<usize>> = ShortKeyMap::default();
        for (i, t) in tokens.iter().enumerate() {
            if wanted(i) {
                columns.entry(t.as_str()).or_default().push(i);
            }
        }
        let firsts = first_chars(columns.keys().copied());
        self.tokenizer()
            .for_each_token_starting(text, &firsts, |t| {
                for &i in columns.get(t).map_or(&[][..], Vec::as_slice) {
                    row[i] = true;
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WORDS: [&str; 8] = ["Ann", "bob", "park", "went", "I", "you", "Paint", "lake"];

    /// `has_word` as it compared first chars before (`str::starts_with`).
    fn has_word_by_chars(chars: &[char], words: &[&str]) -> bool {
        let mut prev_word = false;
        for (at, &c) in chars.iter().enumerate() {
            let word = is_word(c);
            if word && !prev_word {
                let first = fold(c);
                if words.iter().any(|w| {
                    w.starts_with(first) && folded_at(chars, at, w) && boundary(chars, at + w.len())
                }) {
                    return true;
                }
            }
            prev_word = word;
        }
        false
    }

    #[test]
    fn transcripts_split_at_the_lines_people_head() {
        let people: ShortKeySet<String> = ["ann", "bob"].iter().map(|s| s.to_string()).collect();
        let people = |l: &str| people.contains(l);
        let text = "Intro line.\nAnn: I went to the park\nand the lake.\n  Bob: you did?\nNote: x";
        let got = transcript_segments(text, people).unwrap();
        let want = [
            ("", "Intro line.\n"),
            ("ann", " I went to the park\nand the lake.\n"),
            ("bob", " you did?\nNote: x"),
        ];
        assert_eq!(got.len(), want.len());
        for ((own, words), (w_own, w_words)) in got.iter().zip(want) {
            assert_eq!((own.as_str(), *words), (w_own, w_words));
        }
        assert_eq!(transcript_segments("no labels\nhere", people), None);
        assert_eq!(
            transcript_segments("Cy: a label, not a person", people),
            None
        );
        let one = transcript_segments("Bob: hi", people).unwrap();
        assert_eq!(one, vec![(String::new(), ""), ("bob".to_string(), " hi")]);
    }

    #[test]
    fn a_last_sentence_without_an_end_mark_asks_about_the_one_addressed() {
        for asks in [
            "did u go",
            "hey mel how have u been",
            "r u coming",
            "what do you think",
        ] {
            assert!(is_question(asks), "{asks}");
            assert_eq!(question_share(asks), 1.0, "{asks}");
        }
        for states in [
            "glad to have u",
            "can you help me implement this",
            "i will u know",
            "did u go.",
            "Did you go!",
            "hey mel",
        ] {
            assert!(!is_question(states), "{states}");
        }
        assert!(is_question("Did you go?"));
        // only a text's last sentence lacks an end mark
        assert_eq!(question_share("I went. did u"), 0.5);
    }

    #[test]
    fn person_words_are_ascii() {
        for w in FIRST_PERSON.iter().chain(&SECOND_PERSON) {
            assert!(!w.is_empty() && w.is_ascii(), "{w}");
        }
    }

    proptest! {
        /// Comparing a word's first byte finds what comparing its first char
        /// found, case folds included (the Kelvin sign, a dotted capital I).
        #[test]
        fn has_word_by_bytes_equals_by_chars(
            text in prop::collection::vec(
                prop::sample::select(vec![
                    'i', 'I', 'm', 'y', 'o', 'u', 'r', 'w', 'e', 's', '\'', ' ', '.', ',',
                    '\u{130}', '\u{131}', '\u{212a}', '\u{17f}', 'Y', 'O', 'U', 'é', '_', '1',
                ]),
                0..40,
            ),
        ) {
            for words in [&FIRST_PERSON[..], &SECOND_PERSON[..]] {
                prop_assert_eq!(has_word(&text, words), has_word_by_chars(&text, words));
            }
        }

        /// An ASCII sentence's marks, read on its bytes, are the chars' reading.
        #[test]
        fn person_marks_of_ascii_equal_the_char_reading(
            text in prop::collection::vec(
                prop::sample::select(vec![
                    "i", "I", "m", "'", "ve", "y", "o", "u", "r", "re", "w", "e", "s", "ll",
                    "my", "US", "Our", "self", " ", ".", ",", "_", "1", "a", "x",
                ]),
                0..16,
            ),
        ) {
            let text: String = text.concat();
            let chars: Vec<char> = text.chars().collect();
            prop_assert_eq!(
                person_marks_ascii(text.as_bytes()),
                (has_word(&chars, &FIRST_PERSON), has_word(&chars, &SECOND_PERSON))
            );
        }
    }

    fn text_of(words: &[usize], marks: &[usize]) -> String {
        let stops = [" ", ". ", "? ", ", "];
        words
            .iter()
            .zip(marks.iter().cycle())
            .map(|(&w, &m)| format!("{}{}", WORDS[w], stops[m]))
            .collect()
    }

    proptest! {
        /// Read off the lexical index, `tokens_present` equals tokenising each
        /// text (a token held only by the speaker field is not in the text),
        /// and `content_coverage` equals reading every text sentence by sentence.
        #[test]
        fn lexical_entry_readings_equal_the_text_readings(
            nodes in prop::collection::vec(
                (prop::collection::vec(0usize..8, 1..12), prop::collection::vec(0usize..4, 1..4), 0usize..3),
                1..6,
            ),
            asked in prop::collection::vec(0usize..8, 0..5),
            people in prop::collection::vec(0usize..3, 0..2),
        ) {
            use crate::ops::NewNode;
            use crate::store::StoreConfig;
            let speakers = ["Ann", "Bob", "Cy"];
            let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
            let mut ids = Vec::new();
            let mut texts = Vec::new();
            for (words, marks, who) in &nodes {
                let text = text_of(words, marks);
                let mut n = NewNode::new(&text, vec![1.0, 0.5]);
                n.provenance = vec![("speaker".to_owned(), speakers[*who].to_owned())];
                ids.push(s.add_node(n).unwrap());
                texts.push(text);
            }
            let tokens: Vec<String> = asked
                .iter()
                .flat_map(|&w| s.tokenizer().tokenize(WORDS[w]))
                .chain(["nowhere".to_owned()])
                .collect();
            let rows = s.tokens_present(&ids, &tokens).unwrap();
            for (row, text) in rows.iter().zip(&texts) {
                let held = s.tokenizer().tokenize(text);
                let expected: Vec<bool> = tokens.iter().map(|t| held.contains(t)).collect();
                prop_assert_eq!(row, &expected);
            }
            let q = CoverageQuery {
                content_tokens: tokens.iter().cloned().collect(),
                asked: people.iter().map(|&p| speakers[p].to_lowercase()).collect(),
                people: speakers.iter().map(|p| p.to_lowercase()).collect(),
            };
            let got = s.content_coverage(&ids, &q, None).unwrap();
            for ((&id, text), covered) in ids.iter().zip(&texts).zip(got) {
                prop_assert_eq!(covered, s.node_coverage(id, text, &q, None));
            }
        }
    }

    proptest! {
        /// Coverage read off the sentence marks made at write time equals
        /// coverage read off the text, node by node: questions, person
        /// words, names, repeated words, and words that span a sentence
        /// stop ("3.5", "e.g.": their sentences keep the pieces "3" and "5").
        /// Every text has marks, `whole` where no word may span a stop.
        #[test]
        fn marked_coverage_equals_the_text_reading(
            nodes in prop::collection::vec(
                (
                    prop::collection::vec(
                        prop::sample::select(vec![
                            "I", "you", "we'll", "Your", "Ann", "Bob", "painted", "paints",
                            "lake", "the", "3.5", "e.g.", "U.S.", "café", "naïve", "Hey",
                            "Ann,", "park", "PARK", "it's", "kayak", "ﬁsh", "İstanbul",
                        ]),
                        1..14,
                    ),
                    prop::collection::vec(
                        prop::sample::select(vec![" ", ". ", "? ", "! ", ", ", "?! ", "...", "."]),
                        1..5,
                    ),
                    0usize..3,
                ),
                1..6,
            ),
            asked in prop::collection::vec(
                prop::sample::select(vec!["painted", "lake", "park", "3", "5", "e", "kayak", "fish", "café"]),
                0..5,
            ),
            people in prop::collection::vec(0usize..3, 0..2),
        ) {
            use crate::ops::NewNode;
            use crate::store::StoreConfig;
            let speakers = ["Ann", "Bob", "Cy"];
            let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
            let mut ids = Vec::new();
            let mut texts = Vec::new();
            for (words, stops, who) in &nodes {
                let text: String = words
                    .iter()
                    .zip(stops.iter().cycle())
                    .map(|(w, stop)| format!("{w}{stop}"))
                    .collect();
                let mut n = NewNode::new(&text, vec![1.0, 0.5]);
                n.provenance = vec![("speaker".to_owned(), speakers[*who].to_owned())];
                let id = s.add_node(n).unwrap();
                // marks for every text, whole where no word spans a stop
                prop_assert_eq!(
                    s.marks.get(id).map(|m| m.whole),
                    Some(!crate::marks::may_straddle(&text)),
                    "{:?}",
                    text
                );
                ids.push(id);
                texts.push(text);
            }
            let tokens: Vec<String> = asked
                .iter()
                .flat_map(|w| s.tokenizer().tokenize(w))
                .chain(["nowhere".to_owned()])
                .collect();
            let q = CoverageQuery {
                content_tokens: tokens.iter().cloned().collect(),
                asked: people.iter().map(|&p| speakers[p].to_lowercase()).collect(),
                people: speakers.iter().map(|p| p.to_lowercase()).collect(),
            };
            // which tokens each text holds (the speaker's name is not in it)
            let asked_tokens: Vec<String> =
                tokens.iter().cloned().chain(["ann".to_owned(), "bob".to_owned()]).collect();
            let rows = s.tokens_present(&ids, &asked_tokens).unwrap();
            for (row, text) in rows.iter().zip(&texts) {
                let held = s.tokenizer().tokenize(text);
                let expected: Vec<bool> = asked_tokens.iter().map(|t| held.contains(t)).collect();
                prop_assert_eq!(row, &expected, "{:?}", text);
            }
            // the text reading behind the lexical entry's check (a text
            // without any of the query's terms covers nothing), as before marks
            let mut terms: Vec<u32> = tokens.iter().filter_map(|t| s.bm25.term_id(t)).collect();
            terms.sort_unstable();
            let got = s.content_coverage(&ids, &q, None).unwrap();
            for ((&id, text), covered) in ids.iter().zip(&texts).zip(got) {
                let shares = s.bm25.doc_terms(id).is_none_or(|doc| shares_a_term(doc, &terms));
                let expected = if shares { s.node_coverage(id, text, &q, None) } else { (0.0, 0.0) };
                prop_assert_eq!(covered, expected, "{:?}", text);
            }
        }
    }

    fn marks(text: &str) -> TextMarks {
        text_marks(text, &Tokenizer::default())
    }

    #[test]
    fn sentences_carry_their_person_marks_and_question_weight() {
        let m = marks("I went to the park. Did you see it? We'll go");
        let flags: Vec<(f64, bool, bool)> = m
            .sentences
            .iter()
            .map(|s| (s.weight, s.first_person, s.second_person))
            .collect();
        assert_eq!(
            flags,
            vec![(1.0, true, false), (0.5, false, true), (1.0, true, false)]
        );
        assert_eq!(m.sentences[0].words, vec!["went", "park"]);
    }

    #[test]
    fn person_words_match_whole_words_case_folded_as_python_re() {
        assert!(speaks_in_first_person("OURS is better"));
        assert!(speaks_in_first_person("\u{130} think so")); // İ folds onto i
        assert!(speaks_in_first_person("u\u{17f} too")); // ſ folds onto s
        assert!(!speaks_in_first_person("mystery items"));
        assert!(!speaks_in_first_person("_me"));
    }

    #[test]
    fn names_skip_forms_of_address() {
        assert_eq!(
            marks("Hey Gina, Caroline said so.").named,
            vec!["hey", "caroline"]
        );
        assert_eq!(marks("Thanks, Mel! Bye").named, vec!["bye"]);
        assert_eq!(
            marks("I told Melanie, and Jon.").named,
            vec!["melanie", "jon"]
        );
        assert!(marks("Oh, Caroline!").named.is_empty());
        // a lower-case run that does not end the word is no name
        assert!(marks("McDonald Ab Caroline2").named.is_empty());
    }

    #[test]
    fn question_share_counts_question_sentences() {
        assert_eq!(question_share("How was it?"), 1.0);
        assert_eq!(
            question_share("Great pic! Is that recent? Looks fun!"),
            1.0 / 3.0
        );
        assert_eq!(question_share("I made ice cream.  "), 0.0);
        assert_eq!(question_share(""), 0.0);
    }

    #[test]
    fn aliases_are_prefixes_of_three_or_more() {
        assert!(is_alias("mel", "melanie"));
        assert!(is_alias("melanie smith", "mel"));
        assert!(!is_alias("me", "melanie"));
        assert!(!is_alias("", "x"));
        assert!(is_alias("jo", "jo"));
    }
}
