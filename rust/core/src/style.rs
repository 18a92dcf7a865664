//! What a memory observes about its own style, so that the read path's
//! features are relative to it: a long turn in a chat of short ones, a
//! speaker who mostly asks (a user asking an assistant) or mostly answers.
//!
//! A node counts once its question share is recorded (the caller measures
//! it when it writes the node; see `context`). Per counted node the store
//! keeps the log of its text length (`ln(1 + chars)`); over them, the mean
//! and, per speaker (lower-cased), the turns, the summed question share and
//! the summed log length. Sums are kept in the order the shares were
//! recorded and recomputed in id order after a removal, so a memory that
//! forgot nodes reads exactly as one that never had them (what a load of
//! its snapshot derives).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::context::speaker_of;
use crate::filter::Allowed;
use crate::hashing::ShortKeyMap;
use crate::store::MemoryStore;
use crate::types::{Node, NodeId};

/// One speaker's sums over the counted nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpeakerSums {
    pub turns: f64,
    pub asks: f64,
    pub log_len: f64,
}

/// The statistics a node's style is read against: the counted nodes'
/// number and summed log length, and each speaker's sums.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StyleBasis {
    pub n: usize,
    pub total: f64,
    pub speakers: HashMap<String, SpeakerSums>,
}

/// `1 / (1 + e^-x)`, 0 far below (the read path's logistic).
pub fn logistic(x: f64) -> f64 {
    if x > -60.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        0.0
    }
}

/// The log length the style reads: `ln(1 + number of chars)`.
pub fn log_length(text: &str) -> f64 {
    (text.chars().count() as f64).ln_1p()
}

/// A node's speaker as the style keys it: lower-cased, none when empty.
pub fn speaker_key(node: &Node) -> Option<String> {
    speaker_of(node).map(str::to_lowercase)
}

impl StyleBasis {
    fn count(&mut self, speaker: Option<&str>, log_len: f64, asks: f64) {
        self.n += 1;
        self.total += log_len;
        if let Some(s) = speaker {
            let sums = self.speakers.entry(s.to_owned()).or_default();
            sums.turns += 1.0;
            sums.asks += asks;
            sums.log_len += log_len;
        }
    }

    /// A node's style in [0, 1]: its length against the mean (logistic of
    /// the log ratio: 0.5 is a typical turn; a node not counted reads as
    /// typical), its speaker's mean question share, and its speaker's mean
    /// length against the memory's (0.5 without a speaker).
    pub fn style(&self, log_len: Option<f64>, speaker: Option<&str>) -> [f64; 3] {
        if self.n == 0 {
            return [0.5, 0.0, 0.5];
        }
        let mean = self.mean();
        let [asks, length] = speaker.map_or([0.0, 0.5], |s| self.speaker_style(s, mean));
        [logistic(log_len.unwrap_or(mean) - mean), asks, length]
    }

    /// How long the memory's nodes are, on a scale that does not move with
    /// the memory: their mean log length over `ln(1 + 22,026)` (= 10),
    /// capped at 1 (0 with no counted node). A two-line chat reads ~0.4, an
    /// assistant's log of long answers ~0.7: what a node's own, relative
    /// length cannot say.
    pub fn typical_length(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            (self.mean() / 10.0).clamp(0.0, 1.0)
        }
    }

    /// The mean log length (counted nodes only: `n` > 0).
    fn mean(&self) -> f64 {
        self.total / self.n as f64
    }

    /// What `style` reads of a speaker: its mean question share and its
    /// mean length against `mean` (0 and 0.5 for a speaker without sums).
    fn speaker_style(&self, speaker: &str, mean: f64) -> [f64; 2] {
        match self.speakers.get(speaker) {
            Some(sums) if sums.turns != 0.0 => [
                sums.asks / sums.turns,
                logistic(sums.log_len / sums.turns - mean),
            ],
            _ => [0.0, 0.5],
        }
    }
}

/// The store's style state: each counted node's log length and speaker
/// key, and the basis over all of them.
///
/// A removal only marks the sums stale (forgetting thousands of nodes must
/// not rebuild them thousands of times): the store settles them once its
/// removals are done, and a read of stale sums rebuilds a copy.
#[derive(Clone, Debug, Default)]
pub struct StyleTable {
    /// Each counted node's log length and speaker (its number in `names`).
    counted: BTreeMap<NodeId, (f64, Option<u32>)>,
    /// Every speaker key counted so far, each once, numbered by position
    /// (a read then finds a node's speaker by number, not by its text).
    /// Never shrinks: a memory has few speakers.
    names: Vec<String>,
    numbers: HashMap<String, u32>,
    basis: StyleBasis,
    /// Whether a removal left the sums stale, and the speakers it touched.
    stale: bool,
    touched: HashSet<u32>,
}

