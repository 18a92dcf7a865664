//! A batch of observations inserted the way the write path links them: each
//! node in turn is added, given its derived facts, linked by rule to its
//! neighbours in time and to the earlier nodes that share an entity with
//! it, and compared with its write candidates, so every node sees exactly
//! the memory that adding them one by one would have shown it. What the
//! controller then judges comes back as columns, one row per (new node,
//! candidate) pair.

use crate::derived::DerivedFacts;
use crate::error::{Error, Result};
use crate::hashing::ShortKeyMap;
use crate::ops::NewNode;
use crate::pair_signals::{provenance_value, NewNodePairs};
use crate::store::MemoryStore;
use crate::types::{Edge, EdgeOrigin, NodeId, TemporalLabel, Timestamp, View};

/// What a batch asks beside its nodes.
#[derive(Clone, Debug, Default)]
pub struct LinkPlan {
    /// The derivation version of `derived` (see `derived`).
    pub derived_version: u32,
    /// One per node, in order: its question share and time references (the
    /// id is filled in once the node has one).
    pub derived: Vec<DerivedFacts>,
    /// Which nodes are consolidation foci: their `focus_k` candidates, as the
    /// write saw them (later writes change BM25 statistics), are listed in
    /// [`LinkedBatch::neighbours`].
    pub focus: Vec<bool>,
    pub focus_k: usize,
}

/// Pairs of (new node, earlier node) with what relation judgment reads of
/// them, grouped by new node in batch order, each group in candidate order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairColumns {
    /// The new node's position in the batch.
    pub row: Vec<u32>,
    pub candidate: Vec<NodeId>,
    pub vector: Vec<f32>,
    pub lexical: Vec<f32>,
    pub entity: Vec<f32>,
    pub temporal: Vec<f32>,
    pub same_session: Vec<f64>,
    pub same_speaker: Vec<f64>,
    pub older: Vec<f64>,
    pub alias: Vec<f64>,
    /// The candidate's text as an index into `texts` (`PairColumns::text`
    /// reads it), its speaker and timestamp (what a controller reads).
    pub text: Vec<u32>,
    pub speaker: Vec<Option<String>>,
    pub timestamp: Vec<Option<Timestamp>>,
    /// The distinct candidate texts, in the order first met: a batch
    /// compares most candidates with several of its new nodes (a BEAM batch
    /// of 32 long turns: 4.5 pairs per distinct candidate), and each text is
    /// copied, and handed to Python, once.
    pub texts: Vec<String>,
    text_slots: ShortKeyMap<NodeId, u32>,
}

impl PairColumns {
    pub fn len(&self) -> usize {
        self.row.len()
    }

    /// Record the next pair's candidate text: `candidate`'s, which is
    /// `content` (copied the first time the candidate is met).
    pub fn push_text(&mut self, candidate: NodeId, content: &str) {
        let texts = &mut self.texts;
        let slot = *self.text_slots.entry(candidate).or_insert_with(|| {
            texts.push(content.to_owned());
            (texts.len() - 1) as u32
        });
        self.text.push(slot);
    }

    /// Pair `k`'s candidate text.
    pub fn text(&self, k: usize) -> &str {
        &self.texts[self.text[k] as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.row.is_empty()
    }
}

/// What [`MemoryStore::add_linked`] wrote and found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkedBatch {
    pub ids: Vec<NodeId>,
    /// Every node's write candidates (`candidates_for` with the configured k).
    pub pairs: PairColumns,
    /// The consolidation foci's neighbourhoods.
    pub neighbours: PairColumns,
}

impl MemoryStore {
    /// Insert `nodes` in order as the write path does (see the module
    /// notes); the rule edges are added after the last node. Every node and
    /// every derived fact is checked before anything is written.
    pub fn add_linked(&mut self, nodes: Vec<NewNode>, plan: LinkPlan) -> Result<LinkedBatch> {
        let n = nodes.len();
        if plan.derived.len() != n || plan.focus.len() != n {
            return Err(Error::invalid(format!(
                "{n} nodes, {} derived facts and {} focus flags",
                plan.derived.len(),
                plan.focus.len()
            )));
        }
        self.validate_new_nodes(&nodes)?;
        let mut derived = plan.derived;
        // the ids the nodes will get, so the facts are checked up front
        let first = self.next_id();
        for (i, facts) in derived.iter_mut().enumerate() {
            facts.id = first + i as NodeId;
        }
        Self::validate_derived_values(&derived)?;

        let mut out = LinkedBatch::default();
        let mut rule_edges: Vec<Edge> = Vec::new();
        for (row, (node, mut facts)) in nodes.into_iter().zip(derived).enumerate() {
            let id = self.add_node(node)?;
            out.ids.push(id);
            facts.id = id;
            self.set_derived(plan.derived_version, vec![facts])?;
            if plan.focus[row] {
                self.push_pairs(id, row, Some(plan.focus_k), &mut out.neighbours, None)?;
            }
            if let Some((before, after)) = self.time_neighbours_seen(id) {
                let ts = self.get(id).and_then(|x| x.timestamp);
                let label = |t| {
                    if Some(t) == ts {
                        TemporalLabel::SameTime
                    } else {
                        TemporalLabel::Before
                    }
                };
                if let Some((prev, t)) = before {
                    rule_edges.push(rule_edge(prev, id, View::Temporal, 1.0, Some(label(t))));
                }
                if let Some((next, t)) = after {
                    rule_edges.push(rule_edge(id, next, View::Temporal, 1.0, Some(label(t))));
                }
            }
            self.push_pairs(id, row, None, &mut out.pairs, Some(&mut rule_edges))?;
        }
        if !rule_edges.is_empty() {
            self.upsert_edges(rule_edges)?;
        }
        Ok(out)
    }

    /// Append node `id`'s write candidates to `pairs`; with `entity_edges`,
    /// also a rule edge from each candidate that shares an entity with it.
    fn push_pairs(
        &self,
        id: NodeId,
        row: usize,
        k: Option<usize>,
        pairs: &mut PairColumns,
        mut entity_edges: Option<&mut Vec<Edge>>,
    ) -> Result<()> {
        let found = self.candidates_for(id, k)?;
        let new = NewNodePairs::of(self.require(id)?);
        for c in found {
            let other = self.require(c.id)?;
            let pair = new.signals(other);
            if c.signals.entity > 0.0 {
                if let Some(edges) = entity_edges.as_deref_mut() {
                    edges.push(rule_edge(c.id, id, View::Entity, c.signals.entity, None));
                }
            }
            pairs.row.push(row as u32);
            pairs.candidate.push(c.id);
            pairs.vector.push(c.signals.vector);
            pairs.lexical.push(c.signals.lexical);
            pairs.entity.push(c.signals.entity);
            pairs.temporal.push(c.signals.temporal);
            pairs.same_session.push(pair.same_session);
            pairs.same_speaker.push(pair.same_speaker);
            pairs.older.push(pair.older);
            pairs.alias.push(pair.alias);
            pairs.push_text(c.id, &other.content);
            // as `node.provenance.get("speaker")` reads it ("" stays "")
            pairs
                .speaker
                .push(provenance_value(other, "speaker").map(str::to_owned));
            pairs.timestamp.push(other.timestamp);
        }
        Ok(())
    }
}

fn rule_edge(
    src: NodeId,
    dst: NodeId,
    view: View,
    weight: f32,
    temporal: Option<TemporalLabel>,
) -> Edge {
    Edge {
        src,
        dst,
        view,
        weight,
        origin: EdgeOrigin::Rule,
        temporal,
    }
}
