//! What a memory observes about its own style, so that the read path's
//! features are relative to it: a long turn in a chat of short ones, a
//! speaker who mostly asks (a user asking an assistant) or mostly answers.
//!
//! A node counts once its question share is recorded (the caller measures
//! it when it writes the node; see `context`). Per counted node the store
//! keeps its text length in chars, its speaker (lower-cased) and its
//! episode; over them, the mean log length (`ln(1 + chars)`) of the nodes
//! and, per speaker, the sums over the speaker's *turns*: runs of
//! consecutive counted nodes (in id order) of one speaker in one episode.
//! A turn's length is its nodes' chars together and its question share
//! their mean, so a speaker reads the same whether a platform stores each
//! turn whole or as a burst of short messages; in a memory where speakers
//! alternate every turn is one node. Sums are kept in the order the nodes
//! were counted and recomputed in id order after a removal, so a memory
//! that forgot nodes reads exactly as one that never had them (what a load
//! of its snapshot derives).
//!
//! A node without a speaker may still say who speaks: a transcript line
//! ("Caroline: I ran a charity race", "User: how do I ...") heads it with a
//! label. The style counts, per label, the speakerless texts it heads and
//! how many of them speak in the first or second person; a label that heads
//! at least two such texts, at least half of them personal, is one of the
//! memory's people (`StyleBasis::people`), as a speaker is.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::context::speaker_of;
use crate::coverage::person_marks;
use crate::filter::Allowed;
use crate::hashing::ShortKeyMap;
use crate::store::MemoryStore;
use crate::types::{Node, NodeId};

/// One speaker's sums over its closed turns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpeakerSums {
    pub turns: f64,
    pub asks: f64,
    pub log_len: f64,
}

/// The last turn counted, still open: the next node extends it when it has
/// the same speaker and episode. A node without a speaker is a turn of its
/// own.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenTurn {
    pub speaker: Option<String>,
    pub episode: u64,
    pub chars: f64,
    pub asks: f64,
    pub nodes: f64,
}

impl OpenTurn {
    fn log_len(&self) -> f64 {
        self.chars.ln_1p()
    }

    /// The turn's question share: the mean of its nodes'.
    fn share(&self) -> f64 {
        self.asks / self.nodes
    }
}

/// The statistics a node's style is read against: the counted nodes'
/// number and summed log length, the closed turns' number and summed log
/// length, each speaker's sums over its closed turns, and the open turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StyleBasis {
    pub n: usize,
    pub total: f64,
    pub turns: usize,
    pub turn_total: f64,
    pub speakers: HashMap<String, SpeakerSums>,
    pub open: Option<OpenTurn>,
    /// Per label heading a speakerless text: the texts it heads and how
    /// many of them speak in the first or second person.
    pub labels: HashMap<String, LabelSums>,
    /// The labels that name a person (`LabelSums::is_person`), kept as the
    /// sums change: a memory may hold many labels and few people.
    pub persons: HashSet<String>,
}

/// One label's counts over the speakerless texts it heads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LabelSums {
    pub texts: usize,
    pub personal: usize,
}

impl LabelSums {
    /// Whether the label names a person: it heads two texts or more, at
    /// least half of them in the first or second person (a transcript's
    /// lines talk; "Note:" and "Status:" lines mostly do not).
    pub fn is_person(&self) -> bool {
        self.texts >= 2 && 2 * self.personal >= self.texts
    }
}

/// The longest label `text_label` reads, in bytes.
pub const MAX_LABEL_BYTES: usize = 40;

/// The label heading a text as a transcript line names its speaker,
/// lower-cased: one to three words before a colon on the first line (the
/// first word starting with a letter; letters, digits and `'’.-` inside),
/// at most `MAX_LABEL_BYTES`, the colon followed by white space and more
/// text. "Caroline: I ran ..." and "Dr. Lee: take ..." have one; "10:30
/// today", "http://x" and "Ideas:" alone do not.
pub fn text_label(text: &str) -> Option<String> {
    labelled(text).map(|(label, _)| label)
}

