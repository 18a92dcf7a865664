//! Supersedes links and validity: links keep a DAG, validity intervals are
//! well formed and follow the successors' event times, removal cleans both
//! directions, bad links change nothing, and snapshots keep it all (and still
//! read version 1 files).

use std::collections::{BTreeMap, BTreeSet};

use jevmem_core::facts::Supersedes;
use jevmem_core::ops::NewNode;
use jevmem_core::snapshot::FORMAT_VERSION;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{EdgeOrigin, Error, NodeId, TemporalLabel, Timestamp, View};
use proptest::prelude::*;

const DIM: usize = 4;

fn store_with(stamps: &[Option<Timestamp>]) -> MemoryStore {
    let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    for (i, ts) in stamps.iter().enumerate() {
        let mut n = NewNode::new(format!("fact number {i}"), vec![1.0, i as f32, 0.5, -1.0]);
        n.timestamp = *ts;
        s.add_node(n).unwrap();
    }
    s
}

fn link(new: NodeId, old: NodeId, weight: f32) -> Supersedes {
    Supersedes {
        new,
        old,
        weight,
        origin: EdgeOrigin::Controller,
    }
}

#[test]
fn a_chain_of_updates() {
    // oat (t=100) <- soy (t=200) <- almond (t=300, but its text dates it at 250)
    let mut s = store_with(&[Some(100), Some(200), Some(300), Some(150)]);
    s.add_supersedes(link(1, 0, 0.8)).unwrap();
    s.add_supersedes(link(2, 1, 0.9)).unwrap();
    s.set_valid_from(2, Some(250)).unwrap();
    assert_eq!(s.validity(0).unwrap(), (Some(100), Some(200)));
    assert_eq!(s.validity(1).unwrap(), (Some(200), Some(250)));
    assert_eq!(s.validity(2).unwrap(), (Some(250), None));
    assert_eq!(s.validity(3).unwrap(), (Some(150), None)); // not in a chain
    assert_eq!(s.history(2).unwrap(), vec![2, 1, 0]);
    assert_eq!(s.history(0).unwrap(), vec![0]);
    assert_eq!(s.facts().superseded_by(0), vec![1]);
    assert_eq!(s.facts().supersedes(2), vec![1]);
    // each link is also a temporal edge new -after-> old
    let e = s.graph().edge(1, 0, View::Temporal).unwrap();
    assert_eq!(e.temporal, Some(TemporalLabel::After));
    assert_eq!(e.weight, 0.8);
    // re-asserting keeps the larger weight
    s.add_supersedes(link(1, 0, 0.6)).unwrap();
    assert_eq!(s.facts().link(1, 0).unwrap().weight, 0.8);
    s.add_supersedes(link(1, 0, 0.95)).unwrap();
    assert_eq!(s.facts().link(1, 0).unwrap().weight, 0.95);
    // a successor dated before its predecessor began closes it at once, never before
    s.set_valid_from(2, Some(180)).unwrap();
    assert_eq!(s.validity(1).unwrap(), (Some(200), Some(200)));
    s.set_valid_from(2, None).unwrap();
    assert_eq!(s.validity(2).unwrap(), (Some(300), None));
    assert_eq!(s.stats().supersedes, 2);
}

#[test]
fn a_fact_begins_when_its_text_says_whatever_its_links() {
    use jevmem_core::derived::{DerivedFacts, TimeRef};
    // node 1's text grounds a time before its observation ("last week")
    let mut s = store_with(&[Some(100), Some(1_000), Some(2_000)]);
    let last_week = TimeRef {
        text: "last week".into(),
        start: 400,
        end: 700,
        precision: 3,
        relative: true,
        span: (0, 9),
        anchor_precision: None,
    };
    // and one ahead of it (an appointment it names), which dates no fact
    let ahead = TimeRef {
        start: 1_200,
        end: 1_250,
        ..last_week.clone()
    };
    s.set_derived(
        1,
        vec![DerivedFacts {
            id: 1,
            question_share: 0.0,
            time_refs: vec![ahead, last_week],
        }],
    )
    .unwrap();
    // unlinked: its latest grounded time by its observation, not the observation
    assert_eq!(s.validity(1).unwrap(), (Some(400), None));
    assert_eq!(s.validity(0).unwrap(), (Some(100), None));
    // linked and unlinked again: the same start, nothing left behind
    s.add_supersedes(link(1, 0, 1.0)).unwrap();
    s.add_supersedes(link(2, 1, 1.0)).unwrap();
    assert_eq!(s.validity(0).unwrap(), (Some(100), Some(400)));
    assert_eq!(s.validity(1).unwrap(), (Some(400), Some(2_000)));
    s.forget_nodes(&[2]).unwrap();
    assert_eq!(s.validity(1).unwrap(), (Some(400), None));
    // one set by hand wins; None gives the text's back
    s.set_valid_from(1, Some(800)).unwrap();
    assert_eq!(s.validity(0).unwrap(), (Some(100), Some(800)));
    s.set_valid_from(1, None).unwrap();
    assert_eq!(s.validity(1).unwrap(), (Some(400), None));
    let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
    assert_eq!(loaded.validity(1).unwrap(), (Some(400), None));
}

