//! Facts the caller derives from each text when it is written, kept by the
//! store so that a load or a reopened log need not derive them again: the
//! text's question share (also what the style statistics and the reply link
//! read, see `style` and `context`) and its grounded time references.
//!
//! The derivation itself (regular expressions over the text) belongs to the
//! caller; its `version` names it. A store keeps the version of the facts it
//! was last given, and a caller whose derivation has another version derives
//! every node anew (`Op::SetDerived` replaces a node's facts whole).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::MemoryStore;
use crate::types::{NodeId, Timestamp};

/// Every precision a time reference may carry; a reference stores the index.
pub const PRECISIONS: [&str; 15] = [
    "part_of_day",
    "day",
    "week",
    "weekend",
    "part_of_month",
    "month",
    "season",
    "year",
    "decade",
    "few_days",
    "few_weeks",
    "few_weekends",
    "few_months",
    "few_years",
    "range",
];

/// The code of a precision name (`PRECISIONS`' index).
pub fn precision_code(name: &str) -> Result<u8> {
    PRECISIONS
        .iter()
        .position(|p| *p == name)
        .map(|i| i as u8)
        .ok_or_else(|| Error::invalid(format!("unknown time precision {name:?}")))
}

/// One grounded time expression of a text: the interval `[start, end)` in
/// Unix seconds, what it was grounded from, and how precise it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeRef {
    /// The expression as it stands in the text.
    pub text: String,
    pub start: Timestamp,
    pub end: Timestamp,
    /// Index into `PRECISIONS`.
    pub precision: u8,
    /// Whether it was resolved against the observation time ("yesterday").
    pub relative: bool,
    /// Character offsets of `text` in the node's text.
    pub span: (u64, u64),
    /// For a range, the precision of its start (index into `PRECISIONS`);
    /// None otherwise.
    pub anchor_precision: Option<u8>,
}

impl TimeRef {
    fn validate(&self) -> Result<()> {
        let known = |p: u8| usize::from(p) < PRECISIONS.len();
        if !known(self.precision) || !self.anchor_precision.is_none_or(known) {
            return Err(Error::invalid(format!(
                "time reference {:?}: unknown precision code",
                self.text
            )));
        }
        Ok(())
    }
}

/// What was derived from one node's text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DerivedFacts {
    pub id: NodeId,
    /// How much of the text is a question, in [0, 1].
    pub question_share: f64,
    pub time_refs: Vec<TimeRef>,
}

/// The store's derived facts in a snapshot: the version and, in id order,
/// every node that has them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DerivedSnapshot {
    pub version: u32,
    pub nodes: Vec<DerivedFacts>,
}

/// How a node's time fits a window a query names (see `time_matches`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeQuery {
    /// The query names no time and asks no "when": every node 0.
    None,
    /// A query that asks for a time without naming a window (a "when", a
    /// duration, an order, a recent event; not a question about the present
    /// alone, see `cues::asks_for_a_time`): a hint (0.3) for a node
    /// that states a time.
    AsksWhen,
    /// A window `[lo, hi)`: 1 when the node was observed in it or refers to a
    /// time that overlaps it, decaying with the distance (scale: its width,
    /// at least 3 days). Half-open: a time at `hi`, or one ending at `lo`,
    /// is outside.
    Window(Timestamp, Timestamp),
}

const DAY_S: i128 = 86_400;

impl MemoryStore {
    /// Check facts for `Op::SetDerived`: known ids, each once, shares in
    /// [0, 1], known precisions.
    pub(crate) fn validate_derived(&self, facts: &[DerivedFacts]) -> Result<()> {
        let mut seen = HashSet::with_capacity(facts.len());
        for f in facts {
            self.require(f.id)?;
            if !seen.insert(f.id) {
                return Err(Error::invalid(format!(
                    "derived facts give node {} twice",
                    f.id
                )));
            }
        }
        Self::validate_derived_values(facts)
    }

    /// The checks of `validate_derived` that need no stored node: facts for
    /// nodes about to be added.
    pub(crate) fn validate_derived_values(facts: &[DerivedFacts]) -> Result<()> {
        for f in facts {
            crate::context::check_share(f.id, f.question_share)?;
            for r in &f.time_refs {
                r.validate()?;
            }
        }
        Ok(())
    }

    /// Set derived facts (logged on a durable memory, as every op). All or
    /// nothing: an unknown id, an id given twice, a share outside [0, 1] or an
    /// unknown precision changes nothing.
    pub fn set_derived(&mut self, version: u32, facts: Vec<DerivedFacts>) -> Result<()> {
        self.apply(crate::ops::Op::SetDerived { version, facts })
            .map(|_| ())
    }

