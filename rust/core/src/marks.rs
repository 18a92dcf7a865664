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
//! A text whose sentences tokenise to a word its whole text does not (a
//! word that spans a sentence stop, as "3.5" or "e.g." split at the
//! period) gets no marks: coverage reads such a text as before.

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

/// The marks of `text`, whose lexical entry is `doc` ((term id, count),
/// ascending by id); `term_id` gives a token's id. None when a sentence
/// holds a token its whole text does not (see the module).
pub fn node_marks(
    text: &str,
    tokenizer: &Tokenizer,
    doc: &[(u32, u32)],
    term_id: impl Fn(&str) -> Option<u32>,
) -> Option<NodeMarks> {
    let mut out = NodeMarks::default();
    let mut local: Vec<u32> = Vec::new();
    for sentence in sentence_spans(text) {
        local.clear();
        let mut regular = true;
        tokenizer.for_each_token(sentence, |t| {
            match term_id(t).and_then(|id| doc.binary_search_by_key(&id, |p| p.0).ok()) {
                Some(at) => local.push(at as u32),
                None => regular = false,
            }
        });
        if !regular {
            return None;
        }
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