#[test]
fn bad_links_change_nothing() {
    let mut s = store_with(&[Some(1), Some(2), Some(3)]);
    s.add_supersedes(link(1, 0, 0.7)).unwrap();
    s.add_supersedes(link(2, 1, 0.7)).unwrap();
    let before = s.to_snapshot_bytes().unwrap();
    for bad in [
        link(0, 0, 0.7), // self
        link(0, 2, 0.7), // closes 2 -> 1 -> 0 -> 2
        link(1, 2, 0.7), // closes 2 -> 1 -> 2
        link(9, 0, 0.7), // unknown node
        link(2, 0, 1.5), // weight outside [0, 1]
        link(2, 0, f32::NAN),
    ] {
        assert!(s.add_supersedes(bad).is_err());
        assert_eq!(s.to_snapshot_bytes().unwrap(), before);
    }
    // a batch is all or nothing, and its own links count for cycles
    let err = s
        .add_supersedes_many(vec![link(2, 0, 0.7), link(0, 2, 0.7)])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(err.to_string().contains("link 1"), "{err}");
    assert_eq!(s.to_snapshot_bytes().unwrap(), before);
    assert!(s.set_valid_from(7, Some(1)).is_err());
    assert!(s.validity(7).is_err());
    assert!(s.history(7).is_err());
}

#[test]
fn removal_cleans_links_both_ways() {
    let mut s = store_with(&[Some(1), Some(2), Some(3)]);
    s.add_supersedes_many(vec![link(1, 0, 0.7), link(2, 1, 0.8)])
        .unwrap();
    s.set_valid_from(1, Some(2)).unwrap();
    s.remove_node(1).unwrap();
    assert!(s.facts().is_empty());
    assert!(s.facts().superseded_by(0).is_empty());
    assert!(s.facts().supersedes(2).is_empty());
    assert_eq!(s.facts().explicit_valid_from(1), None);
    // the fact it replaced is current again
    assert_eq!(s.validity(0).unwrap(), (Some(1), None));
    assert_eq!(s.graph().edge_count(View::Temporal), 0);
}

/// A version 1 file of a memory without passages, links or event times,
/// written from the public API the way builds of version 1 wrote it (nodes
/// without scope, metadata or key; no trailing fields).
fn as_version_1(store: &MemoryStore) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct NodeV1<'a> {
        id: NodeId,
        content: &'a str,
        timestamp: Option<Timestamp>,
        provenance: &'a [(String, String)],
        entities: &'a [String],
        types: jevmem_core::TypeScores,
    }
    #[derive(serde::Serialize)]
    struct BodyV1<'a> {
        config: &'a StoreConfig,
        next_id: NodeId,
        ops_applied: u64,
        nodes: Vec<NodeV1<'a>>,
        embeddings: Vec<f32>,
        edges: Vec<jevmem_core::Edge>,
    }
    let nodes: Vec<NodeV1<'_>> = store
        .graph()
        .nodes()
        .map(|n| NodeV1 {
            id: n.id,
            content: &n.content,
            timestamp: n.timestamp,
            provenance: &n.provenance,
            entities: &n.entities,
            types: n.types,
        })
        .collect();
    let embeddings = nodes
        .iter()
        .flat_map(|n| store.embedding(n.id).unwrap().to_vec())
        .collect();
    let body = BodyV1 {
        config: store.config(),
        next_id: store.next_id(),
        ops_applied: store.ops_applied(),
        nodes,
        embeddings,
        edges: store.graph().all_edges(),
    };
    let payload = postcard::to_stdvec(&body).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(b"JEVMEMSS");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[test]
fn snapshots_keep_links_and_read_version_1() {
    assert_eq!(FORMAT_VERSION, 8);
    let mut plain = store_with(&[Some(10), None, Some(30)]);
    plain.remove_node(1).unwrap();
    let v1 = as_version_1(&plain);
    let loaded = MemoryStore::from_snapshot_bytes(&v1).unwrap();
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded.next_id(), 3);
    assert!(loaded.facts().is_empty());
    // loading v1 then saving writes the current version with the same content
    assert_eq!(
        loaded.to_snapshot_bytes().unwrap(),
        plain.to_snapshot_bytes().unwrap()
    );

    let mut s = store_with(&[Some(10), Some(20), Some(30), Some(40)]);
    s.add_supersedes_many(vec![link(1, 0, 0.7), link(3, 1, 0.9), link(2, 0, 0.65)])
        .unwrap();
    s.set_valid_from(3, Some(35)).unwrap();
    s.remove_node(2).unwrap();
    let bytes = s.to_snapshot_bytes().unwrap();
    let t = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
    assert_eq!(t.facts().links(), s.facts().links());
    for id in [0, 1, 3] {
        assert_eq!(t.validity(id).unwrap(), s.validity(id).unwrap());
        assert_eq!(t.history(id).unwrap(), s.history(id).unwrap());
    }
    assert_eq!(t.graph().all_edges(), s.graph().all_edges());
    assert_eq!(t.to_snapshot_bytes().unwrap(), bytes);
}

