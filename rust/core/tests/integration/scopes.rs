//! Scopes, metadata, filters and idempotency keys at the store level: every
//! scoped read stays inside its allowed set (searches, passages, anchors,
//! write candidates, the traversal), selection and paging match a naive
//! model, keys make repeated writes no-ops, and bad attributes change nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use jevmem_core::filter::{Field, Filter, Selection};
use jevmem_core::ops::NewNode;
use jevmem_core::store::{MemoryStore, Restricted, StoreConfig};
use jevmem_core::traversal::{
    Assessment, CandidateScores, GraphAccess, Phase, Routing, Traversal, TraversalConfig,
};
use jevmem_core::{Edge, EdgeOrigin, MetaValue, NodeId, View};
use proptest::prelude::*;

const DIM: usize = 6;

fn emb(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

const WORDS: [&str; 6] = ["tea", "coffee", "cello", "paris", "train", "garden"];

/// One generated node: (user, session, topic, priority, words, seed).
type Spec = (
    Option<u8>,
    Option<u8>,
    Option<u8>,
    Option<i64>,
    Vec<u8>,
    u64,
);

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::option::of(0u8..3),
        prop::option::of(0u8..2),
        prop::option::of(0u8..2),
        prop::option::of(-1i64..3),
        prop::collection::vec(0u8..6, 1..5),
        any::<u64>(),
    )
}

fn new_node(i: usize, s: &Spec) -> NewNode {
    let (user, session, topic, priority, words, seed) = s;
    let text: Vec<&str> = words.iter().map(|&w| WORDS[w as usize]).collect();
    let mut n = NewNode::new(text.join(" "), emb(*seed));
    n.timestamp = Some(1_700_000_000 + i as i64 * 60);
    if let Some(u) = user {
        n.scope.push(("user".into(), format!("u{u}")));
    }
    if let Some(se) = session {
        n.scope.push(("session".into(), format!("s{se}")));
    }
    if let Some(t) = topic {
        n.metadata
            .push(("topic".into(), MetaValue::Str(format!("t{t}"))));
    }
    if let Some(p) = priority {
        n.metadata.push(("priority".into(), MetaValue::Int(*p)));
    }
    n
}

/// The selection: an optional user and session, and an optional topic equality.
fn selection(user: Option<u8>, session: Option<u8>, topic: Option<u8>) -> Selection {
    let mut scope = Vec::new();
    if let Some(u) = user {
        scope.push(("user".to_string(), format!("u{u}")));
    }
    if let Some(s) = session {
        scope.push(("session".to_string(), format!("s{s}")));
    }
    let filter =
        topic.map(|t| Filter::Eq(Field::Meta("topic".into()), MetaValue::Str(format!("t{t}"))));
    Selection::new(scope, filter).unwrap()
}

