//! Each node's sentences as coverage reads them, worked out once, when the
//! node is written, and kept in the snapshot: which of the node's terms each
//! sentence holds, whether it is a question, and whether it speaks in the
//! first or the second person. A query's coverage then reads these marks
//! instead of splitting and tokenising the text of every node it assesses.
//!
//! A sentence's terms are positions in the node's own lexical entry (its
//! sorted term list, `Bm25Index::doc_terms`), not term ids: ids are
//! recycled as other nodes are forgotten and renumbered by a snapshot load,
//! while a node's own entry lives and dies with it.
//!
//! Where no word spans a sentence stop, the sentences' tokens, one after
//! the other, are the text's: one tokenisation feeds the lexical index and
//! the marks. A text where one may (`may_straddle`: "3.5", "e.g." split at
//! the period) is tokenised twice, whole for the index and sentence by
//! sentence for the marks; a sentence token its entry lacks ("3", "5") is
//! kept as a piece of its sentence.

use serde::{Deserialize, Serialize};

use crate::coverage::{is_question, person_marks, sentence_spans};
use crate::error::{Error, Result};
use crate::hashing::ShortKeyMap;
use crate::text::Tokenizer;
use crate::types::NodeId;

/// The sentence is a question (its words weigh half).
pub const QUESTION: u8 = 1;
/// The sentence speaks in the first person.
pub const FIRST_PERSON: u8 = 2;
/// The sentence speaks to someone (the second person).
pub const SECOND_PERSON: u8 = 4;
const ALL_MARKS: u8 = QUESTION | FIRST_PERSON | SECOND_PERSON;

/// One node's sentences (those with at least one token), in text order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMarks {
    /// Each sentence's distinct terms, ascending, as positions in the
    /// node's lexical entry, one sentence after the other.
    pub terms: Vec<u32>,
    /// Each sentence: where its terms end in `terms`, and its marks
    /// (`QUESTION`, `FIRST_PERSON`, `SECOND_PERSON`).
    pub sentences: Vec<(u32, u8)>,
    /// The tokens of a sentence its whole text does not hold (the pieces
    /// of a word that spans a stop: "3" and "5" of "3.5"), as (sentence,
    /// token), by sentence.
    pub pieces: Vec<(u32, String)>,
    /// Whether the sentences' tokens, one after the other, are the whole
    /// text's (no word spans a stop): then their terms are all it holds.
    pub whole: bool,
}

impl NodeMarks {
    /// Each sentence's terms and marks, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u32], u8)> + '_ {
        let mut start = 0usize;
        self.sentences.iter().map(move |&(end, marks)| {
            let terms = &self.terms[start..end as usize];
            start = end as usize;
            (terms, marks)
        })
    }

    /// The pieces of sentence `k` (see `pieces`).
    pub fn pieces_of(&self, k: usize) -> impl Iterator<Item = &str> + '_ {
        let from = self.pieces.partition_point(|(s, _)| (*s as usize) < k);
        self.pieces[from..]
            .iter()
            .take_while(move |(s, _)| *s as usize == k)
            .map(|(_, t)| t.as_str())
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.terms.capacity() * 4
            + self.sentences.capacity() * 8
            + self.pieces.iter().map(|(_, t)| 32 + t.len()).sum::<usize>()
    }

    /// Check marks read from a file against the node's lexical entry of
    /// `n_terms` terms: every position in range, ascending within a
    /// sentence, the ends in order, no unknown mark bits.
    pub fn validate(&self, n_terms: usize) -> std::result::Result<(), String> {
        let mut start = 0usize;
        for &(end, marks) in &self.sentences {
            let end = end as usize;
            if end < start || end > self.terms.len() {
                return Err(format!("a sentence ends at {end} after {start}"));
            }
            if marks & !ALL_MARKS != 0 {
                return Err(format!("unknown sentence marks {marks:#x}"));
            }
            let s = &self.terms[start..end];
            if s.windows(2).any(|w| w[0] >= w[1]) || s.iter().any(|&t| t as usize >= n_terms) {
                return Err("sentence terms out of order or range".into());
            }
            start = end;
        }
        if start != self.terms.len() {
            return Err("terms past the last sentence".into());
        }
        let in_order = self.pieces.windows(2).all(|w| w[0].0 <= w[1].0);
        let past = self
            .pieces
            .last()
            .is_some_and(|(k, _)| *k as usize >= self.sentences.len());
        if !in_order || past {
            return Err("pieces out of order or past the last sentence".into());
        }
        if self.whole && !self.pieces.is_empty() {
            return Err("pieces in a text whose sentences are its tokens".into());
        }
        Ok(())
    }
}