/// `text_label`, with where the words after the label's colon start in
/// `text` (bytes).
pub fn labelled(text: &str) -> Option<(String, usize)> {
    let start = text.len() - text.trim_start().len();
    let text = &text[start..];
    let line_end = text.find('\n').unwrap_or(text.len());
    let colon = text[..line_end].find(':')?;
    let (label, rest) = (&text[..colon], &text[colon + 1..]);
    if label.is_empty() || label.len() > MAX_LABEL_BYTES {
        return None;
    }
    if !rest.starts_with(char::is_whitespace) || rest.trim_start().is_empty() {
        return None;
    }
    let mut words = 0;
    for word in label.split(' ') {
        words += 1;
        let mut chars = word.chars();
        let first = chars.next()?;
        let starts = if words == 1 {
            first.is_alphabetic()
        } else {
            first.is_alphanumeric()
        };
        if words > 3 || !starts {
            return None;
        }
        if !chars.all(|c| c.is_alphanumeric() || matches!(c, '\'' | '\u{2019}' | '.' | '-')) {
            return None;
        }
    }
    Some((label.to_lowercase(), start + colon + 1))
}

/// What the style keeps of a speakerless text's label: the label, and
/// whether what follows it speaks in the first or second person (the
/// label's own words are no person mark).
fn label_of(text: &str) -> Option<(String, bool)> {
    let (label, at) = labelled(text)?;
    let (first, second) = person_marks(&text[at..]);
    Some((label, first || second))
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

/// What the style keeps of a counted node.
#[derive(Clone, Copy, Debug)]
struct Counted {
    chars: f64,
    log_len: f64,
    speaker: Option<u32>,
    episode: u64,
    /// A speakerless text's label (by number, as speakers are), and
    /// whether the text is personal.
    label: Option<(u32, bool)>,
}

/// The counted nodes by id: a slot per id up to the largest counted.
#[derive(Clone, Debug, Default)]
struct CountedTable {
    slots: Vec<Option<Counted>>,
}

impl CountedTable {
    fn get(&self, id: NodeId) -> Option<&Counted> {
        self.slots.get(usize::try_from(id).ok()?)?.as_ref()
    }

    /// Count `id` (its earlier entry, if any, comes back).
    fn insert(&mut self, id: NodeId, counted: Counted) -> Option<Counted> {
        let i = usize::try_from(id).expect("node ids index memory");
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i].replace(counted)
    }

    fn remove(&mut self, id: NodeId) -> Option<Counted> {
        self.slots.get_mut(usize::try_from(id).ok()?)?.take()
    }

    /// The counted ids, ascending.
    fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(i, _)| i as NodeId)
    }

    /// The largest counted id.
    fn last_id(&self) -> Option<NodeId> {
        self.slots
            .iter()
            .rposition(Option::is_some)
            .map(|i| i as NodeId)
    }
}

impl StyleBasis {
    /// Count one more node, after every node counted so far in id order.
    fn count(
        &mut self,
        speaker: Option<&str>,
        label: Option<(&str, bool)>,
        episode: u64,
        chars: f64,
        log_len: f64,
        asks: f64,
    ) {
        self.n += 1;
        self.total += log_len;
        if let Some((label, personal)) = label {
            let sums = match self.labels.get_mut(label) {
                Some(sums) => sums,
                None => self.labels.entry(label.to_owned()).or_default(),
            };
            sums.texts += 1;
            sums.personal += usize::from(personal);
            if sums.is_person() {
                if !self.persons.contains(label) {
                    self.persons.insert(label.to_owned());
                }
            } else {
                self.persons.remove(label);
            }
        }
        if let (Some(s), Some(open)) = (speaker, self.open.as_mut()) {
            if open.speaker.as_deref() == Some(s) && open.episode == episode {
                open.chars += chars;
                open.asks += asks;
                open.nodes += 1.0;
                return;
            }
        }
        self.close_turn();
        self.open = Some(OpenTurn {
            speaker: speaker.map(str::to_owned),
            episode,
            chars,
            asks,
            nodes: 1.0,
        });
    }

    /// Add the open turn to the closed sums.
    fn close_turn(&mut self) {
        if let Some(open) = self.open.take() {
            let log_len = open.log_len();
            self.turns += 1;
            self.turn_total += log_len;
            let share = open.share();
            if let Some(s) = open.speaker {
                // the turn's own key moves in: no allocation per turn here
                let sums = self.speakers.entry(s).or_default();
                sums.turns += 1.0;
                sums.asks += share;
                sums.log_len += log_len;
            }
        }
    }

