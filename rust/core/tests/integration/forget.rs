//! `MemoryStore::forget_nodes`: removal of many nodes, all or nothing on bad
//! input, that keeps the survivors' supersedes chains (a survivor replaced
//! through forgotten nodes stays replaced), checked against a plain model.

use std::collections::{BTreeMap, BTreeSet};

use jevmem_core::facts::Supersedes;
use jevmem_core::ops::NewNode;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{EdgeOrigin, Error, NodeId, Timestamp, View};
use proptest::prelude::*;

const DIM: usize = 4;

fn store_with(stamps: &[Option<Timestamp>]) -> MemoryStore {
    let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    for (i, ts) in stamps.iter().enumerate() {
        let mut n = NewNode::new(
            format!("statement canary{i}"),
            vec![1.0, i as f32, 0.5, -1.0],
        );
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
fn forgetting_the_middle_of_a_chain_keeps_the_oldest_replaced() {
    // oat (t=100) <- soy (t=200) <- almond (t=300)
    let mut s = store_with(&[Some(100), Some(200), Some(300)]);
    s.add_supersedes_many(vec![link(1, 0, 0.8), link(2, 1, 0.9)])
        .unwrap();
    let bridges = s.forget_nodes(&[1]).unwrap();
    assert_eq!(bridges.len(), 1);
    assert_eq!((bridges[0].new, bridges[0].old), (2, 0));
    assert_eq!(bridges[0].weight, 0.8); // the path's weakest link
    assert_eq!(bridges[0].origin, EdgeOrigin::Rule);
    assert_eq!(s.validity(0).unwrap(), (Some(100), Some(300)));
    assert_eq!(s.history(2).unwrap(), vec![2, 0]);
    assert!(s.graph().edge(2, 0, View::Temporal).is_some());
    assert!(s.get(1).is_none());
    // the newest forgotten: what it replaced is current again
    let mut s = store_with(&[Some(100), Some(200)]);
    s.add_supersedes(link(1, 0, 0.8)).unwrap();
    assert!(s.forget_nodes(&[1]).unwrap().is_empty());
    assert_eq!(s.validity(0).unwrap(), (Some(100), None));
    assert!(s.facts().is_empty());
    // the oldest forgotten: the newer one just has nothing behind it
    let mut s = store_with(&[Some(100), Some(200)]);
    s.add_supersedes(link(1, 0, 0.8)).unwrap();
    s.set_valid_from(1, Some(150)).unwrap();
    s.forget_nodes(&[0]).unwrap();
    assert_eq!(s.validity(1).unwrap(), (Some(150), None));
    assert_eq!(s.history(1).unwrap(), vec![1]);
}

#[test]
fn bad_input_changes_nothing() {
    let mut s = store_with(&[Some(1), Some(2), Some(3)]);
    s.add_supersedes_many(vec![link(1, 0, 0.7), link(2, 1, 0.8)])
        .unwrap();
    let before = s.to_snapshot_bytes().unwrap();
    let ops = s.ops_applied();
    assert!(matches!(
        s.forget_nodes(&[1, 7]),
        Err(Error::NodeNotFound(7))
    ));
    let err = s.forget_nodes(&[1, 2, 1]).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(err.to_string().contains("twice"), "{err}");
    assert_eq!(s.to_snapshot_bytes().unwrap(), before);
    assert_eq!(s.ops_applied(), ops);
    // forgotten ids are unknown afterwards, a second forget of them fails
    s.forget_nodes(&[1]).unwrap();
    assert!(matches!(s.forget_nodes(&[1]), Err(Error::NodeNotFound(1))));
    assert!(s.forget_nodes(&[]).unwrap().is_empty());
}

// ---- random chains and forget sets against a plain model ----------------------

/// The strongest path's weakest link from `a` to `b` through nodes of `via`
/// only (at least one of them), by exhaustive search: the model of a bridge.
fn best_path_through(
    links: &BTreeMap<(NodeId, NodeId), f32>,
    via: &BTreeSet<NodeId>,
    a: NodeId,
    b: NodeId,
) -> Option<f32> {
    fn walk(
        links: &BTreeMap<(NodeId, NodeId), f32>,
        via: &BTreeSet<NodeId>,
        at: NodeId,
        b: NodeId,
        weakest: f32,
        depth: usize,
        best: &mut Option<f32>,
    ) {
        for (&(x, y), &w) in links {
            if x != at {
                continue;
            }
            let w = weakest.min(w);
            if y == b && depth > 0 {
                *best = Some(best.map_or(w, |o: f32| o.max(w)));
            } else if via.contains(&y) {
                walk(links, via, y, b, w, depth + 1, best);
            }
        }
    }
    let mut best = None;
    walk(links, via, a, b, f32::INFINITY, 0, &mut best);
    best
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn forget_follows_the_model(
        stamps in prop::collection::vec(prop::option::of(0i64..500), 2..10),
        raw_links in prop::collection::vec((0usize..10, 0usize..10, 0.0f32..=1.0), 0..24),
        forget in prop::collection::btree_set(0usize..10, 0..6),
        order_seed in any::<u64>(),
    ) {
        let n = stamps.len();
        let mut s = store_with(&stamps);
        // links in an order that keeps a DAG: new > old by id
        let mut links: BTreeMap<(NodeId, NodeId), f32> = BTreeMap::new();
        for (a, b, w) in raw_links {
            let (a, b) = (a % n, b % n);
            if a == b {
                continue;
            }
            let (new, old) = (a.max(b) as NodeId, a.min(b) as NodeId);
            s.add_supersedes(link(new, old, w)).unwrap();
            let e = links.entry((new, old)).or_insert(w);
            *e = e.max(w);
        }
        let mut gone: Vec<NodeId> = forget.iter().map(|&i| (i % n) as NodeId).collect();
        gone.sort_unstable();
        gone.dedup();
        // the order ids are given in does not matter
        let k = gone.len().max(1);
        gone.rotate_left((order_seed as usize) % k);
        let gone_set: BTreeSet<NodeId> = gone.iter().copied().collect();
        let live: Vec<NodeId> = (0..n as NodeId).filter(|i| !gone_set.contains(i)).collect();

        let mut want: BTreeMap<(NodeId, NodeId), f32> = BTreeMap::new();
        for &a in &live {
            for &b in &live {
                let direct = links.get(&(a, b)).copied();
                let through = best_path_through(&links, &gone_set, a, b);
                if let Some(w) = match (direct, through) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                } {
                    want.insert((a, b), w);
                }
            }
        }

        s.forget_nodes(&gone).unwrap();
        let got: BTreeMap<(NodeId, NodeId), f32> =
            s.facts().links().iter().map(|l| ((l.new, l.old), l.weight)).collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(s.len(), live.len());
        for &id in &gone {
            prop_assert!(s.get(id).is_none());
            prop_assert!(s.embedding(id).is_none());
            let canary = format!("canary{id}");
            prop_assert!(s.search_lexical(&canary, 10).is_empty());
        }
        for edge in s.graph().all_edges() {
            prop_assert!(!gone_set.contains(&edge.src) && !gone_set.contains(&edge.dst));
        }
        for l in s.facts().links() {
            // every link keeps its temporal edge, bridges included
            prop_assert!(s.graph().edge(l.new, l.old, View::Temporal).is_some());
            if !links.contains_key(&(l.new, l.old)) {
                prop_assert_eq!(l.origin, EdgeOrigin::Rule);
            }
        }
        for &id in &live {
            let (from, to) = s.validity(id).unwrap();
            if let (Some(f), Some(t)) = (from, to) {
                prop_assert!(f <= t);
            }
        }
        // a snapshot holds the same and none of the forgotten text
        let bytes = s.to_snapshot_bytes().unwrap();
        for &id in &gone {
            let canary = format!("canary{id}");
            prop_assert!(!bytes.windows(canary.len()).any(|w| w == canary.as_bytes()));
        }
        let t = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
        prop_assert_eq!(t.facts().links(), s.facts().links());
    }
}
