//! A query's plan: everything a query fixes before the controller is asked
//! anything, read in one pass over the store. Its anchors (the lexical and
//! vector rankings and their reciprocal-rank fusion), the long observations
//! its best passages point at, the entities it names that the memory knows
//! and which of them are people the memory has heard speak, the time it asks
//! about, whether it speaks in the first person or asks for help, and its
//! tokens with and without the words that only frame a question. The read
//! session (`read::ReadSession`) starts from it.

use std::collections::{BTreeSet, HashSet};

use crate::coverage::{addressed_at, speaks_in_first_person};
use crate::cues::{self, TimeCues};
use crate::derived::TimeQuery;
use crate::entities::pystr::is_space;
use crate::entities::{extract_entities, mentions};
use crate::error::Result;
use crate::filter::Allowed;
use crate::fusion::rrf;
use crate::read::SessionQuery;
use crate::related::{self, ExpandConfig};
use crate::spelling;
use crate::store::MemoryStore;
use crate::text::QUERY_TIME_WORDS;
use crate::types::{Node, NodeId};

/// Words that frame a question about a conversation rather than carry its
/// content ("what did she *say* about ..."): not part of what is asked.
pub const QUESTION_FRAME: [&str; 16] = [
    "mention",
    "mentioned",
    "say",
    "said",
    "talk",
    "talked",
    "discuss",
    "discussed",
    "tell",
    "told",
    "share",
    "shared",
    "ask",
    "asked",
    "think",
    "thought",
];

/// How deep a plan reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanConfig {
    /// How many nodes each ranking (lexical, vector, passages) reads.
    pub depth: usize,
    /// How many fused anchors the plan keeps.
    pub pool: usize,
    /// The reciprocal-rank fusion constant.
    pub kappa: f64,
    /// How the lexical ranking the anchors fuse widens rare query words
    /// (`related_terms`).
    pub expand: ExpandConfig,
}

/// What a query fixes (see the module).
#[derive(Clone, Debug)]
pub struct QueryPlan {
    /// What the read session starts from.
    pub session: SessionQuery,
    /// The fused anchors, best first, at most `pool`.
    pub fused: Vec<(NodeId, f64)>,
    /// Long observations by their best passage, best first.
    pub passage_hits: Vec<NodeId>,
    /// The named entities that are people the memory knows (all of them when
    /// it knows no speaker).
    pub asked: Vec<String>,
    pub cues: TimeCues,
    pub first_person: bool,
    pub asks_for_help: bool,
    pub asks_for_summary: bool,
    /// It asks what the one who answers said before ("what did you
    /// recommend"): see `cues::asks_what_answerer_said`.
    pub asks_what_answerer_said: bool,
    /// The query's tokens, sorted and distinct.
    pub tokens: Vec<String>,
    /// Its tokens without the asked people's names, the question frame and
    /// the time words (without the names only, when nothing else is left),
    /// sorted.
    pub content_tokens: Vec<String>,
}

