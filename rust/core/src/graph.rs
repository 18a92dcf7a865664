//! Canonical nodes and one edge set per relational view.
//!
//! Nodes sit in a dense `Vec` indexed by id (ids are the insertion sequence),
//! so lookups are O(1) and removal leaves a hole. Each view keeps adjacency in
//! both directions with the weight inline, so traversal never hashes; edge
//! attributes live in one map keyed by (src, dst, view).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hashing::ShortKeyMap;
use crate::idbits::IdBits;
use crate::prefetch;
use crate::types::{Edge, EdgeOrigin, Node, NodeId, TemporalLabel, View};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct EdgeMeta {
    weight: f32,
    origin: EdgeOrigin,
    temporal: Option<TemporalLabel>,
}

/// Adjacency of one node in one view: (neighbour, weight), outgoing and incoming.
#[derive(Clone, Debug, Default)]
struct Adjacency {
    out: Vec<(NodeId, f32)>,
    inc: Vec<(NodeId, f32)>,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Option<Node>>,
    /// One bit per id slot, set while its node lives: `contains` reads a
    /// bit (a few KB for 100k nodes, in cache) instead of a node's slot,
    /// which a traversal would miss in cache for every neighbour it checks
    live_bits: IdBits,
    live: usize,
    /// adjacency[view][node id]
    adjacency: [Vec<Adjacency>; View::COUNT],
    /// keyed by the store's own ids, which no input chooses: the fast hasher
    edges: ShortKeyMap<(NodeId, NodeId, View), EdgeMeta>,
    edge_counts: [usize; View::COUNT],
}

/// What happened when an edge was asserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeUpsert {
    Inserted,
    /// The edge existed; its weight is now the larger of the two.
    Strengthened,
    /// The edge existed with a weight at least as large; nothing changed.
    Unchanged,
}

impl Graph {
    /// Heap bytes one id slot costs while its node is absent (removed): ids
    /// index dense arrays, so an id gap is paid for slot by slot.
    pub const EMPTY_SLOT_BYTES: usize =
        std::mem::size_of::<Option<Node>>() + View::COUNT * std::mem::size_of::<Adjacency>();

    pub fn new() -> Self {
        Self::default()
    }

    /// The id the next inserted node will get.
    pub fn next_id(&self) -> NodeId {
        self.nodes.len() as NodeId
    }

