//! Passage vectors of long observations: ranking equals a naive best-passage
//! scan, removal takes a node's passages with it, bad passages change
//! nothing, and snapshots keep them.

use std::collections::BTreeMap;

use jevmem_core::ops::NewNode;
use jevmem_core::passages::NewPassage;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::vector::{dot, VectorIndex};
use jevmem_core::{Error, NodeId};
use proptest::prelude::*;

const DIM: usize = 6;

fn store(exact_threshold: usize) -> MemoryStore {
    let mut cfg = StoreConfig::new(DIM);
    cfg.vector.exact_threshold = exact_threshold;
    MemoryStore::new(cfg).unwrap()
}

/// Small integer components: many exact ties, which the order must break the same way.
fn vector() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-2i8..=2, DIM)
        .prop_filter("non-zero", |v| v.iter().any(|&x| x != 0))
        .prop_map(|v| v.into_iter().map(f32::from).collect())
}

/// A node of `len` characters with passages cut every `len / m` characters.
fn node_strategy() -> impl Strategy<Value = NewNode> {
    (1usize..40, vector(), prop::collection::vec(vector(), 0..5)).prop_map(
        |(len, embedding, passage_vecs)| {
            let len = len.max(passage_vecs.len());
            let text: String = "é".repeat(len); // multi-byte: spans count characters
            let m = passage_vecs.len();
            let passages = passage_vecs
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let start = (i * len / m) as u64;
                    let end = ((i + 1) * len / m) as u64;
                    NewPassage::new(start, end, v)
                })
                .collect();
            let mut n = NewNode::new(text, embedding);
            n.passages = passages;
            n
        },
    )
}

fn unit(v: &[f32]) -> Vec<f32> {
    VectorIndex::normalize(v)
}

/// Every live node's best passage (a node without passages: its node vector, index 0).
fn reference(live: &BTreeMap<NodeId, NewNode>, query: &[f32], k: usize) -> Vec<(NodeId, u32, f32)> {
    let q = unit(query);
    let mut out: Vec<(NodeId, u32, f32)> = live
        .iter()
        .map(|(&id, n)| {
            if n.passages.is_empty() {
                (id, 0, dot(&q, &unit(&n.embedding)))
            } else {
                let mut best = (id, 0u32, f32::NEG_INFINITY);
                for (i, p) in n.passages.iter().enumerate() {
                    let s = dot(&q, &unit(&p.embedding));
                    if s > best.2 {
                        best = (id, i as u32, s);
                    }
                }
                best
            }
        })
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    out.truncate(k);
    out
}

fn close(a: &[(NodeId, u32, f32)], b: &[(NodeId, u32, f32)]) -> bool {
    // similarities may differ in the last bits (kernel vs scalar dot), so an
    // exact tie can order either way: compare the scores, and ids where they differ
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| (x.2 - y.2).abs() < 1e-5)
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.2 - y.2).abs() > 1e-6 || x.0 == y.0 || is_tied(b, y.2))
}

fn is_tied(ranked: &[(NodeId, u32, f32)], s: f32) -> bool {
    ranked.iter().filter(|r| (r.2 - s).abs() < 1e-5).count() > 1
}