    /// `set_derived` without a log record: facts a load derived again (or
    /// read from an older format), which the next checkpoint or snapshot
    /// keeps. Checked the same way.
    pub fn restore_derived(&mut self, version: u32, facts: Vec<DerivedFacts>) -> Result<()> {
        self.validate_derived(&facts)?;
        self.apply_derived(version, facts);
        Ok(())
    }

    /// Take validated facts: each node's replace what it had.
    pub(crate) fn apply_derived(&mut self, version: u32, facts: Vec<DerivedFacts>) {
        // The sentence marks are read off the text by the same analysis (a
        // question, a person): facts from another derivation mean the marks
        // a snapshot kept were made by other rules too, so they are made again.
        let rules_changed = self.derived_version != 0 && self.derived_version != version;
        self.derived_version = version;
        if rules_changed {
            for f in &facts {
                let marks = self
                    .get(f.id)
                    .and_then(|n| self.marks_from_text(f.id, &n.content));
                self.marks.set(f.id, marks);
            }
        }
        let mut shares = Vec::with_capacity(facts.len());
        for f in facts {
            shares.push((f.id, f.question_share));
            if f.time_refs.is_empty() {
                self.time_refs.remove(&f.id);
            } else {
                self.time_refs.insert(f.id, f.time_refs.into_boxed_slice());
            }
        }
        self.record_shares(&shares);
    }

    /// The version of the derivation that gave the facts the store holds (0: none given yet).
    pub fn derived_version(&self) -> u32 {
        self.derived_version
    }

    /// Whether each node has derived facts (a question share).
    pub fn derived_covered(&self, ids: &[NodeId]) -> Vec<bool> {
        ids.iter()
            .map(|id| self.question_shares.contains_key(id))
            .collect()
    }

    /// Each node's question share (0 without one).
    pub fn question_shares_of(&self, ids: &[NodeId]) -> Vec<f64> {
        ids.iter()
            .map(|id| self.question_shares.get(id).copied().unwrap_or(0.0))
            .collect()
    }

    /// A node's grounded time references (empty without any).
    pub fn time_refs(&self, id: NodeId) -> &[TimeRef] {
        self.time_refs.get(&id).map_or(&[], |r| r)
    }

    /// How well each node's time fits what the query asks (see `TimeQuery`):
    /// the best of its observation time and its time references.
    pub fn time_matches(&self, ids: &[NodeId], query: TimeQuery) -> Vec<f64> {
        match query {
            TimeQuery::None => vec![0.0; ids.len()],
            TimeQuery::AsksWhen => ids
                .iter()
                .map(|id| {
                    if self.time_refs.contains_key(id) {
                        0.3
                    } else {
                        0.0
                    }
                })
                .collect(),
            TimeQuery::Window(lo, hi) => {
                let (lo, hi) = (i128::from(lo), i128::from(hi));
                let scale = (3 * DAY_S).max(hi - lo) as f64;
                // In whole seconds: `[start, end)` holds start..=end-1 (a bare
                // instant, start == end, holds start) and the window lo..=hi-1,
                // so a time that only touches the window is a second away.
                let fit = |start: Timestamp, end: Timestamp| {
                    let (start, end) = (i128::from(start), i128::from(end));
                    let last = start.max(end - 1);
                    let gap = 0.max(lo - last).max(start - (hi - 1));
                    (-(gap as f64) / scale).exp()
                };
                ids.iter()
                    .map(|&id| {
                        let mut best = 0.0f64;
                        for r in self.time_refs(id) {
                            best = best.max(fit(r.start, r.end));
                        }
                        if let Some(ts) = self.graph.get(id).and_then(|n| n.timestamp) {
                            best = best.max(fit(ts, ts));
                        }
                        best
                    })
                    .collect()
            }
        }
    }

    pub(crate) fn derived_snapshot(&self) -> DerivedSnapshot {
        let mut ids: Vec<NodeId> = self.question_shares.keys().copied().collect();
        ids.sort_unstable();
        DerivedSnapshot {
            version: self.derived_version,
            nodes: ids
                .into_iter()
                .map(|id| DerivedFacts {
                    id,
                    question_share: self.question_shares[&id],
                    time_refs: self.time_refs(id).to_vec(),
                })
                .collect(),
        }
    }

    pub(crate) fn derived_bytes(&self) -> usize {
        self.time_refs
            .values()
            .map(|refs| {
                48 + refs
                    .iter()
                    .map(|r| std::mem::size_of::<TimeRef>() + r.text.capacity())
                    .sum::<usize>()
            })
            .sum()
    }
}
