//! `MemoryStore::add_linked` against the write path spelled out one call at
//! a time: add a node, set its derived facts, note its focus neighbourhood,
//! link it in time, find its candidates and link the ones that share an
//! entity; the rule edges after the last node. Same store (snapshot bytes)
//! and the same columns; bad input changes nothing.

use jevmem_core::derived::DerivedFacts;
use jevmem_core::ops::NewNode;
use jevmem_core::pair_signals::pair_signals;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::writing::{LinkPlan, PairColumns};
use jevmem_core::{Edge, EdgeOrigin, NodeId, TemporalLabel, View};
use proptest::prelude::*;

const DIM: usize = 4;
const WORDS: [&str; 8] = [
    "coffee", "oat", "milk", "paris", "moved", "job", "dog", "rain",
];
const PEOPLE: [&str; 3] = ["mel", "melanie", "caroline"];

#[derive(Clone, Debug)]
struct Row {
    words: Vec<usize>,
    vector: [i8; DIM],
    timestamp: Option<i64>,
    entity: Option<usize>,
    speaker: Option<usize>,
    session: Option<u8>,
    share: u8,
}

fn row() -> impl Strategy<Value = Row> {
    (
        prop::collection::vec(0..WORDS.len(), 1..6),
        prop::array::uniform4(-3i8..4),
        prop::option::of(0i64..6),
        prop::option::of(0..PEOPLE.len()),
        prop::option::of(0..PEOPLE.len()),
        prop::option::of(0u8..2),
        0u8..=4,
    )
        .prop_map(
            |(words, vector, timestamp, entity, speaker, session, share)| Row {
                words,
                vector,
                timestamp,
                entity,
                speaker,
                session,
                share,
            },
        )
}

fn new_node(r: &Row) -> NewNode {
    let text: Vec<&str> = r.words.iter().map(|&w| WORDS[w]).collect();
    let mut v: Vec<f32> = r.vector.iter().map(|&x| f32::from(x)).collect();
    v[0] += 0.5; // never the zero vector
    let mut n = NewNode::new(text.join(" "), v);
    n.timestamp = r.timestamp.map(|t| 1_000 + 3_600 * t);
    n.entities = r
        .entity
        .map(|e| PEOPLE[e].to_string())
        .into_iter()
        .collect();
    if let Some(s) = r.speaker {
        n.provenance
            .push(("speaker".into(), PEOPLE[s].to_uppercase()));
    }
    if let Some(s) = r.session {
        n.provenance.push(("session".into(), s.to_string()));
    }
    n
}

fn facts(r: &Row) -> DerivedFacts {
    DerivedFacts {
        id: 0,
        question_share: f64::from(r.share) / 4.0,
        time_refs: Vec::new(),
    }
}

fn store() -> MemoryStore {
    let mut config = StoreConfig::new(DIM);
    config.candidates.k = 3;
    MemoryStore::new(config).unwrap()
}

fn push(cols: &mut PairColumns, s: &MemoryStore, row: usize, id: NodeId, k: Option<usize>) {
    for c in s.candidates_for(id, k).unwrap() {
        let other = s.get(c.id).unwrap();
        let p = pair_signals(s.get(id).unwrap(), other);
        cols.row.push(row as u32);
        cols.candidate.push(c.id);
        cols.vector.push(c.signals.vector);
        cols.lexical.push(c.signals.lexical);
        cols.entity.push(c.signals.entity);
        cols.temporal.push(c.signals.temporal);
        cols.same_session.push(p.same_session);
        cols.same_speaker.push(p.same_speaker);
        cols.older.push(p.older);
        cols.alias.push(p.alias);
        cols.push_text(c.id, &other.content);
        cols.speaker.push(
            other
                .provenance
                .iter()
                .find(|(k, _)| k == "speaker")
                .map(|(_, v)| v.clone()),
        );
        cols.timestamp.push(other.timestamp);
    }
}

fn rule(src: NodeId, dst: NodeId, view: View, weight: f32, label: Option<TemporalLabel>) -> Edge {
    Edge {
        src,
        dst,
        view,
        weight,
        origin: EdgeOrigin::Rule,
        temporal: label,
    }
}