    /// A node's style in [0, 1]: its length against the mean node (logistic
    /// of the log ratio: 0.5 is a typical node; a node not counted reads as
    /// typical), its speaker's mean question share per turn, and its
    /// speaker's mean turn length against the memory's mean turn (0.5
    /// without a speaker).
    pub fn style(&self, log_len: Option<f64>, speaker: Option<&str>) -> [f64; 3] {
        if self.n == 0 {
            return [0.5, 0.0, 0.5];
        }
        let mean = self.mean();
        let turn_mean = self.turn_mean();
        let [asks, length] = speaker.map_or([0.0, 0.5], |s| self.speaker_style(s, turn_mean));
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

    /// The mean log length of a node (counted nodes only: `n` > 0).
    fn mean(&self) -> f64 {
        self.total / self.n as f64
    }

    /// The mean log length of a turn, the open one last (`n` > 0, so there
    /// is an open turn); with one node per turn, `mean` to the bit.
    fn turn_mean(&self) -> f64 {
        match &self.open {
            Some(open) => (self.turn_total + open.log_len()) / (self.turns + 1) as f64,
            None => self.turn_total / self.turns.max(1) as f64,
        }
    }

    /// A speaker's sums over its turns, the open one included.
    fn sums_of(&self, speaker: &str) -> Option<SpeakerSums> {
        let mut sums = self.speakers.get(speaker).copied();
        if let Some(open) = self
            .open
            .as_ref()
            .filter(|o| o.speaker.as_deref() == Some(speaker))
        {
            let s = sums.get_or_insert_with(SpeakerSums::default);
            s.turns += 1.0;
            s.asks += open.share();
            s.log_len += open.log_len();
        }
        sums
    }

    /// What `style` reads of a speaker: its mean question share per turn
    /// and its mean turn length against `turn_mean` (0 and 0.5 for a
    /// speaker without turns).
    fn speaker_style(&self, speaker: &str, turn_mean: f64) -> [f64; 2] {
        match self.sums_of(speaker) {
            Some(sums) if sums.turns != 0.0 => [
                sums.asks / sums.turns,
                logistic(sums.log_len / sums.turns - turn_mean),
            ],
            _ => [0.0, 0.5],
        }
    }

    /// The people the memory knows, sorted: its speakers with a counted
    /// turn, and the labels of its speakerless texts that name a person
    /// (`LabelSums::is_person`).
    pub fn people(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .speaker_names()
            .chain(self.persons.iter().map(String::as_str))
            .map(str::to_owned)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The speakers with a counted turn.
    fn speaker_names(&self) -> impl Iterator<Item = &str> {
        let open = self.open.as_ref().and_then(|o| o.speaker.as_deref());
        self.speakers
            .keys()
            .map(String::as_str)
            .chain(open.filter(|s| !self.speakers.contains_key(*s)))
    }
}

/// The number of `key` in a table of names numbered by position (a new
/// one, at the end, for a key not seen before).
fn intern(names: &mut Vec<String>, numbers: &mut HashMap<String, u32>, key: String) -> u32 {
    if let Some(&n) = numbers.get(&key) {
        return n;
    }
    let n = u32::try_from(names.len()).expect("fewer than 2^32 names");
    names.push(key.clone());
    numbers.insert(key, n);
    n
}

/// The store's style state: each counted node's length, speaker key and
/// episode, and the basis over all of them.
///
/// A removal only marks the sums stale (forgetting thousands of nodes must
/// not rebuild them thousands of times): the store settles them once its
/// removals are done, and a read of stale sums rebuilds a copy.
#[derive(Clone, Debug, Default)]
pub struct StyleTable {
    /// What the style keeps of each counted node, its speaker by number in
    /// `names`, by id (ids are the insertion sequence, so the table is dense
    /// and reads in id order; a lookup is one read where a tree of 100k ids
    /// took several cache misses, for every candidate of every search).
    counted: CountedTable,
    /// Every speaker key counted so far, each once, numbered by position
    /// (a read then finds a node's speaker by number, not by its text).
    /// Never shrinks: a memory has few speakers (and labels are numbered
    /// apart, below).
    names: Vec<String>,
    numbers: HashMap<String, u32>,
    /// The labels of speakerless texts, numbered as the speakers are but
    /// apart from them (a read's memo is sized by the speakers alone).
    labels: Vec<String>,
    label_numbers: HashMap<String, u32>,
    basis: StyleBasis,
    /// Whether a removal, or a node counted again or below the last, left
    /// the sums stale (a turn may have split or joined: every speaker's
    /// sums are rebuilt).
    stale: bool,
}

impl StyleTable {
    /// Count several nodes with their episode keys and shares (already in
    /// `shares`). The sums
    /// come out as if summed in id order, whatever the order given: a node
    /// counted again, or below one already counted, marks the sums for one
    /// rebuild at the end rather than adding to them.
    pub(crate) fn record_many<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = (&'a Node, u64, f64)>,
        shares: &ShortKeyMap<NodeId, f64>,
    ) {
        self.settle(shares);
        let mut last = self.counted.last_id();
        for (node, episode, asks) in nodes {
            let chars = node.content.chars().count() as f64;
            let speaker = speaker_key(node).map(|key| self.number(key));
            let label = match speaker {
                Some(_) => None,
                None => label_of(&node.content).map(|(key, p)| (self.label_number(key), p)),
            };
            let counted = Counted {
                chars,
                log_len: chars.ln_1p(),
                speaker,
                episode,
                label,
            };
            let again = self.counted.insert(node.id, counted).is_some();
            if again || last.is_some_and(|l| node.id < l) {
                self.stale = true;
            } else if !self.stale {
                let name = counted.speaker.map(|n| self.names[n as usize].as_str());
                let label = counted
                    .label
                    .map(|(n, p)| (self.labels[n as usize].as_str(), p));
                self.basis
                    .count(name, label, counted.episode, chars, counted.log_len, asks);
            }
            last = last.max(Some(node.id));
        }
        self.settle(shares);
    }

    /// The number of a speaker key (a new one for a key not seen before).
    fn number(&mut self, key: String) -> u32 {
        intern(&mut self.names, &mut self.numbers, key)
    }

    /// The number of a label (a new one for a label not seen before).
    fn label_number(&mut self, key: String) -> u32 {
        intern(&mut self.labels, &mut self.label_numbers, key)
    }

    /// A speaker's key by its number.
    fn name(&self, number: u32) -> &str {
        &self.names[number as usize]
    }

    /// Stop counting `id` (nothing when it is not counted); the sums are
    /// stale until `settle`.
    pub(crate) fn forget(&mut self, id: NodeId) {
        if self.counted.remove(id).is_some() {
            self.stale = true;
        }
    }

    /// Rebuild stale sums over every counted node in id order.
    pub(crate) fn settle(&mut self, shares: &ShortKeyMap<NodeId, f64>) {
        if self.stale {
            self.basis = self.sum(self.counted.ids(), shares);
            self.stale = false;
        }
    }

    /// The basis over every counted node.
    pub fn basis(&self, shares: &ShortKeyMap<NodeId, f64>) -> Cow<'_, StyleBasis> {
        if self.stale {
            Cow::Owned(self.sum(self.counted.ids(), shares))
        } else {
            Cow::Borrowed(&self.basis)
        }
    }

    /// The basis over the counted nodes `allowed` lets through, summed in id order.
    pub fn basis_within(&self, allowed: &Allowed, shares: &ShortKeyMap<NodeId, f64>) -> StyleBasis {
        self.sum(allowed.ids().iter().copied(), shares)
    }

    /// The basis over the counted nodes among `ids` (ascending).
    fn sum(
        &self,
        ids: impl IntoIterator<Item = NodeId>,
        shares: &ShortKeyMap<NodeId, f64>,
    ) -> StyleBasis {
        let mut basis = StyleBasis::default();
        for id in ids {
            if let Some(c) = self.counted.get(id) {
                let asks = shares.get(&id).copied().unwrap_or(0.0);
                let name = c.speaker.map(|n| self.name(n));
                let label = c.label.map(|(n, p)| (self.labels[n as usize].as_str(), p));
                basis.count(name, label, c.episode, c.chars, c.log_len, asks);
            }
        }
        basis
    }

    /// A counted node's log length and speaker number.
    fn counted(&self, id: NodeId) -> Option<(f64, Option<u32>)> {
        self.counted.get(id).map(|c| (c.log_len, c.speaker))
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.counted.slots.capacity() * std::mem::size_of::<Option<Counted>>()
            + self
                .names
                .iter()
                .chain(&self.labels)
                .map(|s| 2 * s.len() + 80)
                .sum::<usize>()
            + self
                .basis
                .speakers
                .keys()
                .chain(self.basis.labels.keys())
                .chain(&self.basis.persons)
                .map(|s| s.len() + 56)
                .sum::<usize>()
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
        let turn_mean = basis.turn_mean();
        let mut memo: Vec<Option<[f64; 2]>> = vec![None; self.style.names.len()];
        ids.iter()
            .map(|&id| match self.style.counted(id) {
                // the speaker key was lower-cased once, when the node was counted
                Some((log_len, speaker)) => {
                    let [asks, length] = speaker.map_or([0.0, 0.5], |n| {
                        *memo[n as usize].get_or_insert_with(|| {
                            basis.speaker_style(self.style.name(n), turn_mean)
                        })
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
        let mut out: Vec<String> = basis.speaker_names().map(str::to_owned).collect();
        out.sort_unstable();
        out
    }

    /// The people the memory knows (`StyleBasis::people`: its speakers and
    /// the labels that name a person at the head of its speakerless texts),
    /// lower-cased and sorted; with the basis of an allowed set, of the counted nodes it lets
    /// through (`basis`: `style_basis` of it).
    pub fn people(&self, basis: Option<&StyleBasis>) -> Vec<String> {
        self.basis_or_whole(basis).people()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::NewNode;
    use crate::store::StoreConfig;
    use proptest::prelude::*;

    #[test]
    fn labels_head_transcript_lines() {
        let cases = [
            ("Caroline: I ran a charity race", Some("caroline")),
            ("  User: how do I read a parquet file?", Some("user")),
            ("Dr. Lee: take two a day", Some("dr. lee")),
            ("Mary Ann O'Neil: we met", Some("mary ann o'neil")),
            ("Assistant:\nHere is the plan", Some("assistant")),
            ("ÉLODIE: j'arrive", Some("élodie")),
            ("10:30 we meet", None),
            ("see http://example.com", None),
            ("http://example.com: a link", None),
            ("Ideas:", None),
            ("Ideas:   ", None),
            ("Ideas:x", None),
            ("one two three four: too many words", None),
            ("a, b: not a label", None),
            ("no label here\nBob: later line", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(text_label(text).as_deref(), want, "{text:?}");
        }
        let long = format!("{}: hello there", "a".repeat(MAX_LABEL_BYTES + 1));
        assert_eq!(text_label(&long), None);
        let longest = format!("{}: hello there", "a".repeat(MAX_LABEL_BYTES));
        assert_eq!(text_label(&longest), Some("a".repeat(MAX_LABEL_BYTES)));
    }

    #[test]
    fn people_are_speakers_and_labels_that_talk() {
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let texts = [
            ("Caroline: I went to the group", None),
            ("Caroline: my kids love it", None),
            ("Melanie: you should come", None),
            ("Melanie: it rained all day", None),
            ("Note: the lease ends in May", None),
            ("Note: rent is due on the 1st", None),
            ("Status: I am done", None),
            ("hello", Some("Jon")),
            (
                "Gina: a speaker's text is not read for a label",
                Some("Jon"),
            ),
        ];
        let mut ids = Vec::new();
        for (text, speaker) in texts {
            let mut n = NewNode::new(text, vec![1.0, 0.0]);
            if let Some(sp) = speaker {
                n.provenance = vec![("speaker".into(), sp.into())];
            }
            ids.push(s.add_node(n).unwrap());
        }
        let shares: Vec<(NodeId, f64)> = ids.iter().map(|&i| (i, 0.0)).collect();
        s.set_question_shares(&shares).unwrap();
        // "note" heads two texts, neither personal; "status" only one
        assert_eq!(s.people(None), vec!["caroline", "jon", "melanie"]);
        assert_eq!(s.speakers(), vec!["jon"]);
        // half personal is enough
        let allowed = Allowed::from_sorted(vec![ids[2], ids[3]]);
        assert_eq!(s.people(Some(&s.style_basis(&allowed))), vec!["melanie"]);
        let allowed = Allowed::from_sorted(vec![ids[0], ids[2], ids[7]]);
        assert_eq!(s.people(Some(&s.style_basis(&allowed))), vec!["jon"]);
        // forgetting one of Melanie's texts leaves her one: no longer a person
        s.forget_nodes(&[ids[3]]).unwrap();
        assert_eq!(s.people(None), vec!["caroline", "jon"]);
    }

    /// `people` counted naively over the nodes `keep` lets through: the
    /// counted nodes' speakers, and each label heading two or more of the
    /// speakerless ones, at least half of them personal.
    fn naive_people(s: &MemoryStore, keep: impl Fn(NodeId) -> bool) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut labels: HashMap<String, (usize, usize)> = HashMap::new();
        for id in s.style.counted.ids().filter(|&id| keep(id)) {
            let node = s.get(id).unwrap();
            match speaker_key(node) {
                Some(sp) => out.push(sp),
                None => {
                    if let Some(label) = text_label(&node.content) {
                        let rest = node.content.split_once(':').unwrap().1;
                        let (f, p) = person_marks(rest);
                        let e = labels.entry(label).or_default();
                        e.0 += 1;
                        e.1 += usize::from(f || p);
                    }
                }
            }
        }
        out.extend(
            labels
                .into_iter()
                .filter(|(_, (n, p))| *n >= 2 && 2 * p >= *n)
                .map(|(l, _)| l),
        );
        out.sort_unstable();
        out.dedup();
        out
    }

    proptest! {
        /// `people`, of the whole memory and of an allowed set, equals the
        /// naive count over the nodes still counted, after removals and
        /// with nodes counted out of order.
        #[test]
        fn people_equal_a_naive_count(
            nodes in proptest::collection::vec(
                (0usize..4, any::<bool>(), proptest::option::of(0usize..3), any::<bool>()),
                0..40,
            ),
            forget in proptest::collection::vec(any::<bool>(), 40),
            allow in proptest::collection::vec(any::<bool>(), 40),
            reversed in any::<bool>(),
        ) {
            let labels = ["Ana", "Bo Li", "note", "Ana"];
            let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
            let mut ids = Vec::new();
            for &(label, personal, speaker, counted) in &nodes {
                let said = if personal { "I saw it" } else { "it rained" };
                let mut n = NewNode::new(format!("{}: {said}", labels[label]), vec![1.0, 0.0]);
                if let Some(sp) = speaker {
                    n.provenance = vec![("speaker".into(), format!("P{sp}"))];
                }
                let id = s.add_node(n).unwrap();
                ids.push((id, counted));
            }
            let mut shares: Vec<(NodeId, f64)> =
                ids.iter().filter(|(_, c)| *c).map(|&(i, _)| (i, 0.5)).collect();
            if reversed {
                shares.reverse();
            }
            for share in &shares {
                s.set_question_shares(&[*share]).unwrap();
            }
            let gone: Vec<NodeId> = ids.iter().zip(&forget).filter(|(_, f)| **f).map(|((i, _), _)| *i).collect();
            s.forget_nodes(&gone).unwrap();
            prop_assert_eq!(s.people(None), naive_people(&s, |_| true));
            let kept: Vec<NodeId> = ids
                .iter()
                .zip(&allow)
                .filter(|((i, _), a)| **a && !gone.contains(i))
                .map(|((i, _), _)| *i)
                .collect();
            let allowed = Allowed::from_sorted(kept.clone());
            prop_assert_eq!(s.people(Some(&s.style_basis(&allowed))), naive_people(&s, |id| kept.contains(&id)));
        }
    }

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
            // the people: the survivors' speakers and their texts' labels,
            // counted from scratch (`text_label` reads none of these texts)
            let mut people: Vec<String> = s
                .style
                .counted
                .ids()
                .filter_map(|id| s.get(id).and_then(speaker_key))
                .collect();
            people.sort_unstable();
            people.dedup();
            prop_assert_eq!(s.people(None), people);
            prop_assert_eq!(got.len(), naive.len());
            for (g, n) in got.iter().zip(&naive) {
                for (a, b) in g.iter().zip(n) {
                    prop_assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
    }
}