/// Whether tokenising `text` sentence by sentence may give other tokens
/// than tokenising it whole: a period between two characters that may be
/// word characters ("3.5", "e.g", "é.b": word segmentation joins them), or
/// a non-ASCII character right after a stop (combining marks and format
/// characters attach to what precedes them). Conservative: false means the
/// sentences' tokens, one after the other, are the whole text's.
pub fn may_straddle(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len()).any(|i| risky_stop(b, i))
}

/// Whether byte `i` of `b` is a stop that may sit inside a word (see `may_straddle`).
fn risky_stop(b: &[u8], i: usize) -> bool {
    let c = b[i];
    if !matches!(c, b'.' | b'!' | b'?') {
        return false;
    }
    let wordy = |c: u8| c.is_ascii_alphanumeric() || c >= 0x80;
    let next = b.get(i + 1).copied();
    next.is_some_and(|n| n >= 0x80)
        || (c == b'.' && i > 0 && wordy(b[i - 1]) && next.is_some_and(wordy))
}

/// A text's sentences (`coverage::sentence_spans`) and their tokens,
/// tokenised once: all tokens back to back in one buffer.
pub struct SentenceTokens<'t> {
    sentences: Vec<&'t str>,
    buffer: String,
    /// Each token's end in `buffer`.
    token_ends: Vec<u32>,
    /// Each token's word's start in the text (bytes).
    token_starts: Vec<u32>,
    /// Each sentence's end in `token_ends`.
    sentence_ends: Vec<u32>,
}

impl<'t> SentenceTokens<'t> {
    pub fn new(text: &'t str, tokenizer: &Tokenizer) -> Self {
        let sentences = sentence_spans(text);
        let mut out = SentenceTokens {
            sentence_ends: Vec::with_capacity(sentences.len()),
            sentences,
            buffer: String::with_capacity(text.len()),
            token_ends: Vec::new(),
            token_starts: Vec::new(),
        };
        for sentence in &out.sentences {
            let offset = sentence.as_ptr() as usize - text.as_ptr() as usize;
            tokenizer.for_each_token_at(sentence, |at, t| {
                out.buffer.push_str(t);
                out.token_ends.push(out.buffer.len() as u32);
                out.token_starts.push((offset + at) as u32);
            });
            out.sentence_ends.push(out.token_ends.len() as u32);
        }
        out
    }