/// Naive reading of `selection` on the generated specs.
fn naive_allows(s: &Spec, user: Option<u8>, session: Option<u8>, topic: Option<u8>) -> bool {
    user.is_none_or(|u| s.0 == Some(u))
        && session.is_none_or(|x| s.1 == Some(x))
        && topic.is_none_or(|t| s.2 == Some(t))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn scoped_reads_stay_inside(
        specs in prop::collection::vec(spec(), 1..40),
        edges in prop::collection::vec((0usize..40, 0usize..40, 0usize..4), 0..80),
        removed in prop::collection::vec(0usize..40, 0..4),
        sel in (prop::option::of(0u8..3), prop::option::of(0u8..2), prop::option::of(0u8..2)),
        query in (prop::collection::vec(0u8..6, 1..3), any::<u64>()),
        page in 1usize..7,
    ) {
        let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        for (i, s) in specs.iter().enumerate() {
            store.add_node(new_node(i, s)).unwrap();
        }
        let n = specs.len();
        for &(a, b, v) in &edges {
            let (a, b) = ((a % n) as NodeId, (b % n) as NodeId);
            if a != b {
                store.upsert_edge(Edge {
                    src: a,
                    dst: b,
                    view: View::ALL[v],
                    weight: 0.8,
                    origin: EdgeOrigin::Controller,
                    temporal: None,
                }).unwrap();
            }
        }
        let mut gone = BTreeSet::new();
        for &r in &removed {
            let id = (r % n) as NodeId;
            if gone.insert(id) {
                store.remove_node(id).unwrap();
            }
        }
        let (user, session, topic) = sel;
        let selection = selection(user, session, topic);
        let want: Vec<NodeId> = (0..n)
            .filter(|&i| !gone.contains(&(i as NodeId)) && naive_allows(&specs[i], user, session, topic))
            .map(|i| i as NodeId)
            .collect();
        prop_assert_eq!(store.matching_ids(&selection), want.clone());

        // paging covers every match exactly once, in id order
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let got = store.list(&selection, after, page);
            prop_assert!(got.len() <= page);
            if got.is_empty() {
                break;
            }
            after = got.last().copied();
            paged.extend(got);
        }
        prop_assert_eq!(&paged, &want);

        let allowed = store.select(&selection);
        prop_assert_eq!(allowed.is_none(), selection.is_everything());
        let Some(allowed) = allowed else { return Ok(()); };
        prop_assert_eq!(allowed.ids(), want.as_slice());
        let inside = |id: NodeId| allowed.contains(id);

        let words: Vec<&str> = query.0.iter().map(|&w| WORDS[w as usize]).collect();
        let text = words.join(" ");
        let qv = emb(query.1);
        for (id, _) in store.search_lexical_scoped(&text, 50, Some(&allowed)) {
            prop_assert!(inside(id), "lexical returned {}", id);
        }
        // exact vector search: rank all, keep allowed
        let mut reference: Vec<(NodeId, f32)> = store
            .search_vector(&qv, n)
            .unwrap()
            .into_iter()
            .filter(|&(id, _)| inside(id))
            .collect();
        reference.truncate(5);
        prop_assert_eq!(store.search_vector_scoped(&qv, 5, Some(&allowed)).unwrap(), reference);
        for hit in store.search_passages_scoped(&qv, 50, Some(&allowed)).unwrap() {
            prop_assert!(inside(hit.node));
        }
        for (id, _) in store.fused_anchors_scoped(Some(&text), Some(&qv), 50, 50, 60.0, Some(&allowed)).unwrap() {
            prop_assert!(inside(id), "anchor {}", id);
        }

        // a scoped view's similarities read together are its similarities
        // one by one: none outside the scope (nor for unknown ids)
        let view = Restricted { store: &store, allowed: &allowed };
        let unit = jevmem_core::vector::VectorIndex::normalize(&qv);
        let every: Vec<NodeId> = (0..n as NodeId + 2).chain((0..n as NodeId).rev()).collect();
        for access in [&view as &dyn GraphAccess, &store as &dyn GraphAccess] {
            let mut together = Vec::new();
            access.similarities(&unit, &every, &mut together);
            let alone: Vec<Option<f32>> = every.iter().map(|&id| access.similarity(&unit, id)).collect();
            prop_assert_eq!(
                together.iter().map(|x| x.map(f32::to_bits)).collect::<Vec<_>>(),
                alone.iter().map(|x| x.map(f32::to_bits)).collect::<Vec<_>>()
            );
        }
        for (&id, sim) in every.iter().zip({
            let mut v = Vec::new();
            view.similarities(&unit, &every, &mut v);
            v
        }) {
            prop_assert!(sim.is_none() || inside(id), "similarity outside the scope: {}", id);
        }

        // the traversal from allowed anchors never reaches another node
        let anchors: Vec<(NodeId, f32)> = want.iter().take(2).map(|&id| (id, 0.9)).collect();
        if !anchors.is_empty() {
            let config = TraversalConfig { theta_act: 0.0, ..TraversalConfig::default() };
            let routing = Routing { views: [1.0; 4], multi_hop: 1.0, recency: 0.0 };
            let mut t = Traversal::start(
                config, routing, None, None, &anchors, 0, Duration::ZERO, &view,
            ).unwrap();
            let mut rounds = 0;
            while !matches!(t.phase(), Phase::Done(_)) && rounds < 50 {
                rounds += 1;
                match t.phase() {
                    Phase::Assess => {
                        t.assess(Assessment { sufficiency: 0.0, usefulness: 1.0, missing: 1.0, contradiction: 0.0 }).unwrap();
                    }
                    Phase::Expand => {
                        for c in t.expand(&view).unwrap() {
                            prop_assert!(inside(c.node), "traversal reached {}", c.node);
                        }
                    }
                    Phase::Score => {
                        let rows = vec![
                            CandidateScores { relevance: 1.0, relation_usefulness: 1.0, novelty: 1.0, support: 1.0 };
                            t.candidates().len()
                        ];
                        t.score(&view, &rows).unwrap();
                    }
                    Phase::Done(_) => {}
                }
            }
            for e in t.evidence() {
                prop_assert!(inside(e.node));
            }
            // an anchor outside the allowed set is refused, not walked from
            if let Some(out) = (0..n as NodeId).find(|&id| !inside(id) && store.get(id).is_some()) {
                let config = TraversalConfig::default();
                prop_assert!(Traversal::start(
                    config, routing, None, None, &[(out, 0.5)], 0, Duration::ZERO, &view,
                ).is_err());
            }
        }
    }

    /// A scoped node's write candidates are nodes its scope's search sees.
    #[test]
    fn write_candidates_stay_in_scope(specs in prop::collection::vec(spec(), 2..30)) {
        let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        for (i, s) in specs.iter().enumerate() {
            store.add_node(new_node(i, s)).unwrap();
        }
        for (i, s) in specs.iter().enumerate() {
            let own = store.get(i as NodeId).unwrap().scope.clone();
            for c in store.candidates_for(i as NodeId, Some(30)).unwrap() {
                let other = store.get(c.id).unwrap();
                prop_assert!(c.id < i as NodeId);
                for (k, v) in &own {
                    prop_assert_eq!(other.scope_value(k), Some(v.as_str()),
                        "node {} ({:?}) got candidate {} ({:?})", i, s, c.id, other.scope);
                }
            }
        }
    }

    /// Keys: a batch with repeats stores each key once, a later write with a
    /// stored key is a no-op returning its id, and after a removal the key
    /// is free again.
    #[test]
    fn idempotency_keys(keys in prop::collection::vec(prop::option::of(0u8..4), 1..12)) {
        let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        let nodes: Vec<NewNode> = keys.iter().enumerate().map(|(i, k)| {
            let mut n = NewNode::new(format!("note {i}"), emb(i as u64));
            n.key = k.map(|k| format!("k{k}"));
            n
        }).collect();
        let ids = store.add_nodes(nodes.clone()).unwrap();
        let distinct: BTreeSet<u8> = keys.iter().flatten().copied().collect();
        let unkeyed = keys.iter().filter(|k| k.is_none()).count();
        prop_assert_eq!(store.len(), distinct.len() + unkeyed);
        for (i, k) in keys.iter().enumerate() {
            if let Some(k) = k {
                let first = keys.iter().position(|x| x == &Some(*k)).unwrap();
                prop_assert_eq!(ids[i], ids[first]);
                prop_assert_eq!(store.get(ids[i]).unwrap().content.clone(), format!("note {first}"));
                prop_assert_eq!(store.id_for_key(&[], &format!("k{k}")), Some(ids[first]));
            }
        }
        // the same batch again: only the unkeyed ones are new
        let before = store.len();
        let again = store.add_nodes(nodes).unwrap();
        prop_assert_eq!(store.len(), before + unkeyed);
        for (i, k) in keys.iter().enumerate() {
            if k.is_some() {
                prop_assert_eq!(again[i], ids[i]);
            }
        }
        if let Some(&k) = distinct.iter().next() {
            let key = format!("k{k}");
            let id = store.id_for_key(&[], &key).unwrap();
            store.remove_node(id).unwrap();
            prop_assert_eq!(store.id_for_key(&[], &key), None);
            let mut n = NewNode::new("after removal", emb(99));
            n.key = Some(key.clone());
            let fresh = store.add_node(n).unwrap();
            prop_assert!(fresh != id);
            prop_assert_eq!(store.id_for_key(&[], &key), Some(fresh));
        }
    }
}