impl StyleTable {
    /// Count several nodes with their shares (already in `shares`). The sums
    /// come out as if summed in id order, whatever the order given: a node
    /// counted again, or below one already counted, marks its speaker's sums
    /// for one rebuild at the end rather than adding to them.
    pub(crate) fn record_many<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = (&'a Node, f64)>,
        shares: &ShortKeyMap<NodeId, f64>,
    ) {
        self.settle(shares);
        let mut last = self.counted.keys().next_back().copied();
        for (node, asks) in nodes {
            let speaker = speaker_key(node).map(|key| self.number(key));
            let log_len = log_length(&node.content);
            let again = self.counted.insert(node.id, (log_len, speaker)).is_some();
            if again || last.is_some_and(|l| node.id < l) {
                self.touched.extend(speaker);
                self.stale = true;
            } else {
                let name = speaker.map(|n| self.names[n as usize].as_str());
                self.basis.count(name, log_len, asks);
            }
            last = last.max(Some(node.id));
        }
        self.settle(shares);
    }

    /// The number of a speaker key (a new one for a key not seen before).
    fn number(&mut self, key: String) -> u32 {
        if let Some(&n) = self.numbers.get(&key) {
            return n;
        }
        let n = u32::try_from(self.names.len()).expect("fewer than 2^32 speakers");
        self.names.push(key.clone());
        self.numbers.insert(key, n);
        n
    }

    /// A speaker's key by its number.
    fn name(&self, number: u32) -> &str {
        &self.names[number as usize]
    }

    /// Stop counting `id` (nothing when it is not counted); the sums are
    /// stale until `settle`.
    pub(crate) fn forget(&mut self, id: NodeId) {
        if let Some((_, speaker)) = self.counted.remove(&id) {
            self.stale = true;
            self.touched.extend(speaker);
        }
    }

    /// Rebuild stale sums: the total and the touched speakers' sums, in id
    /// order (other speakers' sums did not change).
    pub(crate) fn settle(&mut self, shares: &ShortKeyMap<NodeId, f64>) {
        if self.stale {
            let touched = std::mem::take(&mut self.touched);
            rebuild(
                &self.counted,
                &self.names,
                &mut self.basis,
                &touched,
                shares,
            );
            self.stale = false;
        }
    }

    /// The basis over every counted node.
    pub fn basis(&self, shares: &ShortKeyMap<NodeId, f64>) -> Cow<'_, StyleBasis> {
        if self.stale {
            let mut basis = self.basis.clone();
            rebuild(
                &self.counted,
                &self.names,
                &mut basis,
                &self.touched,
                shares,
            );
            Cow::Owned(basis)
        } else {
            Cow::Borrowed(&self.basis)
        }
    }

    /// The basis over the counted nodes `allowed` lets through, summed in id order.
    pub fn basis_within(&self, allowed: &Allowed, shares: &ShortKeyMap<NodeId, f64>) -> StyleBasis {
        let mut basis = StyleBasis::default();
        for id in allowed.ids() {
            if let Some(&(log_len, speaker)) = self.counted.get(id) {
                let asks = shares.get(id).copied().unwrap_or(0.0);
                basis.count(speaker.map(|n| self.name(n)), log_len, asks);
            }
        }
        basis
    }

    /// A counted node's log length and speaker number.
    fn counted(&self, id: NodeId) -> Option<(f64, Option<u32>)> {
        self.counted.get(&id).copied()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.counted.len() * 40
            + self.names.iter().map(|s| 2 * s.len() + 80).sum::<usize>()
            + self
                .basis
                .speakers
                .keys()
                .map(|s| s.len() + 56)
                .sum::<usize>()
    }
}

fn rebuild(
    counted: &BTreeMap<NodeId, (f64, Option<u32>)>,
    names: &[String],
    basis: &mut StyleBasis,
    touched: &HashSet<u32>,
    shares: &ShortKeyMap<NodeId, f64>,
) {
    let mut total = 0.0;
    let mut fresh: HashMap<u32, SpeakerSums> = HashMap::new();
    for (id, &(log_len, speaker)) in counted {
        total += log_len;
        if let Some(s) = speaker.filter(|s| touched.contains(s)) {
            let sums = fresh.entry(s).or_default();
            sums.turns += 1.0;
            sums.asks += shares.get(id).copied().unwrap_or(0.0);
            sums.log_len += log_len;
        }
    }
    basis.n = counted.len();
    basis.total = total;
    for s in touched {
        let name = &names[*s as usize];
        match fresh.remove(s) {
            Some(sums) => {
                basis.speakers.insert(name.clone(), sums);
            }
            None => {
                basis.speakers.remove(name);
            }
        }
    }
}