/// The write path one call at a time.
fn reference(
    s: &mut MemoryStore,
    rows: &[Row],
    focus: &[bool],
    focus_k: usize,
) -> (Vec<NodeId>, PairColumns, PairColumns) {
    let (mut ids, mut pairs, mut neighbours) =
        (Vec::new(), PairColumns::default(), PairColumns::default());
    let mut edges = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let id = s.add_node(new_node(r)).unwrap();
        ids.push(id);
        s.set_derived(7, vec![DerivedFacts { id, ..facts(r) }])
            .unwrap();
        if focus[i] {
            push(&mut neighbours, s, i, id, Some(focus_k));
        }
        if let Some((before, after)) = s.time_neighbours_seen(id) {
            let ts = s.get(id).unwrap().timestamp;
            let label = |t| {
                Some(if Some(t) == ts {
                    TemporalLabel::SameTime
                } else {
                    TemporalLabel::Before
                })
            };
            if let Some((p, t)) = before {
                edges.push(rule(p, id, View::Temporal, 1.0, label(t)));
            }
            if let Some((n, t)) = after {
                edges.push(rule(id, n, View::Temporal, 1.0, label(t)));
            }
        }
        let at = pairs.len();
        push(&mut pairs, s, i, id, None);
        for k in at..pairs.len() {
            if pairs.entity[k] > 0.0 {
                edges.push(rule(
                    pairs.candidate[k],
                    id,
                    View::Entity,
                    pairs.entity[k],
                    None,
                ));
            }
        }
    }
    if !edges.is_empty() {
        s.upsert_edges(edges).unwrap();
    }
    (ids, pairs, neighbours)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn add_linked_is_the_write_path_one_call_at_a_time(
        before in prop::collection::vec(row(), 0..6),
        batch in prop::collection::vec(row(), 0..10),
        focus_every in 1usize..4,
        focus_k in 1usize..4,
    ) {
        let mut a = store();
        for r in &before {
            a.add_node(new_node(r)).unwrap();
        }
        let mut b = MemoryStore::from_snapshot_bytes(&a.to_snapshot_bytes().unwrap()).unwrap();
        let focus: Vec<bool> = (0..batch.len()).map(|i| (i + 1) % focus_every == 0).collect();
        let got = a
            .add_linked(
                batch.iter().map(new_node).collect(),
                LinkPlan {
                    derived_version: 7,
                    derived: batch.iter().map(facts).collect(),
                    focus: focus.clone(),
                    focus_k,
                },
            )
            .unwrap();
        let (ids, pairs, neighbours) = reference(&mut b, &batch, &focus, focus_k);
        prop_assert_eq!(&got.ids, &ids);
        prop_assert_eq!(&got.pairs, &pairs);
        prop_assert_eq!(&got.neighbours, &neighbours);
        // each pair's text is its candidate's, every distinct text sent once
        for cols in [&got.pairs, &got.neighbours] {
            for k in 0..cols.len() {
                prop_assert_eq!(cols.text(k), a.get(cols.candidate[k]).unwrap().content.as_str());
            }
            let distinct: std::collections::BTreeSet<_> = cols.candidate.iter().collect();
            prop_assert_eq!(cols.texts.len(), distinct.len());
        }
        prop_assert_eq!(a.to_snapshot_bytes().unwrap(), b.to_snapshot_bytes().unwrap());
    }

    #[test]
    fn a_bad_row_or_fact_changes_nothing(
        batch in prop::collection::vec(row(), 1..6),
        bad in 0usize..6,
        which in 0u8..3,
    ) {
        let mut s = store();
        s.add_node(new_node(&batch[0])).unwrap();
        let before = s.to_snapshot_bytes().unwrap();
        let bad = bad % batch.len();
        let mut nodes: Vec<NewNode> = batch.iter().map(new_node).collect();
        let mut derived: Vec<DerivedFacts> = batch.iter().map(facts).collect();
        let mut focus = vec![false; batch.len()];
        match which {
            0 => nodes[bad].embedding.push(1.0),     // wrong dimension
            1 => derived[bad].question_share = 1.5, // outside [0, 1]
            _ => focus.push(true),                  // one flag too many
        }
        let plan = LinkPlan { derived_version: 1, derived, focus, focus_k: 2 };
        prop_assert!(s.add_linked(nodes, plan).is_err());
        prop_assert_eq!(s.to_snapshot_bytes().unwrap(), before);
    }
}