#[test]
fn bad_attributes_change_nothing() {
    let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    store.add_node(NewNode::new("kept", emb(1))).unwrap();
    let before = store.to_snapshot_bytes().unwrap();
    let bad: Vec<(&str, NewNode)> = vec![
        ("scope key", {
            let mut n = NewNode::new("x", emb(2));
            n.scope = vec![("".into(), "u".into())];
            n
        }),
        ("given twice", {
            let mut n = NewNode::new("x", emb(2));
            n.scope = vec![("user".into(), "a".into()), ("user".into(), "b".into())];
            n
        }),
        ("finite", {
            let mut n = NewNode::new("x", emb(2));
            n.metadata = vec![("p".into(), MetaValue::Float(f64::NAN))];
            n
        }),
        ("NUL", {
            let mut n = NewNode::new("x", emb(2));
            n.metadata = vec![("p".into(), MetaValue::Str("a\0b".into()))];
            n
        }),
        ("idempotency key", {
            let mut n = NewNode::new("x", emb(2));
            n.key = Some(String::new());
            n
        }),
    ];
    for (needle, node) in bad {
        let err = store.add_node(node.clone()).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} should name {needle}");
        // in a batch, after a good node: all or nothing
        let good = NewNode::new("good", emb(3));
        assert!(store.add_nodes(vec![good, node]).is_err());
        assert_eq!(store.to_snapshot_bytes().unwrap(), before);
    }
    // a repeat of a stored key must still be well formed
    let mut keyed = NewNode::new("keyed", emb(4));
    keyed.key = Some("k".into());
    store.add_node(keyed.clone()).unwrap();
    let snapshot = store.to_snapshot_bytes().unwrap();
    keyed.metadata = vec![("p".into(), MetaValue::Float(f64::INFINITY))];
    assert!(store.add_node(keyed).is_err());
    assert_eq!(store.to_snapshot_bytes().unwrap(), snapshot);
}