impl MemoryStore {
    /// Each node's style (see `StyleBasis::style`) against the whole memory,
    /// or with `allowed` against the counted nodes it lets through (`basis`
    /// given: that one, computed earlier by `style_basis`). An id the store
    /// lacks reads as typical with no speaker.
    pub fn styles(&self, ids: &[NodeId], basis: Option<&StyleBasis>) -> Vec<[f64; 3]> {
        let basis = self.basis_or_whole(basis);
        if basis.n == 0 {
            return vec![basis.style(None, None); ids.len()];
        }
        // `basis.style` of each node, its speaker's part worked out once per
        // speaker (a call reads a few speakers many times over)
        let mean = basis.mean();
        let mut memo: Vec<Option<[f64; 2]>> = vec![None; self.style.names.len()];
        ids.iter()
            .map(|&id| match self.style.counted(id) {
                // the speaker key was lower-cased once, when the node was counted
                Some((log_len, speaker)) => {
                    let [asks, length] = speaker.map_or([0.0, 0.5], |n| {
                        *memo[n as usize]
                            .get_or_insert_with(|| basis.speaker_style(self.style.name(n), mean))
                    });
                    [logistic(log_len - mean), asks, length]
                }
                None => {
                    let speaker = self.get(id).and_then(speaker_key);
                    basis.style(None, speaker.as_deref())
                }
            })
            .collect()
    }

    /// `StyleBasis::typical_length` of the whole memory, or of `basis`.
    pub fn typical_length(&self, basis: Option<&StyleBasis>) -> f64 {
        self.basis_or_whole(basis).typical_length()
    }

    /// `basis`, or the whole memory's when none is given.
    pub fn basis_or_whole<'a>(&'a self, basis: Option<&'a StyleBasis>) -> Cow<'a, StyleBasis> {
        match basis {
            Some(b) => Cow::Borrowed(b),
            None => self.style.basis(&self.question_shares),
        }
    }

    /// The style basis of the counted nodes `allowed` lets through.
    pub fn style_basis(&self, allowed: &Allowed) -> StyleBasis {
        self.style.basis_within(allowed, &self.question_shares)
    }

    /// The speakers of the counted nodes (lower-cased), sorted.
    pub fn speakers(&self) -> Vec<String> {
        let basis = self.style.basis(&self.question_shares);
        let mut out: Vec<String> = basis.speakers.keys().cloned().collect();
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::NewNode;
    use crate::store::StoreConfig;
    use proptest::prelude::*;

    proptest! {
        /// `styles` (each speaker's part read once per call) gives each
        /// node `StyleBasis::style` of its own log length and speaker, bit
        /// for bit: with more speakers than the memo keeps, without
        /// speakers, for ids the store lacks, and after removals.
        #[test]
        fn styles_equal_the_style_of_each_node(
            turns in proptest::collection::vec(
                (0usize..12, 0usize..40, any::<bool>(), proptest::option::weighted(0.8, 0.0f64..=1.0)),
                0..40,
            ),
            forget in proptest::collection::vec(any::<bool>(), 40),
            asked in proptest::collection::vec(0u64..60, 0..30),
        ) {
            let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
            let mut ids = Vec::new();
            for &(speaker, len, with_speaker, share) in &turns {
                let mut n = NewNode::new("word ".repeat(len + 1), vec![1.0, 0.0]);
                if with_speaker {
                    n.provenance = vec![("speaker".into(), format!("Person{speaker}"))];
                }
                let id = s.add_node(n).unwrap();
                // counted in the style (a node without a share is not)
                if let Some(share) = share {
                    s.set_question_shares(&[(id, share)]).unwrap();
                }
                ids.push(id);
            }
            let gone: Vec<NodeId> = ids.iter().zip(&forget).filter(|(_, f)| **f).map(|(i, _)| *i).collect();
            s.forget_nodes(&gone).unwrap();
            let asked: Vec<NodeId> = asked.into_iter().collect();
            let basis = s.style.basis(&s.question_shares).into_owned();
            let naive: Vec<[f64; 3]> = asked
                .iter()
                .map(|&id| match s.style.counted(id) {
                    Some((log_len, speaker)) => {
                        basis.style(Some(log_len), speaker.map(|n| s.style.name(n)))
                    }
                    None => basis.style(None, s.get(id).and_then(speaker_key).as_deref()),
                })
                .collect();
            let got = s.styles(&asked, None);
            prop_assert_eq!(got.len(), naive.len());
            for (g, n) in got.iter().zip(&naive) {
                for (a, b) in g.iter().zip(n) {
                    prop_assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
    }
}