    /// Every token, sentence after sentence.
    pub fn tokens(&self) -> impl Iterator<Item = &str> + '_ {
        let mut start = 0usize;
        self.token_ends.iter().map(move |&end| {
            let t = &self.buffer[start..end as usize];
            start = end as usize;
            t
        })
    }

    /// The text's sentences in runs that tokenise on their own: a run ends
    /// at a sentence whose stops cannot sit inside a word, so the runs'
    /// tokens, one run after the other, are the whole text's (a run of one
    /// sentence: that sentence's tokens). As (first, last + 1) sentence
    /// indices; None when a stop before the first sentence may sit inside a
    /// word (the caller tokenises the text whole).
    pub fn runs(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let b = text.as_bytes();
        let offset = |s: &str| s.as_ptr() as usize - text.as_ptr() as usize;
        let lead = self.sentences.first().map_or(b.len(), |s| offset(s));
        if (0..lead).any(|i| risky_stop(b, i)) {
            return None;
        }
        let mut out = Vec::new();
        let mut first = 0;
        for (j, sentence) in self.sentences.iter().enumerate() {
            let end = offset(sentence) + sentence.len();
            let body = sentence.trim_end_matches(['.', '!', '?']).len();
            let joins = (offset(sentence) + body..end).any(|i| risky_stop(b, i));
            if !joins || j + 1 == self.sentences.len() {
                out.push((first, j + 1));
                first = j + 1;
            }
        }
        Some(out)
    }

    /// Hand `push` the whole text's tokens (what the lexical index keeps),
    /// read off `runs` (`SentenceTokens::runs` of `text`): a run of one
    /// sentence gives its own tokens, a longer run its sentences' tokens
    /// with the words around each joint tokenised again (`run_windows`), or
    /// its text tokenised whole where a window cannot be cut.
    /// Returns how many tokens each run gave.
    pub fn push_text_tokens(
        &self,
        text: &str,
        runs: &[(usize, usize)],
        tokenizer: &Tokenizer,
        push: &mut dyn FnMut(&str),
    ) -> Vec<usize> {
        let mut counts = Vec::with_capacity(runs.len());
        for &(from, to) in runs {
            let mut n = 0;
            let mut count = |t: &str| {
                push(t);
                n += 1;
            };
            if to - from == 1 {
                self.sentence_tokens(from).for_each(&mut count);
            } else if let Some(windows) = self.run_windows(text, from, to) {
                let first = if from == 0 {
                    0
                } else {
                    self.sentence_ends[from - 1] as usize
                };
                let mut w = 0;
                for k in first..self.sentence_ends[to - 1] as usize {
                    let at = self.token_starts[k] as usize;
                    while w < windows.len() && windows[w].1 <= at {
                        let (a, b) = windows[w];
                        tokenizer.for_each_token(&text[a..b], &mut count);
                        w += 1;
                    }
                    if w < windows.len() && windows[w].0 <= at {
                        continue; // the window's own tokens replace it
                    }
                    count(self.token(k));
                }
                for &(a, b) in &windows[w..] {
                    tokenizer.for_each_token(&text[a..b], &mut count);
                }
            } else {
                tokenizer.for_each_token(self.span(text, from, to), count);
            }
            counts.push(n);
        }
        counts
    }

    /// Around each joint of sentences `from..to` (one run), the bytes whose
    /// words may tokenise otherwise in the whole text than in the two
    /// sentences: from after the last ASCII whitespace before the joint (or
    /// the run's start) to the first one after it (or the run's end),
    /// overlapping windows merged, in order. Word segmentation breaks on
    /// both sides of ASCII whitespace before an ASCII character, and its
    /// rules look at most past one character on either side of a break
    /// (which ASCII whitespace never matches), so outside the windows the
    /// sentences' tokens are the text's. None where a window would start
    /// at a character that is not ASCII (a combining mark after whitespace
    /// joins it).
    fn run_windows(&self, text: &str, from: usize, to: usize) -> Option<Vec<(usize, usize)>> {
        let b = text.as_bytes();
        let offset = |s: &str| s.as_ptr() as usize - text.as_ptr() as usize;
        let (start, end) = {
            let span = self.span(text, from, to);
            (offset(span), offset(span) + span.len())
        };
        let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
        let mut out: Vec<(usize, usize)> = Vec::new();
        for sentence in &self.sentences[from..to - 1] {
            let joint = offset(sentence) + sentence.len();
            let lo = b[start..joint]
                .iter()
                .rposition(|&c| space(c))
                .map_or(start, |i| start + i + 1);
            if lo > start && !b[lo].is_ascii() {
                return None;
            }
            let hi = b[joint..end]
                .iter()
                .position(|&c| space(c))
                .map_or(end, |i| joint + i);
            match out.last_mut() {
                Some(last) if lo < last.1 => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        Some(out)
    }

    /// Each sentence token's term id, from the ids the index gave the tokens
    /// `push_text_tokens` handed it (`counts` per run, in order): read off
    /// them where a run was its sentence's own tokens, else `lookup`. And
    /// whether every run was one sentence (the sentences' tokens are the
    /// text's: `NodeMarks::whole`).
    pub fn sentence_token_ids(
        &self,
        runs: &[(usize, usize)],
        counts: &[usize],
        pushed: &[u32],
        lookup: impl Fn(&str) -> Option<u32>,
    ) -> (Vec<Option<u32>>, bool) {
        let mut out: Vec<Option<u32>> = Vec::with_capacity(self.len());
        let (mut at, mut whole) = (0, true);
        for (&(from, to), &n) in runs.iter().zip(counts) {
            if to - from == 1 {
                out.extend(pushed[at..at + n].iter().copied().map(Some));
            } else {
                whole = false;
                for j in from..to {
                    out.extend(self.sentence_tokens(j).map(&lookup));
                }
            }
            at += n;
        }
        (out, whole)
    }

    /// The text of sentences `from..to` (contiguous in the text).
    pub fn span(&self, text: &'t str, from: usize, to: usize) -> &'t str {
        let offset = |s: &str| s.as_ptr() as usize - text.as_ptr() as usize;
        let (a, last) = (offset(self.sentences[from]), self.sentences[to - 1]);
        &text[a..offset(last) + last.len()]
    }

    /// The tokens of sentence `j`, in order.
    pub fn sentence_tokens(&self, j: usize) -> impl Iterator<Item = &str> + '_ {
        let from = if j == 0 {
            0
        } else {
            self.sentence_ends[j - 1] as usize
        };
        (from..self.sentence_ends[j] as usize).map(move |k| self.token(k))
    }

    /// Token `k` (in `tokens` order).
    fn token(&self, k: usize) -> &str {
        let start = if k == 0 {
            0
        } else {
            self.token_ends[k - 1] as usize
        };
        &self.buffer[start..self.token_ends[k] as usize]
    }

    pub fn len(&self) -> usize {
        self.token_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.token_ends.is_empty()
    }

    /// The marks, given each token's term id (in `tokens` order; None for
    /// a token the lexical index lacks) and the node's lexical entry `doc`;
    /// `whole`: the sentences' tokens are the text's (see `NodeMarks`). A
    /// token not in the entry is kept as a piece of its sentence.
    pub fn marks(&self, ids: &[Option<u32>], doc: &[(u32, u32)], whole: bool) -> NodeMarks {
        debug_assert_eq!(ids.len(), self.len());
        let mut out = NodeMarks {
            terms: Vec::with_capacity(ids.len()),
            sentences: Vec::with_capacity(self.sentences.len()),
            pieces: Vec::new(),
            whole,
        };
        let mut local: Vec<u32> = Vec::new();
        let mut pieces: Vec<&str> = Vec::new();
        let mut start = 0usize;
        for (sentence, &end) in self.sentences.iter().zip(&self.sentence_ends) {
            local.clear();
            pieces.clear();
            for (k, id) in ids.iter().enumerate().take(end as usize).skip(start) {
                match id.and_then(|id| doc.binary_search_by_key(&id, |p| p.0).ok()) {
                    Some(at) => local.push(at as u32),
                    None => pieces.push(self.token(k)),
                }
            }
            start = end as usize;
            if local.is_empty() && pieces.is_empty() {
                continue; // no token: coverage never reads it
            }
            let k = out.sentences.len() as u32;
            pieces.sort_unstable();
            pieces.dedup();
            out.pieces
                .extend(pieces.iter().map(|t| (k, (*t).to_owned())));
            local.sort_unstable();
            local.dedup();
            out.terms.extend_from_slice(&local);
            let (first, second) = person_marks(sentence);
            let mut marks = 0;
            if is_question(sentence) {
                marks |= QUESTION;
            }
            if first {
                marks |= FIRST_PERSON;
            }
            if second {
                marks |= SECOND_PERSON;
            }
            out.sentences.push((out.terms.len() as u32, marks));
        }
        out.terms.shrink_to_fit();
        out.sentences.shrink_to_fit();
        out
    }
}

/// The marks of `text`, whose lexical entry is `doc` ((term id, count),
/// ascending by id); `term_id` gives a token's id.
pub fn node_marks(
    text: &str,
    tokenizer: &Tokenizer,
    doc: &[(u32, u32)],
    term_id: impl Fn(&str) -> Option<u32>,
) -> NodeMarks {
    let sentences = SentenceTokens::new(text, tokenizer);
    let ids: Vec<Option<u32>> = sentences.tokens().map(term_id).collect();
    sentences.marks(&ids, doc, !may_straddle(text))
}

/// The marks of every stored node that has them.
#[derive(Clone, Debug, Default)]
pub struct MarksTable {
    marks: ShortKeyMap<NodeId, NodeMarks>,
}

impl MarksTable {
    pub fn get(&self, id: NodeId) -> Option<&NodeMarks> {
        self.marks.get(&id)
    }

    /// Keep `marks` for `id` (None: the node has none; any old ones go).
    pub fn set(&mut self, id: NodeId, marks: Option<NodeMarks>) {
        match marks {
            Some(m) => {
                self.marks.insert(id, m);
            }
            None => {
                self.marks.remove(&id);
            }
        }
    }

    pub fn remove(&mut self, id: NodeId) {
        self.marks.remove(&id);
    }

    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.marks.capacity() * (8 + std::mem::size_of::<NodeMarks>() + 1)
            + self
                .marks
                .values()
                .map(NodeMarks::memory_bytes)
                .sum::<usize>()
    }
}