// ---- random histories against a plain model ------------------------------------

#[derive(Clone, Debug)]
enum Step {
    Link(usize, usize, f32),
    Event(usize, Option<Timestamp>),
    Remove(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0usize..12, 0usize..12, 0.0f32..=1.0).prop_map(|(a, b, w)| Step::Link(a, b, w)),
        2 => (0usize..12, prop::option::of(0i64..500)).prop_map(|(a, t)| Step::Event(a, t)),
        1 => (0usize..12).prop_map(Step::Remove),
    ]
}

/// The model: links as a map, event times as a map, live ids as a set.
#[derive(Default)]
struct Model {
    links: BTreeMap<(NodeId, NodeId), f32>,
    event: BTreeMap<NodeId, Timestamp>,
    live: BTreeSet<NodeId>,
    stamps: BTreeMap<NodeId, Timestamp>,
}

impl Model {
    fn reaches_older(&self, from: NodeId, to: NodeId) -> bool {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n) {
                stack.extend(self.links.keys().filter(|(a, _)| *a == n).map(|&(_, b)| b));
            }
        }
        false
    }

    fn valid_from(&self, id: NodeId) -> Option<Timestamp> {
        self.event.get(&id).or(self.stamps.get(&id)).copied()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn tables_follow_the_model(
        stamps in prop::collection::vec(prop::option::of(0i64..500), 2..12),
        steps in prop::collection::vec(step(), 0..40),
    ) {
        let mut s = store_with(&stamps);
        let mut m = Model::default();
        for (i, t) in stamps.iter().enumerate() {
            m.live.insert(i as NodeId);
            if let Some(t) = t {
                m.stamps.insert(i as NodeId, *t);
            }
        }
        for st in &steps {
            let before = s.to_snapshot_bytes().unwrap();
            match *st {
                Step::Link(a, b, w) => {
                    let (a, b) = (a as NodeId, b as NodeId);
                    let ok = a != b
                        && m.live.contains(&a)
                        && m.live.contains(&b)
                        && (m.links.contains_key(&(a, b)) || !m.reaches_older(b, a));
                    let got = s.add_supersedes(link(a, b, w));
                    prop_assert_eq!(got.is_ok(), ok, "link {} -> {}: {:?}", a, b, got);
                    if ok {
                        let e = m.links.entry((a, b)).or_insert(w);
                        *e = e.max(w);
                    } else {
                        prop_assert_eq!(s.to_snapshot_bytes().unwrap(), before);
                    }
                }
                Step::Event(a, t) => {
                    let a = a as NodeId;
                    let got = s.set_valid_from(a, t);
                    prop_assert_eq!(got.is_ok(), m.live.contains(&a));
                    if got.is_ok() {
                        match t {
                            Some(t) => m.event.insert(a, t),
                            None => m.event.remove(&a),
                        };
                    }
                }
                Step::Remove(a) => {
                    let a = a as NodeId;
                    if s.remove_node(a).is_ok() {
                        m.live.remove(&a);
                        m.event.remove(&a);
                        m.links.retain(|&(x, y), _| x != a && y != a);
                    }
                }
            }
        }
        let links: BTreeMap<(NodeId, NodeId), f32> =
            s.facts().links().iter().map(|l| ((l.new, l.old), l.weight)).collect();
        prop_assert_eq!(&links, &m.links);
        for &id in &m.live {
            let olds: Vec<NodeId> = m.links.keys().filter(|(a, _)| *a == id).map(|&(_, b)| b).collect();
            let news: Vec<NodeId> = m.links.keys().filter(|(_, b)| *b == id).map(|&(a, _)| a).collect();
            prop_assert_eq!(s.facts().supersedes(id), olds.clone());
            prop_assert_eq!(s.facts().superseded_by(id), news.clone());
            // validity: from the event time (else the timestamp) to the
            // earliest successor's, never before its own start
            let (from, to) = s.validity(id).unwrap();
            prop_assert_eq!(from, m.valid_from(id));
            let want_to = news.iter().filter_map(|&n| m.valid_from(n)).min()
                .map(|t| from.map_or(t, |f| t.max(f)));
            prop_assert_eq!(to, want_to);
            if let (Some(f), Some(t)) = (from, to) {
                prop_assert!(f <= t);
            }
            // no cycles: nothing reaches back to itself, history is duplicate-free
            let h = s.history(id).unwrap();
            prop_assert_eq!(h[0], id);
            prop_assert_eq!(h.iter().collect::<BTreeSet<_>>().len(), h.len());
            for &old in &olds {
                prop_assert!(!m.reaches_older(old, id));
                let e = s.graph().edge(id, old, View::Temporal);
                prop_assert!(e.is_some(), "link {} -> {} has no temporal edge", id, old);
            }
        }
        let t = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
        prop_assert_eq!(t.facts().links(), s.facts().links());
        for &id in &m.live {
            prop_assert_eq!(t.validity(id).unwrap(), s.validity(id).unwrap());
        }
    }
}