    /// Number of live (not removed) nodes.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn edge_count(&self, view: View) -> usize {
        self.edge_counts[view.index()]
    }

    pub fn total_edges(&self) -> usize {
        self.edge_counts.iter().sum()
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.live_bits.contains(id)
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes
            .get(usize::try_from(id).ok()?)
            .and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes
            .get_mut(usize::try_from(id).ok()?)
            .and_then(Option::as_mut)
    }

    pub fn require(&self, id: NodeId) -> Result<&Node> {
        self.get(id).ok_or(Error::NodeNotFound(id))
    }

    /// Live nodes in id (= insertion) order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter_map(Option::as_ref)
    }

    /// Append a node. Its id must be `next_id()`: ids are the insertion sequence.
    pub fn push_node(&mut self, node: Node) -> Result<()> {
        if node.id != self.next_id() {
            return Err(Error::invalid(format!(
                "node id {} is not the next insertion id {}",
                node.id,
                self.next_id()
            )));
        }
        self.live_bits.set(self.next_id(), true);
        self.nodes.push(Some(node));
        for adj in &mut self.adjacency {
            adj.push(Adjacency::default());
        }
        self.live += 1;
        Ok(())
    }

    /// Append an id slot that stays empty (a node removed before a snapshot),
    /// so ids after it keep their values when a snapshot is loaded.
    pub fn push_removed(&mut self) {
        self.nodes.push(None);
        for adj in &mut self.adjacency {
            adj.push(Adjacency::default());
        }
    }

    /// Remove a node and every edge that touches it, in every view.
    pub fn remove_node(&mut self, id: NodeId) -> Result<Node> {
        self.require(id)?;
        let idx = id as usize;
        for view in View::ALL {
            let adj = std::mem::take(&mut self.adjacency[view.index()][idx]);
            for &(dst, _) in &adj.out {
                self.detach(view, dst, id, false);
                self.edges.remove(&(id, dst, view));
                self.edge_counts[view.index()] -= 1;
            }
            for &(src, _) in &adj.inc {
                self.detach(view, src, id, true);
                self.edges.remove(&(src, id, view));
                self.edge_counts[view.index()] -= 1;
            }
        }
        self.live -= 1;
        self.live_bits.set(id, false);
        Ok(self.nodes[idx].take().expect("checked above"))
    }

    /// Drop `gone` from `node`'s adjacency (its out-list if `out`, else its in-list).
    fn detach(&mut self, view: View, node: NodeId, gone: NodeId, out: bool) {
        let adj = &mut self.adjacency[view.index()][node as usize];
        let list = if out { &mut adj.out } else { &mut adj.inc };
        list.retain(|&(n, _)| n != gone);
    }

    /// Check an edge against this graph without changing anything.
    pub fn validate_edge(&self, edge: &Edge) -> Result<()> {
        edge.validate()?;
        self.require(edge.src)?;
        self.require(edge.dst)?;
        Ok(())
    }

    /// Insert an edge, or keep the larger weight if (src, dst, view) exists.
    /// A re-assertion also refreshes origin and label when it raises the weight.
    pub fn upsert_edge(&mut self, edge: &Edge) -> Result<EdgeUpsert> {
        self.validate_edge(edge)?;
        let key = (edge.src, edge.dst, edge.view);
        let vi = edge.view.index();
        if let Some(meta) = self.edges.get_mut(&key) {
            if edge.weight <= meta.weight {
                return Ok(EdgeUpsert::Unchanged);
            }
            meta.weight = edge.weight;
            meta.origin = edge.origin;
            if edge.temporal.is_some() {
                meta.temporal = edge.temporal;
            }
            let adj = &mut self.adjacency[vi];
            for entry in adj[edge.src as usize]
                .out
                .iter_mut()
                .filter(|e| e.0 == edge.dst)
            {
                entry.1 = edge.weight;
            }
            for entry in adj[edge.dst as usize]
                .inc
                .iter_mut()
                .filter(|e| e.0 == edge.src)
            {
                entry.1 = edge.weight;
            }
            return Ok(EdgeUpsert::Strengthened);
        }
        self.edges.insert(
            key,
            EdgeMeta {
                weight: edge.weight,
                origin: edge.origin,
                temporal: edge.temporal,
            },
        );
        self.adjacency[vi][edge.src as usize]
            .out
            .push((edge.dst, edge.weight));
        self.adjacency[vi][edge.dst as usize]
            .inc
            .push((edge.src, edge.weight));
        self.edge_counts[vi] += 1;
        Ok(EdgeUpsert::Inserted)
    }

    pub fn edge(&self, src: NodeId, dst: NodeId, view: View) -> Option<Edge> {
        self.edges.get(&(src, dst, view)).map(|m| Edge {
            src,
            dst,
            view,
            weight: m.weight,
            origin: m.origin,
            temporal: m.temporal,
        })
    }

    /// Outgoing (src = id) edges of a node in one view, as (dst, weight).
    pub fn out_edges(&self, id: NodeId, view: View) -> &[(NodeId, f32)] {
        self.adjacency[view.index()]
            .get(id as usize)
            .map_or(&[], |a| a.out.as_slice())
    }

    /// Ask the cache for the edge lists of `nodes` in `views` (a hint: the
    /// lists are read later, as usual). Their headers first, then, once
    /// those have arrived together, the lists they point to: a traversal
    /// round reads a few dozen lists scattered over a large graph.
    pub fn prefetch_edges(&self, nodes: &[NodeId], views: &[View]) {
        let lists = || {
            views.iter().flat_map(move |v| {
                nodes
                    .iter()
                    .filter_map(move |&n| self.adjacency[v.index()].get(usize::try_from(n).ok()?))
            })
        };
        for adj in lists() {
            prefetch::value(adj);
        }
        for adj in lists() {
            prefetch::slice(&adj.out);
            prefetch::slice(&adj.inc);
        }
    }

    /// Incoming (dst = id) edges of a node in one view, as (src, weight).
    pub fn in_edges(&self, id: NodeId, view: View) -> &[(NodeId, f32)] {
        self.adjacency[view.index()]
            .get(id as usize)
            .map_or(&[], |a| a.inc.as_slice())
    }

    /// Every edge touching a node, in all views, sorted by (src, dst, view) so
    /// the order does not depend on the history of insertions.
    pub fn incident_edges(&self, id: NodeId) -> Vec<Edge> {
        let mut edges = Vec::new();
        for view in View::ALL {
            for &(dst, _) in self.out_edges(id, view) {
                edges.extend(self.edge(id, dst, view));
            }
            for &(src, _) in self.in_edges(id, view) {
                edges.extend(self.edge(src, id, view));
            }
        }
        edges.sort_unstable_by_key(|e| (e.src, e.dst, e.view));
        edges
    }

    /// All edges, sorted by (src, dst, view), for snapshots and comparisons.
    pub fn all_edges(&self) -> Vec<Edge> {
        let mut keys: Vec<_> = self.edges.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter()
            .map(|(s, d, v)| self.edge(s, d, v).expect("key from map"))
            .collect()
    }

    /// Approximate heap bytes held by nodes and edges (not the indexes).
    pub fn memory_bytes(&self) -> usize {
        let mut bytes = self.nodes.capacity() * std::mem::size_of::<Option<Node>>()
            + self.live_bits.heap_bytes();
        for n in self.nodes() {
            bytes += n.content.capacity();
            bytes += n
                .provenance
                .iter()
                .map(|(k, v)| k.capacity() + v.capacity() + 48)
                .sum::<usize>();
            bytes += n.entities.iter().map(|e| e.capacity() + 24).sum::<usize>();
        }
        for adj in &self.adjacency {
            bytes += adj.capacity() * std::mem::size_of::<Adjacency>();
            bytes += adj
                .iter()
                .map(|a| (a.out.capacity() + a.inc.capacity()) * 16)
                .sum::<usize>();
        }
        // hashbrown: key + value + 1 control byte per bucket, ~87% load
        bytes += self.edges.capacity() * (24 + std::mem::size_of::<EdgeMeta>() + 1);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TypeScores;

    fn node(id: NodeId) -> Node {
        Node {
            id,
            content: format!("n{id}"),
            timestamp: None,
            provenance: vec![],
            entities: vec![],
            types: TypeScores::default(),
            scope: vec![],
            metadata: vec![],
            key: None,
        }
    }

    fn edge(src: NodeId, dst: NodeId, view: View, weight: f32) -> Edge {
        Edge {
            src,
            dst,
            view,
            weight,
            origin: EdgeOrigin::Rule,
            temporal: None,
        }
    }

    #[test]
    fn reassertion_keeps_larger_weight_and_views_are_independent() {
        let mut g = Graph::new();
        for i in 0..3 {
            g.push_node(node(i)).unwrap();
        }
        assert_eq!(
            g.upsert_edge(&edge(0, 1, View::Semantic, 0.5)).unwrap(),
            EdgeUpsert::Inserted
        );
        assert_eq!(
            g.upsert_edge(&edge(0, 1, View::Semantic, 0.3)).unwrap(),
            EdgeUpsert::Unchanged
        );
        assert_eq!(
            g.upsert_edge(&edge(0, 1, View::Semantic, 0.9)).unwrap(),
            EdgeUpsert::Strengthened
        );
        assert_eq!(
            g.upsert_edge(&edge(0, 1, View::Causal, 0.2)).unwrap(),
            EdgeUpsert::Inserted
        );
        assert_eq!(g.edge(0, 1, View::Semantic).unwrap().weight, 0.9);
        assert_eq!(g.out_edges(0, View::Semantic), &[(1, 0.9)]);
        assert_eq!(g.in_edges(1, View::Semantic), &[(0, 0.9)]);
        assert_eq!(g.edge_count(View::Semantic), 1);
        assert_eq!(g.total_edges(), 2);
    }

    #[test]
    fn removal_drops_incident_edges_everywhere() {
        let mut g = Graph::new();
        for i in 0..3 {
            g.push_node(node(i)).unwrap();
        }
        g.upsert_edge(&edge(0, 1, View::Semantic, 0.5)).unwrap();
        g.upsert_edge(&edge(1, 2, View::Temporal, 0.5)).unwrap();
        g.upsert_edge(&edge(2, 0, View::Entity, 0.5)).unwrap();
        g.remove_node(1).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g.total_edges(), 1);
        assert!(g.out_edges(0, View::Semantic).is_empty());
        assert!(g.in_edges(2, View::Temporal).is_empty());
        assert!(matches!(g.remove_node(1), Err(Error::NodeNotFound(1))));
        assert_eq!(g.next_id(), 3);
    }

    #[test]
    fn bad_edges_are_rejected() {
        let mut g = Graph::new();
        g.push_node(node(0)).unwrap();
        g.push_node(node(1)).unwrap();
        assert!(g.upsert_edge(&edge(0, 0, View::Semantic, 0.5)).is_err());
        assert!(g.upsert_edge(&edge(0, 7, View::Semantic, 0.5)).is_err());
        assert!(g
            .upsert_edge(&edge(0, 1, View::Semantic, f32::NAN))
            .is_err());
        assert!(g.upsert_edge(&edge(0, 1, View::Semantic, 1.5)).is_err());
        let mut labelled = edge(0, 1, View::Causal, 0.5);
        labelled.temporal = Some(TemporalLabel::Before);
        assert!(g.upsert_edge(&labelled).is_err());
        assert_eq!(g.total_edges(), 0);
    }

    #[test]
    fn prefetching_edges_reads_nothing_and_takes_any_id() {
        let mut g = Graph::new();
        g.prefetch_edges(&[0, 5, u64::MAX], &View::ALL);
        for id in 0..3 {
            g.push_node(node(id)).unwrap();
        }
        g.upsert_edge(&edge(0, 1, View::Semantic, 0.5)).unwrap();
        g.remove_node(2).unwrap();
        let before = g.all_edges();
        g.prefetch_edges(&[0, 1, 2, 3, u64::MAX], &View::ALL);
        assert_eq!(g.all_edges(), before);
        assert_eq!(g.out_edges(0, View::Semantic), &[(1, 0.5)]);
    }

    proptest::proptest! {
        /// `contains` (a bit per id) answers what the node slots hold, across
        /// any run of pushes, empty slots and removals, and for ids past the end.
        #[test]
        fn contains_is_a_live_node_slot(ops in proptest::collection::vec(0u8..3, 0..200), probe in 0u64..300) {
            let mut g = Graph::new();
            for (k, op) in ops.into_iter().enumerate() {
                match op {
                    0 => g.push_node(node(g.next_id())).unwrap(),
                    1 => g.push_removed(),
                    _ => {
                        let _ = g.remove_node(k as NodeId % (g.next_id() + 1));
                    }
                }
            }
            for id in (0..g.next_id() + 70).chain([probe, u64::MAX]) {
                proptest::prop_assert_eq!(g.contains(id), g.get(id).is_some(), "id {}", id);
            }
        }
    }
}