#[test]
fn keys_live_in_their_scope() {
    let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    let scoped = |user: &str, text: &str| {
        let mut n = NewNode::new(text, emb(7));
        n.scope = vec![("user".into(), user.into()), ("app".into(), "a".into())];
        n.key = Some("msg-1".into());
        n
    };
    let a = store.add_node(scoped("u1", "from u1")).unwrap();
    // the same key in another scope is another write: it learns nothing of u1's
    let b = store.add_node(scoped("u2", "from u2")).unwrap();
    assert_ne!(a, b);
    assert_eq!(store.add_node(scoped("u1", "retry")).unwrap(), a);
    let pairs = |u: &str| {
        vec![
            ("app".to_string(), "a".to_string()),
            ("user".to_string(), u.to_string()),
        ]
    };
    assert_eq!(store.id_for_key(&pairs("u1"), "msg-1"), Some(a));
    assert_eq!(store.id_for_key(&pairs("u2"), "msg-1"), Some(b));
    assert_eq!(store.id_for_key(&[], "msg-1"), None);
    let ids = store
        .add_nodes(vec![
            scoped("u3", "x"),
            scoped("u3", "y"),
            scoped("u1", "z"),
        ])
        .unwrap();
    assert_eq!((ids[0], ids[1], ids[2]), (ids[0], ids[0], a));
    assert_eq!(store.len(), 3);
    let back = MemoryStore::from_snapshot_bytes(&store.to_snapshot_bytes().unwrap()).unwrap();
    assert_eq!(back.id_for_key(&pairs("u2"), "msg-1"), Some(b));
}

#[test]
fn a_logged_add_with_a_taken_key_is_refused() {
    // `apply` is what a log replays: an AddNode whose key is taken cannot
    // have been logged by `add_node`, so replaying one is an error.
    use jevmem_core::ops::Op;
    let mut store = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    let mut n = NewNode::new("once", emb(1));
    n.key = Some("k".into());
    store.add_node(n.clone()).unwrap();
    let id = store.next_id();
    assert!(store.apply(Op::AddNode { id, node: n }).is_err());
    assert_eq!(store.len(), 1);
}