/// Marks as a snapshot keeps them: one entry per stored node, in node order
/// (None: the node has none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarksSnapshot {
    pub nodes: Vec<Option<NodeMarks>>,
}

impl MarksSnapshot {
    /// An error for marks that do not fit their nodes' lexical entries.
    pub fn check(&self, n_terms: impl Fn(usize) -> usize) -> Result<()> {
        for (k, m) in self.nodes.iter().enumerate() {
            if let Some(m) = m {
                m.validate(n_terms(k))
                    .map_err(|why| Error::Snapshot(format!("sentence marks: {why}")))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Where `may_straddle` says no, the sentences' tokens one after the
        /// other are the whole text's tokens (what the lexical index keeps),
        /// and so are the runs' tokens wherever `runs` gives runs,
        /// over characters word segmentation treats specially: mid-word
        /// punctuation, combining marks, format and joiner characters,
        /// fullwidth digits, Hebrew letters and quotes, Katakana, regional
        /// indicators, emoji.
        #[test]
        fn sentences_tokenise_as_the_whole_text_unless_flagged(
            chars in prop::collection::vec(
                prop::sample::select(vec![
                    'a', 'B', 'z', '3', '0', '.', '.', '!', '?', ' ', ' ', '\'', '_', ',', ':',
                    '"', 'é', '\u{301}', '\u{200d}', '\u{200b}', '\u{ad}', '\u{ff13}', 'א',
                    'カ', '\u{1f1eb}', '\u{1f600}', '\n', '-', '@', '\u{2024}', '\u{fe52}',
                    '\t', '\r', ' ', 'q', '.', '\u{3000}',
                ]),
                0..60,
            ),
        ) {
            let text: String = chars.into_iter().collect();
            let tokenizer = Tokenizer::default();
            let sentences = SentenceTokens::new(&text, &tokenizer);
            if !may_straddle(&text) {
                let joined: Vec<String> = sentences.tokens().map(str::to_owned).collect();
                prop_assert_eq!(joined, tokenizer.tokenize(&text), "{:?}", text);
            }
            // the runs' tokens (a sentence's own, or the run's text
            // tokenised) are the whole text's, flagged or not
            if let Some(runs) = sentences.runs(&text) {
                let mut joined: Vec<String> = Vec::new();
                let counts = sentences.push_text_tokens(&text, &runs, &tokenizer, &mut |t| {
                    joined.push(t.to_owned())
                });
                prop_assert_eq!(counts.iter().sum::<usize>(), joined.len());
                prop_assert_eq!(&joined, &tokenizer.tokenize(&text), "{:?}", text);
                // the ids read back: each sentence token's own (ids as
                // positions in `joined`'s distinct tokens)
                let vocab: Vec<&String> = {
                    let mut v: Vec<&String> = joined.iter().collect();
                    v.sort();
                    v.dedup();
                    v
                };
                let id = |t: &str| vocab.iter().position(|v| v.as_str() == t).map(|p| p as u32);
                let pushed: Vec<u32> = joined.iter().map(|t| id(t).unwrap()).collect();
                let (ids, whole) = sentences.sentence_token_ids(&runs, &counts, &pushed, id);
                let own: Vec<Option<u32>> = sentences.tokens().map(id).collect();
                prop_assert_eq!(ids, own);
                prop_assert_eq!(whole, !may_straddle(&text));
            } else {
                prop_assert!(may_straddle(&text));
            }
        }
    }

    /// Facts of another derivation (a snapshot an older build wrote) have
    /// their marks made again by today's rules; the same derivation keeps
    /// what the store holds.
    #[test]
    fn marks_are_made_again_with_another_derivation() {
        use crate::derived::DerivedFacts;
        use crate::ops::NewNode;
        use crate::store::{MemoryStore, StoreConfig};
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let id = s
            .add_node(NewNode::new("hey how have u been", vec![1.0, 0.0]))
            .unwrap();
        let fresh = s.marks.get(id).cloned().expect("marks");
        assert_eq!(fresh.sentences[0].1 & QUESTION, QUESTION);
        let facts = |share| {
            vec![DerivedFacts {
                id,
                question_share: share,
                time_refs: Vec::new(),
            }]
        };
        s.set_derived(1, facts(0.0)).unwrap();
        // as an older build kept them: no question
        let mut stale = fresh.clone();
        stale.sentences[0].1 &= !QUESTION;
        s.marks.set(id, Some(stale.clone()));
        s.set_derived(1, facts(0.0)).unwrap();
        assert_eq!(s.marks.get(id), Some(&stale), "same derivation: kept");
        s.set_derived(2, facts(1.0)).unwrap();
        assert_eq!(
            s.marks.get(id),
            Some(&fresh),
            "another derivation: made again"
        );
    }

    /// Marks follow their nodes: made on write (pieces for a word spanning
    /// a stop), gone with a forgotten node, the same after a snapshot round
    /// trip.
    #[test]
    fn marks_follow_their_nodes() {
        use crate::ops::NewNode;
        use crate::store::{MemoryStore, StoreConfig};
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let texts = [
            "I painted the lake. Did you see it?",
            "Version 3.5 is out.",
            "We went hiking! You should come.",
        ];
        let ids: Vec<NodeId> = texts
            .iter()
            .map(|t| s.add_node(NewNode::new(*t, vec![1.0, 0.0])).unwrap())
            .collect();
        let m = s.marks.get(ids[0]).expect("marks");
        let flags: Vec<u8> = m.sentences.iter().map(|&(_, f)| f).collect();
        assert_eq!(flags, [FIRST_PERSON, QUESTION | SECOND_PERSON]);
        // "3.5" is one token of the text, "3" and "5" of its two sentences
        let split = s.marks.get(ids[1]).expect("marks");
        assert!(!split.whole);
        assert_eq!(split.pieces, [(0, "3".to_owned()), (1, "5".to_owned())]);
        assert!(s
            .marks
            .get(ids[0])
            .is_some_and(|m| m.whole && m.pieces.is_empty()));
        assert_eq!(s.marks.len(), 3);
        let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
        for &id in &ids {
            assert_eq!(loaded.marks.get(id), s.marks.get(id));
        }
        s.forget_nodes(&[ids[0]]).unwrap();
        assert!(s.marks.get(ids[0]).is_none());
        assert_eq!(s.marks.len(), 2);
    }

    /// A run of sentences joined by stops inside words gives the whole
    /// text's tokens: its sentences' own, the words around each joint
    /// tokenised again (or the run whole, where a window would start at a
    /// character that is not ASCII).
    #[test]
    fn runs_tokenise_as_the_whole_text() {
        let tokenizer = Tokenizer::default();
        for text in [
            "Version 3.5 is out. See e.g. the docs at www.example.com today.",
            "Use v1.2.3-rc1 now!Then run x.y\tand z.w\nthen stop.",
            "pi=3.14159 and e=2.718; ratio a.b.c.d ok",
            "end.\u{301}x then \u{301}a.b more",
            "tail 4.5",
            "1.2 3.4 5.6",
        ] {
            let sentences = SentenceTokens::new(text, &tokenizer);
            let runs = sentences.runs(text).expect("runs");
            assert!(runs.iter().any(|&(a, b)| b - a > 1), "{text:?}");
            let mut joined: Vec<String> = Vec::new();
            sentences.push_text_tokens(text, &runs, &tokenizer, &mut |t| joined.push(t.to_owned()));
            assert_eq!(joined, tokenizer.tokenize(text), "{text:?}");
        }
    }

    #[test]
    fn stops_inside_words_are_flagged() {
        for t in [
            "pi is 3.14",
            "e.g. this",
            "caf\u{e9}.b",
            "end.\u{301}x",
            "ok!\u{200d}",
        ] {
            assert!(may_straddle(t), "{t:?}");
        }
        for t in ["One. Two! Three? Four...", "a . b", "", "no stops", "end."] {
            assert!(!may_straddle(t), "{t:?}");
        }
    }
}
