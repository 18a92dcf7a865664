//! MemoryStore: validation leaves state untouched, batches are atomic,
//! removal is real, snapshots round-trip and reject corruption, and write
//! candidates match a naive reference.

use std::collections::BTreeSet;

use jevmem_core::candidates::CandidateMatch;
use jevmem_core::ops::{NewNode, Op};
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{Edge, EdgeOrigin, Error, NodeId, TemporalLabel, TypeScores, View};
use proptest::prelude::*;

const DIM: usize = 8;

fn store() -> MemoryStore {
    MemoryStore::new(StoreConfig::new(DIM)).unwrap()
}

fn emb(seed: u64) -> Vec<f32> {
    // splitmix64 -> floats in [-1, 1)
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    (0..DIM)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn node(text: &str, seed: u64) -> NewNode {
    NewNode::new(text, emb(seed))
}

fn edge(src: NodeId, dst: NodeId, view: View, weight: f32) -> Edge {
    Edge {
        src,
        dst,
        view,
        weight,
        origin: EdgeOrigin::Controller,
        temporal: None,
    }
}

fn fingerprint(s: &MemoryStore) -> Vec<u8> {
    s.to_snapshot_bytes().unwrap()
}

#[test]
fn add_and_get() {
    let mut s = store();
    let mut n = node("Caroline went to the LGBTQ support group", 1);
    n.timestamp = Some(1_683_000_000);
    n.entities = vec![
        "  Caroline ".into(),
        "caroline".into(),
        "Support   Group".into(),
    ];
    n.provenance = vec![("speaker".into(), "Caroline".into())];
    let id = s.add_node(n).unwrap();
    assert_eq!(id, 0);
    let got = s.get(0).unwrap();
    assert_eq!(got.entities, vec!["caroline", "support group"]);
    assert_eq!(got.timestamp, Some(1_683_000_000));
    assert_eq!(s.nodes_with_entity("CAROLINE"), &[0]);
    let norm: f32 = s.embedding(0).unwrap().iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-5);
    assert_eq!(s.search_lexical("support group", 5)[0].0, 0);
}

#[test]
fn bad_input_changes_nothing() {
    let mut s = store();
    s.add_node(node("first observation", 1)).unwrap();
    s.add_node(node("second observation", 2)).unwrap();
    s.upsert_edge(edge(0, 1, View::Semantic, 0.7)).unwrap();
    let before = fingerprint(&s);

    let mut bad_nodes = vec![
        node("", 3),
        node("   \n\t", 3),
        NewNode::new("wrong dimension", vec![0.1; DIM + 1]),
        NewNode::new("nan", {
            let mut v = emb(4);
            v[2] = f32::NAN;
            v
        }),
        NewNode::new("zero vector", vec![0.0; DIM]),
        node(&"x".repeat(4 * 1024 * 1024 + 1), 5),
    ];
    let mut bad_types = node("bad types", 6);
    bad_types.types = TypeScores {
        episodic: 1.5,
        ..Default::default()
    };
    bad_nodes.push(bad_types);
    let mut bad_entity = node("bad entity", 7);
    bad_entity.entities = vec!["  ".into()];
    bad_nodes.push(bad_entity);
    for n in bad_nodes {
        assert!(s.add_node(n).is_err());
        assert_eq!(fingerprint(&s), before);
    }
    assert!(matches!(
        s.add_node(NewNode::new("dim", vec![1.0; 3])),
        Err(Error::DimensionMismatch {
            expected: DIM,
            got: 3
        })
    ));

    for e in [
        edge(0, 9, View::Semantic, 0.5),
        edge(0, 0, View::Semantic, 0.5),
        edge(0, 1, View::Causal, f32::NAN),
        edge(0, 1, View::Causal, -0.1),
        Edge {
            temporal: Some(TemporalLabel::Before),
            ..edge(0, 1, View::Entity, 0.5)
        },
    ] {
        assert!(s.upsert_edge(e).is_err());
        assert_eq!(fingerprint(&s), before);
    }
    assert!(matches!(
        s.set_types(7, TypeScores::default()),
        Err(Error::NodeNotFound(7))
    ));
    assert!(s
        .set_types(
            0,
            TypeScores {
                semantic: f32::NAN,
                ..Default::default()
            }
        )
        .is_err());
    assert!(s.remove_node(42).is_err());
    assert!(s
        .apply(Op::AddNode {
            id: 5,
            node: node("wrong id", 9)
        })
        .is_err());
    assert_eq!(fingerprint(&s), before);
}