#[allow(clippy::large_enum_variant)] // test steps, built once each
#[derive(Clone, Debug)]
enum Step {
    Add(NewNode),
    Remove(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => node_strategy().prop_map(Step::Add),
        1 => (0usize..32).prop_map(Step::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn search_matches_naive_best_passage(
        steps in prop::collection::vec(step(), 1..24),
        query in vector(),
        k in 1usize..12,
        snapshot in any::<bool>(),
    ) {
        let mut s = store(1 << 20);
        let mut live: BTreeMap<NodeId, NewNode> = BTreeMap::new();
        for st in steps {
            match st {
                Step::Add(n) => {
                    let id = s.add_node(n.clone()).unwrap();
                    live.insert(id, n);
                }
                Step::Remove(i) => {
                    if let Some(&id) = live.keys().nth(i % live.len().max(1)) {
                        s.remove_node(id).unwrap();
                        live.remove(&id);
                        prop_assert!(s.passage_spans(id).is_err());
                    }
                }
            }
        }
        if snapshot {
            let bytes = s.to_snapshot_bytes().unwrap();
            s = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
            prop_assert_eq!(s.to_snapshot_bytes().unwrap(), bytes);
        }
        let total: usize = live.values().map(|n| n.passages.len()).sum();
        prop_assert_eq!(s.stats().passages, total);
        let got: Vec<(NodeId, u32, f32)> = s
            .search_passages(&query, k)
            .unwrap()
            .into_iter()
            .map(|h| (h.node, h.passage, h.similarity))
            .collect();
        let want = reference(&live, &query, k);
        prop_assert!(close(&got, &want), "got {:?} want {:?}", got, want);

        // per-node best passage, and spans as given
        let ids: Vec<NodeId> = live.keys().copied().collect();
        let best = s.passage_similarities(&query, &ids).unwrap();
        let all = reference(&live, &query, usize::MAX);
        for (id, b) in ids.iter().zip(best) {
            let (sim, idx) = b.unwrap();
            let r = all.iter().find(|r| r.0 == *id).unwrap();
            prop_assert!((sim - r.2).abs() < 1e-5);
            let n = &live[id];
            if !n.passages.is_empty() {
                let q = unit(&query);
                let at = dot(&q, &unit(&n.passages[idx as usize].embedding));
                prop_assert!((at - r.2).abs() < 1e-5);
            } else {
                prop_assert_eq!(idx, 0);
            }
            let spans: Vec<(u64, u64)> = n.passages.iter().map(|p| (p.start, p.end)).collect();
            prop_assert_eq!(s.passage_spans(*id).unwrap(), spans.as_slice());
        }
        // the passage-only ranking is the same restricted to nodes with passages
        let long: BTreeMap<NodeId, NewNode> = live
            .iter()
            .filter(|(_, n)| !n.passages.is_empty())
            .map(|(&id, n)| (id, n.clone()))
            .collect();
        let got: Vec<(NodeId, u32, f32)> = s
            .passage_index()
            .search(&query, k)
            .unwrap()
            .into_iter()
            .map(|h| (h.node, h.passage, h.similarity))
            .collect();
        prop_assert!(close(&got, &reference(&long, &query, k)));
    }

    #[test]
    fn every_passage_finds_its_node(nodes in prop::collection::vec(node_strategy(), 1..12)) {
        let mut s = store(1 << 20);
        let ids = s.add_nodes(nodes.clone()).unwrap();
        for (id, n) in ids.iter().zip(&nodes) {
            for (i, p) in n.passages.iter().enumerate() {
                let hits = s.search_passages(&p.embedding, ids.len()).unwrap();
                let top = hits[0].similarity;
                // its own passage is a perfect match: first, or tied with the first
                let own = hits.iter().find(|h| h.node == *id).unwrap();
                prop_assert!((own.similarity - top).abs() < 1e-5);
                prop_assert!((own.similarity - 1.0).abs() < 1e-5);
                let sim_i = s
                    .passage_index()
                    .embedding(*id, i as u32)
                    .map(|v| dot(&unit(&p.embedding), v))
                    .unwrap();
                prop_assert!((sim_i - 1.0).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn bad_passages_change_nothing() {
    let mut s = store(1 << 20);
    let mut ok = NewNode::new("abcdef", vec![1.0; DIM]);
    ok.passages = vec![
        NewPassage::new(0, 3, vec![1.0; DIM]),
        NewPassage::new(3, 6, vec![0.5; DIM]),
    ];
    s.add_node(ok).unwrap();
    let before = s.to_snapshot_bytes().unwrap();
    let bad: Vec<Vec<NewPassage>> = vec![
        vec![NewPassage::new(0, 7, vec![1.0; DIM])], // past the end
        vec![NewPassage::new(2, 2, vec![1.0; DIM])], // empty
        vec![
            NewPassage::new(2, 4, vec![1.0; DIM]),
            NewPassage::new(1, 5, vec![1.0; DIM]),
        ], // out of order
        vec![NewPassage::new(0, 3, vec![1.0; DIM + 1])], // dimension
        vec![NewPassage::new(0, 3, vec![f32::NAN; DIM])], // not finite
        vec![NewPassage::new(0, 3, vec![0.0; DIM])], // zero
    ];
    for passages in bad {
        let mut n = NewNode::new("abcdef", vec![1.0; DIM]);
        n.passages = passages;
        let err = s.add_node(n.clone()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidInput(_) | Error::DimensionMismatch { .. }
            ),
            "{err}"
        );
        let err = s
            .add_nodes(vec![NewNode::new("fine", vec![1.0; DIM]), n])
            .unwrap_err();
        if matches!(err, Error::InvalidInput(_)) {
            assert!(err.to_string().contains("observation 1"), "{err}");
        }
        assert_eq!(s.to_snapshot_bytes().unwrap(), before);
    }
}

#[test]
fn removal_and_hnsw_path() {
    // a low threshold puts the passage index on the HNSW graph
    let mut s = store(8);
    let mut ids = Vec::new();
    for i in 0..20u64 {
        let mut n = NewNode::new("x".repeat(10), vec![1.0 + i as f32; DIM]);
        n.embedding[0] = -(i as f32);
        n.passages = (0..5)
            .map(|j| {
                let mut v = vec![0.1; DIM];
                v[(i as usize + j) % DIM] = 1.0 + j as f32;
                NewPassage::new(2 * j as u64, 2 * j as u64 + 2, v)
            })
            .collect();
        ids.push(s.add_node(n).unwrap());
    }
    assert!(s.passage_index().vectors().uses_hnsw());
    assert_eq!(s.stats().passages, 100);
    let q = {
        let mut v = vec![0.1; DIM];
        v[3] = 5.0;
        v
    };
    let hits = s.search_passages(&q, 5).unwrap();
    assert_eq!(hits.len(), 5);
    let nodes: std::collections::BTreeSet<NodeId> = hits.iter().map(|h| h.node).collect();
    assert_eq!(nodes.len(), 5, "one hit per node");
    let gone = hits[0].node;
    s.remove_node(gone).unwrap();
    assert_eq!(s.stats().passages, 95);
    assert!(s
        .search_passages(&q, 20)
        .unwrap()
        .iter()
        .all(|h| h.node != gone));
}