impl MemoryStore {
    /// The related terms a query's words add to its lexical match: each
    /// word's other spellings (`spelling::variants`, "colour" for "color")
    /// that the searched nodes hold, at weight 1 (a query term's); and for
    /// each query word that at most
    /// `max_df_share` of the searched nodes hold (or none), its related
    /// words (`related::table`) at least `min_similarity` alike whose terms
    /// the searched nodes hold and the query does not, the `per_word` most
    /// similar, each weighing `weight` times its similarity (a term reached
    /// from two words keeps the larger), as (term, weight) in term order.
    /// Empty when `cfg` is off.
    pub fn related_terms(
        &self,
        text: &str,
        terms: &[String],
        allowed: Option<&Allowed>,
        cfg: &ExpandConfig,
    ) -> Vec<(String, f64)> {
        if !cfg.enabled || terms.is_empty() {
            return Vec::new();
        }
        let n = self.bm25.n_docs_scoped(allowed);
        if n == 0 {
            return Vec::new();
        }
        let tokenizer = self.tokenizer();
        let own: HashSet<&str> = terms.iter().map(String::as_str).collect();
        let df = |term: &str| {
            self.bm25
                .term_id(term)
                .map_or(0, |id| self.bm25.term_df_scoped(id, allowed))
        };
        // a word's term when it widens the query: the memory holds it, and
        // it is neither the query's own term nor the word's (`stem`)
        let widening = |word: &str, stem: &str| {
            let term = tokenizer.tokenize(word).into_iter().next()?;
            (!own.contains(term.as_str()) && term != stem && df(&term) > 0).then_some(term)
        };
        // a term reached twice keeps its larger weight; true when it is new
        let keep = |out: &mut Vec<(String, f64)>, term: String, weight: f64| match out
            .iter_mut()
            .find(|(t, _)| *t == term)
        {
            Some((_, w)) => {
                *w = w.max(weight);
                false
            }
            None => {
                out.push((term, weight));
                true
            }
        };
        let mut out: Vec<(String, f64)> = Vec::new();
        let mut seen_words: HashSet<String> = HashSet::new();
        for word in unicode_segmentation::UnicodeSegmentation::unicode_words(text) {
            if !word.is_ascii()
                || QUERY_TIME_WORDS
                    .iter()
                    .any(|w| word.eq_ignore_ascii_case(w))
            {
                continue;
            }
            let lower = word.to_ascii_lowercase();
            if !seen_words.insert(lower.clone()) {
                continue;
            }
            // the word's own term: a stopword has none
            let Some(stem) = tokenizer.tokenize(&lower).into_iter().next() else {
                continue;
            };
            // its other spellings ("colour" for "color") are the same word:
            // read at a query term's weight, however common the word
            for variant in spelling::variants(&lower) {
                if let Some(term) = widening(&variant, &stem) {
                    keep(&mut out, term, 1.0);
                }
            }
            if df(&stem) as f64 > cfg.max_df_share * n as f64 {
                continue;
            }
            let mut taken = 0;
            for (related, similarity) in related::table().related(&lower) {
                if taken == cfg.per_word || similarity < cfg.min_similarity {
                    break;
                }
                if let Some(term) = widening(related, &stem) {
                    if keep(&mut out, term, cfg.weight * similarity) {
                        taken += 1;
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A query's lexical terms as (term id, weight), by id: its own terms
    /// (`query_tokens`) weighing their counts, and `related` terms
    /// (`related_terms`) the index holds and the query does not.
    pub(crate) fn lexical_terms(
        &self,
        tokens: &[String],
        related: &[(String, f64)],
    ) -> Vec<(u32, f64)> {
        let mut out: Vec<(u32, f64)> = self
            .bm25
            .query_terms(tokens)
            .into_iter()
            .map(|(id, count)| (id, f64::from(count)))
            .collect();
        let own = out.len();
        for (term, weight) in related {
            if let Some(id) = self.bm25.term_id(term) {
                if !out[..own].iter().any(|&(t, _)| t == id) {
                    out.push((id, *weight));
                }
            }
        }
        out.sort_by_key(|&(id, _)| id);
        out.dedup_by_key(|&mut (id, _)| id);
        out
    }

    /// BM25 scores of `ids` for the query `text` widened by its `related`
    /// terms (`lexical_scores_scoped` when there are none).
    pub fn lexical_scores_related(
        &self,
        text: &str,
        related: &[(String, f64)],
        ids: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<f32> {
        if related.is_empty() {
            return self.lexical_scores_scoped(text, ids, allowed);
        }
        let terms = self.lexical_terms(&self.query_tokens(text), related);
        self.bm25.score_weighted_scoped(&terms, ids, allowed)
    }

    /// The plan of the query `text` with its `vector`, among the `allowed`
    /// nodes; `people`: the speakers the memory knows (lower-cased, sorted);
    /// `now`: the time relative expressions are read against. A vector of
    /// the wrong size or an out-of-range `now` is an error.
    pub fn plan_query(
        &self,
        text: &str,
        vector: &[f32],
        cfg: &PlanConfig,
        now: Option<i64>,
        allowed: Option<&Allowed>,
        people: &[String],
    ) -> Result<QueryPlan> {
        // one pass of every cue pattern over the query, read by all three
        let scan = cues::scan(text);
        let cues = cues::query_time_cues_scanned(text, now, &scan)?;
        // what is asked about: the query's terms (no time words), read once
        let terms = self.query_tokens(text);
        // the rare words' related terms widen the lexical ranking and every
        // lexical signal the session reads (`related_terms`)
        let related = self.related_terms(text, &terms, allowed, &cfg.expand);
        let lexical = if related.is_empty() {
            self.search_terms_scoped(&terms, cfg.depth, allowed)
        } else {
            let weighted = self.lexical_terms(&terms, &related);
            self.bm25
                .search_weighted_scoped(&weighted, cfg.depth, allowed)
        };
        let dense = self.search_vector_scoped(vector, cfg.depth, allowed)?;
        let lexical_ranked: Vec<NodeId> = lexical.iter().map(|&(id, _)| id).collect();
        let vector_ranked: Vec<NodeId> = dense.iter().map(|&(id, _)| id).collect();
        let mut fused = rrf(&[&vector_ranked, &lexical_ranked], cfg.kappa)?;
        fused.truncate(cfg.pool);
        let best_dense = dense.first().map_or(0.0, |&(_, s)| f64::from(s));
        let passages = self
            .passage_index()
            .search_scoped(vector, cfg.depth, allowed)?;
        // a text of one passage: its node vector, ranked above already
        let best_passage =
            best_dense.max(passages.first().map_or(0.0, |h| f64::from(h.similarity)));
        let named = self.known_names(text, allowed, people);
        let asked: Vec<String> = if people.is_empty() {
            named.clone()
        } else {
            named
                .iter()
                .filter(|e| names_a_speaker(e, people))
                .cloned()
                .collect()
        };
        let tokenizer = self.tokenizer();
        let tokens: BTreeSet<String> = tokenizer.tokenize(text).into_iter().collect();
        let terms: BTreeSet<String> = terms.into_iter().collect();
        let name_tokens: HashSet<String> =
            asked.iter().flat_map(|e| tokenizer.tokenize(e)).collect();
        let frame: HashSet<String> = QUESTION_FRAME
            .iter()
            .flat_map(|w| tokenizer.tokenize(w))
            .collect();
        let unnamed = || tokens.iter().filter(|t| !name_tokens.contains(*t));
        let mut content_tokens: Vec<String> = terms
            .iter()
            .filter(|t| !name_tokens.contains(*t) && !frame.contains(*t))
            .cloned()
            .collect();
        if content_tokens.is_empty() {
            content_tokens = unnamed().cloned().collect();
        }
        let asks_when = cues::asks_for_a_time(&cues);
        let session = SessionQuery {
            text: text.to_owned(),
            related,
            vector: vector.to_vec(),
            lexical_ranked,
            vector_ranked,
            best_lexical: lexical.first().map_or(0.0, |&(_, s)| f64::from(s)),
            best_dense,
            best_passage,
            speaker_asked: one_speaker_named(&asked, people),
            people: people.to_vec(),
            named,
            time: match (cues.constraint, asks_when) {
                (Some((lo, hi)), _) => TimeQuery::Window(lo, hi),
                (None, true) => TimeQuery::AsksWhen,
                (None, false) => TimeQuery::None,
            },
            fact_time: cues::query_fact_time_scanned(text, cues.constraint, now, &scan),
        };
        Ok(QueryPlan {
            session,
            fused,
            passage_hits: passages.iter().map(|h| h.node).collect(),
            asked,
            first_person: speaks_in_first_person(text),
            asks_for_help: cues::asks_for_help_scanned(text, &scan),
            asks_for_summary: cues::asks_for_summary_scanned(text, &scan),
            asks_what_answerer_said: cues::asks_what_answerer_said_scanned(text, &scan),
            tokens: tokens.into_iter().collect(),
            content_tokens,
            cues,
        })
    }

    /// The entities `text` names as proper nouns that some (allowed) node
    /// carries, in order of mention. Only the names the query itself carries
    /// are looked up (no scan of every entity the memory knows); a run of
    /// capitalised words may hold several names ("Is Oscar Melanie's pet?"
    /// reads as one, "oscar melanie"), so its shorter runs (up to four
    /// words) count too. A lower-case common word that happens to be an
    /// entity elsewhere is not a name here, but a lower-case word that names
    /// one of `people`, or an entity the memory knows, is where the memory's
    /// texts write it as a name (`written_as_name`, `mostly_an_entity`):
    /// people type "what does mel play" and "how was lisbon".
    fn known_names(&self, text: &str, allowed: Option<&Allowed>, people: &[String]) -> Vec<String> {
        let mut named: BTreeSet<String> =
            extract_entities(text, None, &[], &[]).into_iter().collect();
        // speakers a lower-case word names that the memory does not carry
        // under that word ("mel" in texts typed without capitals)
        let mut speakers: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for word in lower_case_words(text) {
            if named.contains(word) || !seen.insert(word) {
                continue;
            }
            // a speaker is an entity of every turn they speak, so only their
            // texts can say how they are written; any other entity must also
            // be one of most texts that hold it (the extraction found it
            // capitalised there; the cheaper check first)
            let their_names = speakers_named(word, people);
            if !their_names.is_empty() {
                if !self.written_as_name(word, allowed, &NAME_CASE_EVIDENCE) {
                    continue;
                }
                if self.carried(word, allowed) {
                    named.insert(word.to_owned());
                } else {
                    for p in their_names {
                        if !speakers.iter().any(|s| s == p) {
                            speakers.push(p.to_owned());
                        }
                    }
                }
            } else if self.carried(word, allowed) {
                // one reading of the holders for both checks
                let holders: Vec<&Node> = self
                    .latest_holders(word, allowed, NAME_CASE_EVIDENCE.texts)
                    .collect();
                if mostly_carried(&holders, word, &NAME_CASE_EVIDENCE)
                    && named_in(&holders, word, &NAME_CASE_EVIDENCE)
                {
                    named.insert(word.to_owned());
                }
            }
        }
        for name in named.clone() {
            let words: Vec<&str> = name.split(is_space).filter(|w| !w.is_empty()).collect();
            if words.len() > 1 {
                for i in 0..words.len() {
                    for j in i + 1..=(i + 4).min(words.len()) {
                        named.insert(words[i..j].join(" "));
                    }
                }
            }
        }
        let known: Vec<String> = named
            .into_iter()
            .filter(|e| self.carried(e, allowed))
            .collect();
        let mut out = if known.is_empty() {
            known
        } else {
            mentions(text, &known)
        };
        for p in speakers {
            if !out.contains(&p) && self.carried(&p, allowed) {
                out.push(p);
            }
        }
        out
    }

    /// Whether some (allowed) node carries the entity `e`.
    fn carried(&self, e: &str, allowed: Option<&Allowed>) -> bool {
        let carriers = self.nodes_with_entity(e);
        match allowed {
            None => !carriers.is_empty(),
            Some(a) => carriers.iter().any(|&id| a.contains(id)),
        }
    }

    /// Whether the memory's texts write the lower-case ASCII `word` as a
    /// name: in the latest `evidence.texts` (allowed) texts that hold it,
    /// some of its occurrences inside a sentence are capitalised and at most
    /// `evidence.max_lower_share` are not, or at least
    /// `evidence.min_addressed_share` of them address someone (texts typed
    /// without capitals). Each text is read to its first
    /// `evidence.bytes_per_text` bytes. A word no text holds, or a stopword
    /// (the index keeps no postings for it), is no name.
    pub fn written_as_name(
        &self,
        word: &str,
        allowed: Option<&Allowed>,
        evidence: &NameCaseEvidence,
    ) -> bool {
        let holders: Vec<&Node> = self.latest_holders(word, allowed, evidence.texts).collect();
        named_in(&holders, word, evidence)
    }

    /// Whether the memory reads the lower-case word `word` as an entity in
    /// its texts: of the latest `evidence.texts` (allowed) texts holding it,
    /// at most `evidence.max_lower_share` do not carry it as an entity (the
    /// extraction found no capitalised mention there). Cheaper than reading
    /// the texts (`written_as_name`), and right for any entity but a
    /// speaker, whom every turn they speak carries.
    pub fn mostly_an_entity(
        &self,
        word: &str,
        allowed: Option<&Allowed>,
        evidence: &NameCaseEvidence,
    ) -> bool {
        let holders: Vec<&Node> = self.latest_holders(word, allowed, evidence.texts).collect();
        mostly_carried(&holders, word, evidence)
    }

    /// The latest `n` (allowed) nodes whose texts hold `word`'s index term,
    /// newest first; none for a stopword.
    fn latest_holders<'a>(
        &'a self,
        word: &str,
        allowed: Option<&'a Allowed>,
        n: usize,
    ) -> impl Iterator<Item = &'a Node> + 'a {
        let term = self.tokenizer().tokenize(word).into_iter().next();
        term.into_iter()
            .flat_map(move |t| {
                self.bm25
                    .term_docs(&t)
                    .rev()
                    .filter(|&id| allowed.is_none_or(|a| a.contains(id)))
                    .take(n)
                    .collect::<Vec<_>>()
            })
            .filter_map(|id| self.get(id))
    }
}

/// `MemoryStore::written_as_name`'s reading of the texts `holders`.
fn named_in(holders: &[&Node], word: &str, evidence: &NameCaseEvidence) -> bool {
    let mut uses = WordUses::default();
    for node in holders {
        let u = case_of_occurrences(head(&node.content, evidence.bytes_per_text), word);
        uses.all += u.all;
        uses.capitalised += u.capitalised;
        uses.lower += u.lower;
        uses.addressed += u.addressed;
    }
    let by_case = uses.capitalised > 0
        && (uses.lower as f64) <= evidence.max_lower_share * (uses.capitalised + uses.lower) as f64;
    // where the texts are typed without capitals, being spoken to marks a
    // name: nobody writes "hey user,"
    let by_address = uses.addressed > 0
        && uses.addressed as f64 >= evidence.min_addressed_share * uses.all as f64;
    by_case || by_address
}

/// `MemoryStore::mostly_an_entity`'s reading of the nodes `holders`.
fn mostly_carried(holders: &[&Node], word: &str, evidence: &NameCaseEvidence) -> bool {
    let carry = holders
        .iter()
        .filter(|n| n.entities.iter().any(|e| e == word))
        .count();
    let not = holders.len() - carry;
    carry > 0 && (not as f64) <= evidence.max_lower_share * holders.len() as f64
}

/// What the memory's texts must show before a lower-case query word is
/// read as a name it knows (`MemoryStore::written_as_name`; for an entity
/// that is not a speaker, `MemoryStore::mostly_an_entity` too).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NameCaseEvidence {
    /// How many of the latest texts holding the word are read.
    pub texts: usize,
    /// The largest share of the word's occurrences inside a sentence that
    /// may be in lower case: "Mel" always capitalised is a name, "user" in
    /// "the user's settings" is a word.
    pub max_lower_share: f64,
    /// A speaker's name is also read where at least this share of its
    /// occurrences address someone ("hey mel,"), in whatever case: in texts
    /// typed without capitals that is what tells a name from a word.
    pub min_addressed_share: f64,
    /// How much of each text is read, in bytes (its head, cut at a space):
    /// a memory of long documents must not read megabytes for a query word.
    pub bytes_per_text: usize,
}

/// The evidence `known_names` asks for.
pub const NAME_CASE_EVIDENCE: NameCaseEvidence = NameCaseEvidence {
    texts: 32,
    max_lower_share: 0.2,
    min_addressed_share: 0.1,
    bytes_per_text: 16 * 1024,
};

/// The first `bytes` bytes of `text` at most, cut at whitespace (so no word
/// is cut), or the whole text when it is shorter.
fn head(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if text[end..].starts_with(char::is_whitespace) {
        return &text[..end];
    }
    match text[..end].rfind(char::is_whitespace) {
        Some(at) => &text[..at],
        None => "",
    }
}

/// The words of `text` made of ASCII letters that start in lower case
/// (split at every other character, so "mel's" gives "mel").
fn lower_case_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 2 && w.as_bytes()[0].is_ascii_lowercase())
}

/// What may stand between a sentence's end and its first word.
const OPENING_MARKS: &str = "\"'“‘([*-";
/// What ends a sentence, as `case_of_occurrences` reads one (a Markdown
/// heading's '#' opens one).
const SENTENCE_ENDS: &str = ".!?:;\n#";

/// How a text writes a word (`case_of_occurrences`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WordUses {
    /// Whole-word occurrences, in any case and place.
    pub all: usize,
    /// Those inside a sentence written capitalised or in capitals ("Mel",
    /// "NYC").
    pub capitalised: usize,
    /// Those inside a sentence written in lower case.
    pub lower: usize,
    /// Those that address someone, in any case ("hey mel,", "Thanks, Mel!").
    pub addressed: usize,
}

/// How the ASCII word `word` (lower case) occurs in `text` as a whole word.
/// An occurrence that opens a sentence, a line or the text counts as
/// neither capitalised nor lower case: it says nothing about the word.
pub fn case_of_occurrences(text: &str, word: &str) -> WordUses {
    let mut uses = WordUses::default();
    if word.is_empty() {
        return uses;
    }
    // ASCII lower-casing keeps every byte offset
    let folded = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    for (at, _) in folded.match_indices(word) {
        let end = at + word.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if before.is_some_and(char::is_alphanumeric) || after.is_some_and(char::is_alphanumeric) {
            continue;
        }
        uses.all += 1;
        if addressed_at(text, at, end) {
            uses.addressed += 1;
        }
        // a line's start opens a sentence too (a heading, a list's item)
        let opens_sentence = text[..at]
            .chars()
            .rev()
            .find(|&c| !(c != '\n' && (c.is_whitespace() || OPENING_MARKS.contains(c))))
            .is_none_or(|c| SENTENCE_ENDS.contains(c));
        if opens_sentence {
            continue;
        }
        // in capitals ("NYC", "UI") is as good as capitalised
        if bytes[at].is_ascii_lowercase() {
            uses.lower += 1;
        } else {
            uses.capitalised += 1;
        }
    }
    uses
}

/// The people of `people` (sorted) that `entity` names as
/// `coverage::is_alias` reads names, in order, found the way
/// `names_a_speaker` finds one: those its first word is a prefix of are a
/// range of the sorted list, and those that are a prefix of it are among
/// its own prefixes.
pub fn speakers_named<'a>(entity: &str, people: &'a [String]) -> Vec<&'a str> {
    let first = entity
        .split(is_space)
        .find(|w| !w.is_empty())
        .unwrap_or(entity);
    let mut out: Vec<&'a str> = Vec::new();
    if first.is_empty() {
        return out;
    }
    let mut take = |s: &str| {
        if let Ok(i) = people.binary_search_by(|p| p.as_str().cmp(s)) {
            out.push(people[i].as_str());
        }
    };
    take(entity);
    take(first);
    let first_len = first.chars().count();
    if first_len >= 3 {
        // the people whose names start with it (itself counted above)
        let at = people.partition_point(|p| p.as_str() < first);
        out.extend(
            people[at..]
                .iter()
                .take_while(|p| p.starts_with(first))
                .map(String::as_str),
        );
        // its own prefixes of three characters or more, shorter than itself
        for (i, _) in first.char_indices().skip(3) {
            if let Ok(j) = people.binary_search_by(|p| p.as_str().cmp(&first[..i])) {
                out.push(people[j].as_str());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The one person of `people` (sorted) that the `asked` names point to
/// (`speakers_named`), or None when they name nobody or several people.
pub fn one_speaker_named(asked: &[String], people: &[String]) -> Option<String> {
    let mut named: Vec<&str> = asked
        .iter()
        .flat_map(|e| speakers_named(e, people))
        .collect();
    named.sort_unstable();
    named.dedup();
    match named[..] {
        [one] => Some(one.to_owned()),
        _ => None,
    }
}

/// Whether `entity` names one of `people` (sorted) as `coverage::is_alias`
/// reads names ("mel" names "melanie"): `speakers_named` finds someone.
pub fn names_a_speaker(entity: &str, people: &[String]) -> bool {
    !speakers_named(entity, people).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::is_alias;
    use proptest::prelude::*;

    /// A store of `(text, speaker)` turns, each carrying its speaker and
    /// the entities its text names.
    fn spoken(turns: &[(&str, &str)]) -> MemoryStore {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        for &(text, who) in turns {
            let mut n = NewNode::new(text, vec![1.0, 0.5]);
            n.entities = extract_entities(text, Some(who), &[], &[]);
            s.add_node(n).unwrap();
        }
        s
    }

    /// A plan that reads five nodes a ranking and keeps `pool`.
    fn plan_config(pool: usize) -> PlanConfig {
        PlanConfig {
            depth: 5,
            pool,
            kappa: 60.0,
            expand: ExpandConfig::default(),
        }
    }

    proptest! {
        /// The sorted-list reading equals asking `is_alias` of every person.
        #[test]
        fn names_a_speaker_is_is_alias_of_someone(
            entity in "[a-zé ]{0,14}",
            people in prop::collection::btree_set("[a-zé]{1,9}", 0..6),
        ) {
            let people: Vec<String> = people.into_iter().collect();
            prop_assert_eq!(
                names_a_speaker(&entity, &people),
                people.iter().any(|p| is_alias(&entity, p))
            );
        }

        /// The people an entity names, read from the sorted list, are
        /// those `is_alias` finds asking each person in turn.
        #[test]
        fn speakers_named_is_is_alias_of_each(
            entity in "[a-zé ]{0,14}",
            people in prop::collection::btree_set("[a-zé]{1,9}", 0..6),
        ) {
            let people: Vec<String> = people.into_iter().collect();
            let expected: Vec<&str> = people
                .iter()
                .filter(|p| is_alias(&entity, p))
                .map(String::as_str)
                .collect();
            prop_assert_eq!(speakers_named(&entity, &people), expected);
        }

        /// `case_of_occurrences` equals reading the text's maximal runs of
        /// alphanumeric chars one by one: a run that spells the word (ASCII
        /// case aside) counts unless nothing but spaces and opening marks
        /// stand between it and the text's start or a sentence's end, or it
        /// is written in capitals throughout.
        #[test]
        fn case_of_occurrences_is_a_scan_of_words(
            text in "[ .!?,:;'\"(*#\n\ta-zA-Z0-9é-]{0,60}",
            word in "[a-z]{1,3}",
        ) {
            let chars: Vec<(usize, char)> = text.char_indices().collect();
            let plain: Vec<char> = text.chars().collect();
            let (mut cap, mut low, mut all, mut addressed) = (0, 0, 0, 0);
            let mut i = 0;
            while i < chars.len() {
                if !chars[i].1.is_alphanumeric() {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < chars.len() && chars[i].1.is_alphanumeric() {
                    i += 1;
                }
                let run: String = chars[start..i].iter().map(|&(_, c)| c).collect();
                if !run.eq_ignore_ascii_case(&word) {
                    continue;
                }
                all += 1;
                if crate::coverage::is_vocative(&plain, start, i) {
                    addressed += 1;
                }
                let mut j = start;
                let mut opens = true;
                while j > 0 {
                    j -= 1;
                    let c = chars[j].1;
                    if c != '\n' && (c.is_whitespace() || "\"'“‘([*-".contains(c)) {
                        continue;
                    }
                    opens = ".!?:;\n#".contains(c);
                    break;
                }
                if opens {
                    continue;
                }
                let first = run.chars().next().unwrap();
                if first.is_ascii_lowercase() {
                    low += 1;
                } else {
                    cap += 1;
                }
            }
            let got = case_of_occurrences(&text, &word);
            prop_assert_eq!(
                (got.capitalised, got.lower, got.all, got.addressed),
                (cap, low, all, addressed)
            );
        }
    }

    #[test]
    fn a_head_is_cut_after_whitespace() {
        assert_eq!(head("short", 16), "short");
        assert_eq!(head("one two three", 9), "one two");
        assert_eq!(head("one two three", 8), "one two");
        assert_eq!(head("one two three", 7), "one two");
        assert_eq!(head("one two three", 6), "one");
        assert_eq!(head("unbroken", 4), "");
        // a cut inside a char moves back to its start first
        assert_eq!(head("ab é cd", 4), "ab");
    }

    /// Only each text's head is read: a name past it gives no evidence.
    #[test]
    fn the_evidence_reads_each_texts_head() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let far = format!(
            "{}We met Ana there.",
            "so ".repeat(NAME_CASE_EVIDENCE.bytes_per_text / 3)
        );
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        s.add_node(NewNode::new(far.as_str(), vec![1.0, 0.5]))
            .unwrap();
        assert!(!s.written_as_name("ana", None, &NAME_CASE_EVIDENCE));
        s.add_node(NewNode::new("Then we met Ana.", vec![1.0, 0.5]))
            .unwrap();
        assert!(s.written_as_name("ana", None, &NAME_CASE_EVIDENCE));
    }

    #[test]
    fn case_of_occurrences_reads_words_inside_sentences() {
        let uses = |text: &str, word: &str| {
            let u = case_of_occurrences(text, word);
            (u.capitalised, u.lower, u.all, u.addressed)
        };
        // the sentence's first word and capitals count only as occurrences;
        // "Mel," opening the text and "Thanks, Mel!" address someone
        assert_eq!(uses("Mel, hi. Thanks, Mel! MEL rocks", "mel"), (1, 0, 3, 2));
        assert_eq!(
            uses("The user's app. User data: the USER", "user"),
            (1, 1, 3, 0)
        );
        assert_eq!(uses("melody and Melanie", "mel"), (0, 0, 0, 0));
        // a line's start opens a sentence: a heading says nothing
        assert_eq!(
            uses("## Summary\n**Summary**: the summary", "summary"),
            (0, 1, 3, 0)
        );
        // a Markdown heading opens a sentence wherever it stands
        assert_eq!(uses("done ``` ### Summary of it", "summary"), (0, 0, 1, 0));
        // quotes and brackets are looked through
        assert_eq!(uses("ask \"Mel\" now", "mel"), (1, 0, 1, 0));
        assert_eq!(uses("Done. (Mel) now", "mel"), (0, 0, 1, 0));
        assert_eq!(uses("ask Mel now", "mel"), (1, 0, 1, 0));
        // typed without capitals: addressed, in lower case
        assert_eq!(
            uses("hey mel, how was it? mel's kids ok", "mel"),
            (0, 1, 2, 1)
        );
        // an address needs punctuation after it: "great user experience" is none
        assert_eq!(
            uses("great user experience. Hi user!", "user"),
            (0, 2, 2, 1)
        );
    }

    /// In texts typed without capitals a speaker's name still reads as a
    /// name where the texts address them ("hey mel,"); a word they use
    /// without addressing anyone does not.
    #[test]
    fn lower_case_names_of_a_memory_typed_in_lower_case() {
        let s = spoken(&[
            ("hey mel, i started playing the violin.", "Caroline"),
            (
                "thanks caroline! the user guide says mel's violin is fine",
                "Melanie",
            ),
            ("the user guide was long", "Caroline"),
        ]);
        let cfg = plan_config(5);
        let people: Vec<String> = ["caroline", "melanie", "user"].map(str::to_owned).to_vec();
        let plan = |q: &str| {
            s.plan_query(q, &[1.0, 0.0], &cfg, None, None, &people)
                .unwrap()
        };
        assert_eq!(
            plan("what does mel play").session.speaker_asked.as_deref(),
            Some("melanie")
        );
        assert_eq!(plan("what did caroline start").asked, ["caroline"]);
        assert!(plan("what did the user guide say").asked.is_empty());
    }

    /// A query that writes a speaker's name in lower case names them as the
    /// capitalised query does when the memory writes the name capitalised;
    /// a word the memory writes in lower case ("user") names nobody, nor
    /// does a name no text holds.
    #[test]
    fn lower_case_names_the_memory_writes_capitalised() {
        let s = spoken(&[
            ("Hey Mel! I started playing the violin.", "Caroline"),
            ("Thanks Caroline, the violin sounds great.", "Melanie"),
            ("The user said the app is slow for the user.", "Melanie"),
            ("I told the user about it, Melanie.", "Caroline"),
            ("Nice.", "Ana"),
            ("We flew to Lisbon and I ate an apple.", "Caroline"),
            ("Lisbon was sunny; an apple a day, they say.", "Melanie"),
            ("I like Apple phones, the apple pie too.", "Caroline"),
        ]);
        let cfg = plan_config(5);
        let people: Vec<String> = ["ana", "caroline", "melanie", "user"]
            .map(str::to_owned)
            .to_vec();
        let plan = |q: &str| {
            s.plan_query(q, &[1.0, 0.0], &cfg, None, None, &people)
                .unwrap()
        };
        for (lower, upper) in [
            ("what does melanie play?", "What does Melanie play?"),
            ("what did mel's friend play", "What did Mel's friend play"),
            (
                "did caroline and melanie play",
                "Did Caroline and Melanie play",
            ),
            // a place the texts write as a name, though nobody speaks as it
            ("did mel like lisbon", "Did Mel like Lisbon"),
        ] {
            let (a, b) = (plan(lower), plan(upper));
            assert_eq!(a.session.named, b.session.named, "{lower}");
            assert_eq!(a.asked, b.asked, "{lower}");
            assert_eq!(a.session.speaker_asked, b.session.speaker_asked, "{lower}");
            assert_eq!(a.content_tokens, b.content_tokens, "{lower}");
        }
        assert_eq!(
            plan("what does melanie play?")
                .session
                .speaker_asked
                .as_deref(),
            Some("melanie")
        );
        // "user" is written in lower case; "ana" is in no text
        assert!(!s.written_as_name("user", None, &NAME_CASE_EVIDENCE));
        assert!(plan("what did the user say").asked.is_empty());
        assert!(plan("what did ana say").asked.is_empty());
        // "apple": an entity in one of the three texts that hold the word
        assert!(!s.mostly_an_entity("apple", None, &NAME_CASE_EVIDENCE));
        assert!(s.mostly_an_entity("lisbon", None, &NAME_CASE_EVIDENCE));
        assert!(plan("did she eat an apple").session.named.is_empty());
        assert_eq!(plan("did she eat an Apple").session.named, ["apple"]);
        assert!(s.written_as_name("melanie", None, &NAME_CASE_EVIDENCE));
        // outside the allowed nodes the texts show nothing
        let only_last = Allowed::from_sorted(vec![4]);
        assert!(!s.written_as_name("melanie", Some(&only_last), &NAME_CASE_EVIDENCE));
    }

    #[test]
    fn a_plan_reads_names_people_and_content() {
        let s = spoken(&[
            ("Caroline went to Oregon to paint.", "Caroline"),
            ("Melanie said the desert was lovely.", "Melanie"),
        ]);
        let cfg = plan_config(3);
        let people = vec!["caroline".to_owned(), "melanie".to_owned()];
        let q = "What did Caroline say about painting in Oregon?";
        let plan = s
            .plan_query(q, &[1.0, 0.0], &cfg, None, None, &people)
            .unwrap();
        assert_eq!(plan.session.named, ["caroline", "oregon"]);
        assert_eq!(plan.asked, ["caroline"]);
        // "say" frames the question; the name is whom it asks about
        assert_eq!(plan.content_tokens, ["oregon", "paint"]);
        assert!(plan.tokens.contains(&"say".to_owned()));
        assert_eq!(plan.fused.len(), 2);
        assert!(!plan.first_person && !plan.asks_for_help);
        // only the frame and the name: the frame stays
        let plan = s
            .plan_query(
                "What did Caroline say?",
                &[1.0, 0.0],
                &cfg,
                None,
                None,
                &people,
            )
            .unwrap();
        assert_eq!(plan.content_tokens, ["say"]);
        // a memory that knows no speaker asks about every name
        let plan = s.plan_query(q, &[1.0, 0.0], &cfg, None, None, &[]).unwrap();
        assert_eq!(plan.asked, ["caroline", "oregon"]);
    }

    /// A rare query word is widened with its related words the memory
    /// holds ("work" finds "job"), and the plan's lexical ranking puts the
    /// turn that says "job" first; a word many turns hold is not widened; switched off, the
    /// lexical ranking is the query's own terms'.
    #[test]
    fn rare_query_words_find_their_related_words() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let flat = s
            .add_node(NewNode::new(
                "Lena found a flat near the river.",
                vec![0.0, 1.0],
            ))
            .unwrap();
        let job = s
            .add_node(NewNode::new(
                "Lena has a new job at a marine lab.",
                vec![0.0, 1.0],
            ))
            .unwrap();
        let query = "Where does Lena work?";
        let terms = s.query_tokens(query);
        let on = ExpandConfig::default();
        let related = s.related_terms(query, &terms, None, &on);
        assert!(
            related
                .iter()
                .any(|(t, w)| t == "job" && *w > 0.3 && *w <= on.weight),
            "{related:?}"
        );
        assert!(related.iter().all(|(t, _)| !terms.contains(t)));
        let cfg = |expand| PlanConfig {
            depth: 5,
            pool: 5,
            kappa: 60.0,
            expand,
        };
        let plan = s
            .plan_query(query, &[1.0, 0.0], &cfg(on), None, None, &[])
            .unwrap();
        assert_eq!(plan.session.lexical_ranked[0], job);
        // off: "lena" alone ranks both, the shorter text first
        let off = ExpandConfig {
            enabled: false,
            ..on
        };
        assert!(s.related_terms(query, &terms, None, &off).is_empty());
        let plain = s
            .plan_query(query, &[1.0, 0.0], &cfg(off), None, None, &[])
            .unwrap();
        assert_eq!(
            plain.session.lexical_ranked,
            s.search_lexical(query, 5)
                .iter()
                .map(|&(id, _)| id)
                .collect::<Vec<_>>()
        );
        assert!(plain.session.related.is_empty());
        let _ = flat;
        // "work" in half the turns is common here: not widened
        s.add_node(NewNode::new("I work from home.", vec![0.0, 1.0]))
            .unwrap();
        assert!(s
            .related_terms(query, &s.query_tokens(query), None, &on)
            .is_empty());
    }

    /// A query word's other spelling finds the turn written in it, at a
    /// query term's weight, however many turns hold the word: "practise"
    /// finds "practice", "favorite color" finds "favourite colour"; a
    /// spelling no turn holds adds nothing.
    #[test]
    fn other_spellings_find_each_other() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let practice = s
            .add_node(NewNode::new("Practice went great today.", vec![0.0, 1.0]))
            .unwrap();
        let colour = s
            .add_node(NewNode::new("My favourite colour is teal.", vec![0.0, 1.0]))
            .unwrap();
        for i in 0..4 {
            // "color" common here: a variant is read however common
            s.add_node(NewNode::new(
                format!("The color of wall {i}."),
                vec![0.0, 1.0],
            ))
            .unwrap();
        }
        let on = ExpandConfig::default();
        let cfg = PlanConfig {
            depth: 5,
            pool: 5,
            kappa: 60.0,
            expand: on,
        };
        for (query, want, node) in [
            ("How long did she practise?", "practic", practice),
            ("What is her favorite color?", "favourit", colour),
        ] {
            let terms = s.query_tokens(query);
            let related = s.related_terms(query, &terms, None, &on);
            assert!(
                related.iter().any(|(t, w)| t == want && *w == 1.0),
                "{query}: {related:?}"
            );
            let plan = s
                .plan_query(query, &[1.0, 0.0], &cfg, None, None, &[])
                .unwrap();
            assert_eq!(plan.session.lexical_ranked[0], node, "{query}");
        }
        // "honour" is no turn's: nothing added for it
        let query = "Did she honor it?";
        let related = s.related_terms(query, &s.query_tokens(query), None, &on);
        assert!(
            related.iter().all(|(t, _)| !t.starts_with("honour")),
            "{related:?}"
        );
    }

    /// A query that asks only what holds now asks for no time: the turns
    /// that state one get no time hint; a recent event or any other time
    /// cue still asks.
    /// "now" says when a query asks about, not what: a turn that only
    /// shares it with the query is not ranked for it, and it is no content
    /// word; a query of time words alone still searches them.
    #[test]
    fn time_words_are_no_query_terms() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let scales = s
            .add_node(NewNode::new("I practise slow scales now.", vec![0.0, 1.0]))
            .unwrap();
        let milk = s
            .add_node(NewNode::new(
                "I take soy milk in my coffee.",
                vec![0.0, 1.0],
            ))
            .unwrap();
        s.add_node(NewNode::new(
            "The release went out on Monday.",
            vec![0.0, 1.0],
        ))
        .unwrap();
        assert_eq!(
            s.query_tokens("What milk do I take in my coffee now?"),
            s.tokenize("What milk do I take in my coffee?")
        );
        // words, not stems: "nowadays" is one, "now" another
        assert_eq!(
            s.query_tokens("Nowadays, what now-famous show?"),
            s.tokenize("what famous show?")
        );
        let ranked: Vec<NodeId> = s
            .search_lexical("What milk do I take nowadays, now?", 5)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ranked, [milk]);
        let scores = s.lexical_scores_scoped("milk now", &[scales, milk], None);
        assert!(scores[0] == 0.0 && scores[1] > 0.0, "{scores:?}");
        // nothing else in the query: its time words are its terms
        assert_eq!(s.search_lexical("now?", 5)[0].0, scales);
        let cfg = PlanConfig {
            depth: 5,
            pool: 3,
            kappa: 60.0,
            expand: ExpandConfig::default(),
        };
        let plan = s
            .plan_query(
                "What milk do I take now?",
                &[1.0, 0.0],
                &cfg,
                None,
                None,
                &[],
            )
            .unwrap();
        assert!(plan.tokens.contains(&"now".to_owned()));
        assert!(!plan.content_tokens.contains(&"now".to_owned()));
    }

    #[test]
    fn only_the_present_asks_for_no_time() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        s.add_node(NewNode::new("I booked flights for June.", vec![1.0, 0.5]))
            .unwrap();
        let cfg = PlanConfig {
            depth: 5,
            pool: 3,
            kappa: 60.0,
            expand: ExpandConfig::default(),
        };
        let time = |q: &str| {
            s.plan_query(q, &[1.0, 0.0], &cfg, None, None, &[])
                .unwrap()
                .session
                .time
        };
        for q in [
            "What milk does Maya take in her coffee now?",
            "Which tool orchestrates our pipelines currently?",
            "Does she still live in Porto?",
            "What milk does Maya take?",
        ] {
            assert_eq!(time(q), TimeQuery::None, "{q}");
        }
        for q in [
            "What did Melanie paint recently?",
            "What is the latest tool she uses now?",
            "When did Maya switch to soy milk?",
            "How long has she lived in Porto now?",
            "What did she drink before she switched, these days?",
            "What did Maya do last weekend?",
        ] {
            assert_eq!(time(q), TimeQuery::AsksWhen, "{q}");
        }
    }

    #[test]
    fn requests_for_help() {
        for q in [
            "Can you help me plan?",
            "How do I set up Dagster?",
            "please RECOMMEND a book",
        ] {
            assert!(cues::asks_for_help(q), "{q}");
        }
        for q in ["What did Melanie paint?", "Canyon trips", "I explained it"] {
            assert!(!cues::asks_for_help(q), "{q}");
        }
    }

    #[test]
    fn requests_for_a_summary() {
        for q in [
            "Can you summarize how my project went?",
            "Give me a quick recap of the trip plans",
            "An overview of what we decided, please",
            "Summarise my progress since May",
        ] {
            assert!(cues::asks_for_summary(q), "{q}");
        }
        for q in [
            "What did Melanie paint?",
            "recapture the flag",
            "a summer overlook",
        ] {
            assert!(!cues::asks_for_summary(q), "{q}");
        }
    }

    #[test]
    fn questions_about_what_the_answerer_said() {
        for q in [
            "What approach did you recommend for my resume?",
            "How did you RECOMMEND managing the retries?",
            "Which options have you already suggested?",
            "the movie options you recommended for our evening",
            "What was your earlier advice on the cache?",
            "Remind me what you told me about Dagster",
        ] {
            assert!(cues::asks_what_answerer_said(q), "{q}");
        }
        for q in [
            "Can you recommend a book?",
            "What would you suggest I do?",
            "What did I say about my kids?",
            "What did Melanie recommend?",
            "Did you know I moved?",
            "your advisor said no",
        ] {
            assert!(!cues::asks_what_answerer_said(q), "{q}");
        }
    }
}