#[test]
fn batches_are_all_or_nothing() {
    let mut s = store();
    s.add_node(node("anchor", 1)).unwrap();
    let before = fingerprint(&s);
    let batch = vec![node("ok one", 2), node("ok two", 3), node("", 4)];
    let err = s.add_nodes(batch).unwrap_err();
    assert!(err.to_string().contains("observation 2"), "{err}");
    assert_eq!(fingerprint(&s), before);

    let ids = s
        .add_nodes(vec![node("ok one", 2), node("ok two", 3)])
        .unwrap();
    assert_eq!(ids, vec![1, 2]);
    let before = fingerprint(&s);
    assert!(s
        .upsert_edges(vec![
            edge(0, 1, View::Semantic, 0.5),
            edge(1, 77, View::Semantic, 0.5)
        ])
        .is_err());
    assert_eq!(fingerprint(&s), before);
}

#[test]
fn removal_is_real() {
    let mut s = store();
    let mut a = node("the red bicycle", 1);
    a.entities = vec!["bike".into()];
    a.timestamp = Some(100);
    s.add_node(a).unwrap();
    s.add_node(node("a blue car", 2)).unwrap();
    s.add_node(node("red apples", 3)).unwrap();
    s.upsert_edge(edge(0, 1, View::Semantic, 0.9)).unwrap();
    s.upsert_edge(edge(2, 0, View::Causal, 0.9)).unwrap();
    s.remove_node(0).unwrap();
    assert!(s.get(0).is_none());
    assert_eq!(s.len(), 2);
    assert_eq!(s.graph().total_edges(), 0);
    assert!(s.search_lexical("bicycle", 5).is_empty());
    assert!(s
        .search_vector(&emb(1), 5)
        .unwrap()
        .iter()
        .all(|(id, _)| *id != 0));
    assert!(s.nodes_with_entity("bike").is_empty());
    // ids are never reused
    assert_eq!(s.add_node(node("new", 4)).unwrap(), 3);
}

