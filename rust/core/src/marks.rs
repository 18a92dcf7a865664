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
//! A text whose sentences may tokenise to a word its whole text does not
//! (a word that spans a sentence stop, as "3.5" or "e.g." split at the
//! period: `may_straddle`) gets no marks, and coverage reads its text. For
//! every other text the sentences' tokens, one after the other, are the
//! text's: one tokenisation feeds the lexical index and the marks.

use serde::{Deserialize, Serialize};

use crate::coverage::{person_marks, sentence_spans};
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

/// One node's sentences (those with at least one term), in text order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMarks {
    /// Each sentence's distinct terms, ascending, as positions in the
    /// node's lexical entry, one sentence after the other.
    pub terms: Vec<u32>,
    /// Each sentence: where its terms end in `terms`, and its marks
    /// (`QUESTION`, `FIRST_PERSON`, `SECOND_PERSON`).
    pub sentences: Vec<(u32, u8)>,
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

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.terms.capacity() * 4 + self.sentences.capacity() * 8
    }

    /// Check marks read from a file against the node's lexical entry of
    /// `n_terms` terms: every position in range, ascending within a
    /// sentence, the ends in order, no unknown mark bits.
    pub fn validate(&self, n_terms: usize) -> std::result::Result<(), String> {
        let mut start = 0usize;
        for &(end, marks) in &self.sentences {
            let end = end as usize;
            if end <= start || end > self.terms.len() {
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
    let wordy = |c: u8| c.is_ascii_alphanumeric() || c >= 0x80;
    b.iter().enumerate().any(|(i, &c)| {
        if !matches!(c, b'.' | b'!' | b'?') {
            return false;
        }
        let next = b.get(i + 1).copied();
        next.is_some_and(|n| n >= 0x80)
            || (c == b'.' && i > 0 && wordy(b[i - 1]) && next.is_some_and(wordy))
    })
}

/// A text's sentences (`coverage::sentence_spans`) and their tokens,
/// tokenised once: all tokens back to back in one buffer.
pub struct SentenceTokens<'t> {
    sentences: Vec<&'t str>,
    buffer: String,
    /// Each token's end in `buffer`.
    token_ends: Vec<u32>,
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
        };
        for sentence in &out.sentences {
            tokenizer.for_each_token(sentence, |t| {
                out.buffer.push_str(t);
                out.token_ends.push(out.buffer.len() as u32);
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

    pub fn len(&self) -> usize {
        self.token_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.token_ends.is_empty()
    }

    /// The marks, given each token's term id (in `tokens` order) and the
    /// node's lexical entry `doc`; None when a token is not in the entry.
    pub fn marks(&self, ids: &[u32], doc: &[(u32, u32)]) -> Option<NodeMarks> {
        debug_assert_eq!(ids.len(), self.len());
        let mut out = NodeMarks {
            terms: Vec::with_capacity(ids.len()),
            sentences: Vec::with_capacity(self.sentences.len()),
        };
        let mut local: Vec<u32> = Vec::new();
        let mut start = 0usize;
        for (sentence, &end) in self.sentences.iter().zip(&self.sentence_ends) {
            local.clear();
            for &id in &ids[start..end as usize] {
                local.push(doc.binary_search_by_key(&id, |p| p.0).ok()? as u32);
            }
            start = end as usize;
            if local.is_empty() {
                continue; // no term: coverage never reads it
            }
            local.sort_unstable();
            local.dedup();
            out.terms.extend_from_slice(&local);
            let (first, second) = person_marks(sentence);
            let mut marks = 0;
            if sentence.ends_with('?') {
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
        Some(out)
    }
}

/// The marks of `text`, whose lexical entry is `doc` ((term id, count),
/// ascending by id); `term_id` gives a token's id. None for a text whose
/// sentences may tokenise otherwise than the whole (`may_straddle`).
pub fn node_marks(
    text: &str,
    tokenizer: &Tokenizer,
    doc: &[(u32, u32)],
    term_id: impl Fn(&str) -> Option<u32>,
) -> Option<NodeMarks> {
    if may_straddle(text) {
        return None;
    }
    let sentences = SentenceTokens::new(text, tokenizer);
    let ids = sentences
        .tokens()
        .map(term_id)
        .collect::<Option<Vec<u32>>>()?;
    sentences.marks(&ids, doc)
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
                ]),
                0..40,
            ),
        ) {
            let text: String = chars.into_iter().collect();
            let tokenizer = Tokenizer::default();
            if !may_straddle(&text) {
                let sentences = SentenceTokens::new(&text, &tokenizer);
                let joined: Vec<String> = sentences.tokens().map(str::to_owned).collect();
                prop_assert_eq!(joined, tokenizer.tokenize(&text), "{:?}", text);
            }
        }
    }

    /// Marks follow their nodes: made on write, gone with a forgotten
    /// node, the same after a snapshot round trip (or made again from a
    /// body without them), none for a text with a stop inside a word.
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
        assert!(s.marks.get(ids[1]).is_none());
        assert_eq!(s.marks.len(), 2);
        let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
        for &id in &ids {
            assert_eq!(loaded.marks.get(id), s.marks.get(id));
        }
        s.forget_nodes(&[ids[0]]).unwrap();
        assert!(s.marks.get(ids[0]).is_none());
        assert_eq!(s.marks.len(), 1);
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