#[test]
fn snapshot_round_trip_and_corruption() {
    let mut s = store();
    for i in 0..20u64 {
        let mut n = node(&format!("observation number {i} about topic {}", i % 3), i);
        n.timestamp = (i % 2 == 0).then_some(1000 + i as i64);
        n.entities = vec![format!("e{}", i % 4)];
        n.provenance = vec![("turn".into(), format!("D1:{i}"))];
        s.add_node(n).unwrap();
    }
    s.remove_node(5).unwrap();
    s.remove_node(19).unwrap();
    s.upsert_edge(Edge {
        temporal: Some(TemporalLabel::Before),
        ..edge(0, 2, View::Temporal, 1.0)
    })
    .unwrap();
    s.upsert_edge(edge(3, 4, View::Causal, 0.8)).unwrap();
    let bytes = s.to_snapshot_bytes().unwrap();
    let t = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
    assert_eq!(t.next_id(), 20);
    assert_eq!(t.len(), 18);
    assert_eq!(t.ops_applied(), s.ops_applied());
    assert_eq!(t.graph().all_edges(), s.graph().all_edges());
    for n in s.graph().nodes() {
        assert_eq!(t.get(n.id), Some(n));
        // bit for bit: a loaded memory holds exactly the stored unit vectors
        assert_eq!(s.embedding(n.id).unwrap(), t.embedding(n.id).unwrap());
    }
    assert_eq!(t.search_lexical("topic", 30), s.search_lexical("topic", 30));
    assert_eq!(
        t.candidates_for(12, None).unwrap(),
        s.candidates_for(12, None).unwrap()
    );

    let dir = std::env::temp_dir().join(format!("jevmem-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.jvm");
    s.save(&path).unwrap();
    assert_eq!(MemoryStore::load(&path).unwrap().len(), 18);

    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    assert!(matches!(
        MemoryStore::from_snapshot_bytes(&flipped),
        Err(Error::Snapshot(_))
    ));
    assert!(matches!(
        MemoryStore::from_snapshot_bytes(&bytes[..bytes.len() - 3]),
        Err(Error::Snapshot(_))
    ));
    assert!(matches!(
        MemoryStore::from_snapshot_bytes(b"nonsense"),
        Err(Error::Snapshot(_))
    ));
    let mut future = bytes.clone();
    future[8] = 99;
    let err = MemoryStore::from_snapshot_bytes(&future).err().unwrap();
    assert!(err.to_string().contains("version 99"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- write candidates against a naive reference -----------------------------

/// The candidate definition of `candidates.rs`, computed by brute force.
fn reference_candidates(s: &MemoryStore, id: NodeId) -> Vec<CandidateMatch> {
    let cfg = s.config().candidates;
    let node = s.get(id).unwrap();
    let q = s.embedding(id).unwrap();
    let earlier: Vec<NodeId> = s
        .graph()
        .nodes()
        .map(|n| n.id)
        .filter(|&o| o < id)
        .collect();
    let dot = |o: NodeId| -> f32 { s.vectors().similarity(q, o).unwrap() };
    let tokens = s.lexical_tokens(&node.content, &node.provenance);

    let mut pool = BTreeSet::new();
    let mut by_vec: Vec<(f32, NodeId)> = earlier.iter().map(|&o| (dot(o), o)).collect();
    by_vec.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    pool.extend(by_vec.iter().take(cfg.pool).map(|x| x.1));
    let lex = s.bm25().score(&tokens, &earlier);
    let mut by_lex: Vec<(f32, NodeId)> = lex
        .iter()
        .copied()
        .zip(earlier.iter().copied())
        .filter(|x| x.0 > 0.0)
        .collect();
    by_lex.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    pool.extend(by_lex.iter().take(cfg.pool).map(|x| x.1));
    for e in &node.entities {
        let carriers: Vec<NodeId> = earlier
            .iter()
            .copied()
            .filter(|&o| s.get(o).unwrap().entities.contains(e))
            .collect();
        pool.extend(carriers.iter().rev().take(cfg.pool));
    }
    if let Some(ts) = node.timestamp {
        let mut by_time: Vec<(u64, NodeId)> = earlier
            .iter()
            .filter_map(|&o| s.get(o).unwrap().timestamp.map(|t| (t.abs_diff(ts), o)))
            .collect();
        by_time.sort();
        if let Some(&(cut, _)) = by_time.get(cfg.pool.saturating_sub(1)) {
            by_time.retain(|x| x.0 <= cut);
        }
        pool.extend(by_time.iter().map(|x| x.1));
    }
    let ids: Vec<NodeId> = pool.into_iter().collect();
    let lex = s.bm25().score(&tokens, &ids);
    let max_lex = lex.iter().copied().fold(0.0f32, f32::max);
    let wsum = cfg.w_vector + cfg.w_lexical + cfg.w_entity + cfg.w_temporal;
    let mut out: Vec<(f32, NodeId)> = ids
        .iter()
        .zip(&lex)
        .map(|(&o, &l)| {
            let on = s.get(o).unwrap();
            let v = dot(o).max(0.0);
            let l = if max_lex > 0.0 { l / max_lex } else { 0.0 };
            let shared = on
                .entities
                .iter()
                .filter(|e| node.entities.contains(e))
                .count();
            let e = if node.entities.is_empty() {
                0.0
            } else {
                shared as f32 / node.entities.len() as f32
            };
            let t = match (node.timestamp, on.timestamp) {
                (Some(a), Some(b)) => {
                    (1.0 / (1.0 + a.abs_diff(b) as f64 / cfg.temporal_scale_s)) as f32
                }
                _ => 0.0,
            };
            (
                (cfg.w_vector * v + cfg.w_lexical * l + cfg.w_entity * e + cfg.w_temporal * t)
                    / wsum,
                o,
            )
        })
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    out.truncate(cfg.k);
    out.into_iter()
        .map(|(score, id)| CandidateMatch {
            id,
            score,
            signals: Default::default(),
        })
        .collect()
}

const WORDS: [&str; 10] = [
    "alpha", "beta", "gamma", "delta", "paint", "paris", "trip", "camping", "dog", "music",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// save -> load -> save gives the same bytes, whatever the embeddings'
    /// scale (normalising a stored unit vector again used to move its last bit).
    #[test]
    fn snapshot_bytes_are_a_fixed_point(
        seeds in prop::collection::vec((any::<u64>(), 1e-3f32..1e3), 1..20),
    ) {
        let mut s = store();
        for (i, (seed, scale)) in seeds.iter().enumerate() {
            let v: Vec<f32> = emb(*seed).iter().map(|x| x * scale).collect();
            if v.iter().all(|x| *x == 0.0) {
                continue;
            }
            s.add_node(NewNode::new(format!("trip camping note {i}"), v)).unwrap();
        }
        let once = s.to_snapshot_bytes().unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&once).unwrap();
        prop_assert_eq!(loaded.to_snapshot_bytes().unwrap(), once);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn candidates_match_reference(
        docs in prop::collection::vec(
            (prop::collection::vec(0usize..10, 1..6), prop::option::of(0i64..50), prop::collection::vec(0usize..5, 0..3), any::<u64>()),
            1..60),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
        pool in 1usize..12,
        k in 1usize..12,
    ) {
        let mut cfg = StoreConfig::new(DIM);
        cfg.candidates.pool = pool;
        cfg.candidates.k = k;
        cfg.candidates.temporal_scale_s = 5.0;
        let mut s = MemoryStore::new(cfg).unwrap();
        for (words, ts, ents, seed) in &docs {
            let text: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
            let mut n = NewNode::new(text.join(" "), emb(*seed));
            n.timestamp = ts.map(|t| t * 3600);
            n.entities = ents.iter().map(|e| format!("ent{e}")).collect();
            s.add_node(n).unwrap();
        }
        for r in &removals {
            let live: Vec<NodeId> = s.graph().nodes().map(|n| n.id).collect();
            if live.len() > 1 {
                s.remove_node(live[r.index(live.len())]).unwrap();
            }
        }
        let live: Vec<NodeId> = s.graph().nodes().map(|n| n.id).collect();
        for &id in &live {
            let got = s.candidates_for(id, None).unwrap();
            let want = reference_candidates(&s, id);
            prop_assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                prop_assert!(g.id < id);
                prop_assert!((g.score - w.score).abs() < 1e-5, "scores {} vs {}", g.score, w.score);
            }
            let got_ids: Vec<NodeId> = got.iter().map(|c| c.id).collect();
            let want_ids: Vec<NodeId> = want.iter().map(|c| c.id).collect();
            prop_assert_eq!(got_ids, want_ids);
        }
    }
}

/// A caller's k is clamped to what the indexes hold: usearch sizes its result
/// buffers by k, so an unclamped usize::MAX would abort the process.
#[test]
fn searches_with_huge_k_return_what_exists() {
    let mut config = StoreConfig::new(DIM);
    config.vector.exact_threshold = 0; // answer through the HNSW graph
    let mut s = MemoryStore::new(config).unwrap();
    for i in 0..5u64 {
        s.add_node(NewNode::new(format!("node {i} text"), emb(i)))
            .unwrap();
    }
    assert!(s.vectors().uses_hnsw());
    for k in [5, 6, 1 << 40, usize::MAX] {
        assert_eq!(s.search_vector(&emb(0), k).unwrap().len(), 5);
        assert_eq!(s.search_lexical("text", k).len(), 5);
        assert_eq!(s.search_passages(&emb(0), k).unwrap().len(), 5);
    }
}
