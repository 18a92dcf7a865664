//! `style`: each node's length and its speaker's habits relative to the
//! memory, checked against a model that sums every counted node from
//! scratch in id order, a speaker's habits over its turns (runs of one
//! speaker's consecutive counted nodes in one session), through shares set
//! in any batches, removals and scopes.

use std::collections::BTreeMap;

use jevmem_core::derived::DerivedFacts;
use jevmem_core::filter::Allowed;
use jevmem_core::ops::NewNode;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::style::logistic;
use jevmem_core::NodeId;
use proptest::prelude::*;

const DIM: usize = 4;

#[derive(Clone, Debug)]
struct Turn {
    text: String,
    speaker: Option<&'static str>,
    /// The session its provenance names (none: every such node is in one
    /// episode, having no timestamp either).
    session: Option<&'static str>,
    /// None: its question share is never recorded (a node written past the
    /// plane's indexing, like a summary).
    share: Option<f64>,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop::sample::select(vec![
            "ok",
            "a longer turn with a few words in it",
            "Ünïcödé çhârs count once each",
            "a turn that runs on and on, well past what most of the others say, \
             with clause after clause",
            "?",
        ]),
        0usize..4,
        prop::option::of(prop::sample::select(vec![
            "Ana", "ana", "ÁNA", "Ben", "BEN", "Cleo", "",
        ])),
        prop::option::of(prop::sample::select(vec!["1", "2"])),
        prop::option::weighted(0.85, prop::sample::select(vec![0.0, 0.25, 0.5, 0.9, 1.0])),
    )
        .prop_map(|(base, repeat, speaker, session, share)| Turn {
            text: base.repeat(repeat + 1),
            speaker,
            session,
            share,
        })
}

fn lower_speaker(t: &Turn) -> Option<String> {
    t.speaker.filter(|s| !s.is_empty()).map(str::to_lowercase)
}

/// The model's style of node `id` over the counted nodes of `live` that
/// `allowed` lets through (`live`: id -> turn, ascending).
fn model_style(
    live: &BTreeMap<NodeId, Turn>,
    id: NodeId,
    allowed: Option<&[NodeId]>,
    speaker_of: Option<String>,
) -> [f64; 3] {
    let counted: Vec<(NodeId, &Turn, f64)> = live
        .iter()
        .filter(|(i, _)| allowed.is_none_or(|a| a.contains(i)))
        .filter_map(|(&i, t)| t.share.map(|s| (i, t, s)))
        .collect();
    if counted.is_empty() {
        return [0.5, 0.0, 0.5];
    }
    let mut total = 0.0;
    for (_, t, _) in &counted {
        total += (t.text.chars().count() as f64).ln_1p();
    }
    let mean = total / counted.len() as f64;
    // a counted node's own length counts even outside the scope
    let own = live
        .get(&id)
        .filter(|t| t.share.is_some())
        .map(|t| (t.text.chars().count() as f64).ln_1p());
    let length = logistic(own.unwrap_or(mean) - mean);
    // turns: (speaker, session, chars, summed share, nodes)
    type ModelTurn<'a> = (Option<String>, Option<&'a str>, f64, f64, f64);
    let mut turns: Vec<ModelTurn> = Vec::new();
    for (_, t, s) in &counted {
        let chars = t.text.chars().count() as f64;
        let speaker = lower_speaker(t);
        match turns.last_mut() {
            Some(last) if speaker.is_some() && last.0 == speaker && last.1 == t.session => {
                last.2 += chars;
                last.3 += s;
                last.4 += 1.0;
            }
            _ => turns.push((speaker, t.session, chars, *s, 1.0)),
        }
    }
    let mut turn_total = 0.0;
    for turn in &turns {
        turn_total += turn.2.ln_1p();
    }
    let turn_mean = turn_total / turns.len() as f64;
    let (mut n, mut asks, mut len) = (0.0, 0.0, 0.0);
    if let Some(spk) = &speaker_of {
        for turn in turns.iter().filter(|t| t.0.as_ref() == Some(spk)) {
            n += 1.0;
            asks += turn.3 / turn.4;
            len += turn.2.ln_1p();
        }
    }
    if n == 0.0 {
        [length, 0.0, 0.5]
    } else {
        [length, asks / n, logistic(len / n - turn_mean)]
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// Add this many turns, then record their shares in one call.
    Add(Vec<Turn>),
    /// Forget the live nodes at these positions (mod the live count).
    Forget(Vec<usize>),
    /// Remove one live node with `remove_node`.
    Remove(usize),
    /// Record this share for the live nodes at these positions (counted or
    /// not yet), through `set_derived`, in descending id order: the sums must
    /// still come out as summed in id order.
    Derive(Vec<usize>, f64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop::collection::vec(turn(), 1..6).prop_map(Step::Add),
        1 => prop::collection::vec(0usize..64, 1..4).prop_map(Step::Forget),
        1 => (0usize..64).prop_map(Step::Remove),
        1 => (
            prop::collection::vec(0usize..64, 1..5),
            prop::sample::select(vec![0.0, 0.3, 1.0]),
        )
            .prop_map(|(p, share)| Step::Derive(p, share)),
    ]
}

fn pick(live: &BTreeMap<NodeId, Turn>, positions: &[usize]) -> Vec<NodeId> {
    let ids: Vec<NodeId> = live.keys().copied().collect();
    let mut out: Vec<NodeId> = positions.iter().map(|p| ids[p % ids.len()]).collect();
    out.sort_unstable();
    out.dedup();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn styles_match_sums_from_scratch(
        steps in prop::collection::vec(step(), 1..10),
        scope_bits in prop::collection::vec(any::<bool>(), 64),
    ) {
        let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        let mut live: BTreeMap<NodeId, Turn> = BTreeMap::new();
        for step in steps {
            match step {
                Step::Add(turns) => {
                    let mut shares = Vec::new();
                    for t in turns {
                        let mut n = NewNode::new(t.text.clone(), vec![1.0, 0.5, 0.25, -1.0]);
                        if let Some(spk) = t.speaker {
                            n.provenance.push(("speaker".into(), spk.into()));
                        }
                        if let Some(session) = t.session {
                            n.provenance.push(("session".into(), session.into()));
                        }
                        let id = s.add_node(n).unwrap();
                        if let Some(share) = t.share {
                            shares.push((id, share));
                        }
                        live.insert(id, t);
                    }
                    s.set_question_shares(&shares).unwrap();
                }
                Step::Forget(pos) if !live.is_empty() => {
                    let ids = pick(&live, &pos);
                    s.forget_nodes(&ids).unwrap();
                    for id in ids {
                        live.remove(&id);
                    }
                }
                Step::Remove(pos) if !live.is_empty() => {
                    let id = pick(&live, &[pos])[0];
                    s.remove_node(id).unwrap();
                    live.remove(&id);
                }
                Step::Derive(pos, share) if !live.is_empty() => {
                    let ids = pick(&live, &pos);
                    let facts = ids
                        .iter()
                        .rev()
                        .map(|&id| DerivedFacts { id, question_share: share, time_refs: Vec::new() })
                        .collect();
                    s.set_derived(1, facts).unwrap();
                    for id in ids {
                        live.get_mut(&id).unwrap().share = Some(share);
                    }
                }
                _ => {}
            }
            let ids: Vec<NodeId> = live.keys().copied().collect();
            let got = s.styles(&ids, None);
            for (k, &id) in ids.iter().enumerate() {
                let want = model_style(&live, id, None, lower_speaker(&live[&id]));
                prop_assert_eq!(got[k], want, "node {}", id);
            }
            let within: Vec<NodeId> = ids
                .iter()
                .copied()
                .filter(|&i| scope_bits[i as usize % 64])
                .collect();
            let basis = s.style_basis(&Allowed::from_sorted(within.clone()));
            let got = s.styles(&ids, Some(&basis));
            for (k, &id) in ids.iter().enumerate() {
                let want = model_style(&live, id, Some(&within), lower_speaker(&live[&id]));
                prop_assert_eq!(got[k], want, "node {} within the scope", id);
            }
            let mut speakers: Vec<String> = live
                .values()
                .filter(|t| t.share.is_some())
                .filter_map(lower_speaker)
                .collect();
            speakers.sort_unstable();
            speakers.dedup();
            prop_assert_eq!(s.speakers(), speakers);
        }
    }
}

#[test]
fn a_memory_without_counted_nodes_reads_typical() {
    let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    let id = s
        .add_node(NewNode::new("hello", vec![1.0, 0.0, 0.0, 0.0]))
        .unwrap();
    assert_eq!(s.styles(&[id, 99], None), vec![[0.5, 0.0, 0.5]; 2]);
    s.set_question_shares(&[(id, 1.0)]).unwrap();
    // one node: exactly the mean; no speaker
    assert_eq!(s.styles(&[id], None), vec![[0.5, 0.0, 0.5]]);
    // an id the store lacks reads as typical
    assert_eq!(s.styles(&[99], None), vec![[0.5, 0.0, 0.5]]);
}

#[test]
fn recording_a_share_again_rebuilds_its_speaker() {
    let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    let mut ids = Vec::new();
    for text in ["why?", "because the rain came early this year"] {
        let mut n = NewNode::new(text, vec![1.0, 0.0, 0.0, 0.0]);
        n.provenance.push(("speaker".into(), "Ana".into()));
        ids.push(s.add_node(n).unwrap());
    }
    s.set_question_shares(&[(ids[0], 1.0), (ids[1], 0.0)])
        .unwrap();
    assert_eq!(s.styles(&[ids[0]], None)[0][1], 0.5);
    s.set_question_shares(&[(ids[1], 1.0)]).unwrap();
    assert_eq!(s.styles(&[ids[0]], None)[0][1], 1.0);
}

/// A memory that stores each turn as a burst of short messages reads its
/// speakers as one that stores the turns whole: the same question share per
/// turn and the same length against the memory's mean turn, to the bit;
/// a new session starts a new turn.
#[test]
fn a_burst_of_messages_reads_as_its_turn() {
    fn store(nodes: &[(&str, &str, &str, f64)]) -> (MemoryStore, Vec<NodeId>) {
        let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        let mut ids = Vec::new();
        for &(speaker, session, text, share) in nodes {
            let mut n = NewNode::new(text, vec![1.0, 0.0, 0.0, 0.0]);
            n.provenance.push(("speaker".into(), speaker.into()));
            n.provenance.push(("session".into(), session.into()));
            let id = s.add_node(n).unwrap();
            s.set_question_shares(&[(id, share)]).unwrap();
            ids.push(id);
        }
        (s, ids)
    }
    let (whole, w) = store(&[
        ("user", "1", "I moved the jobs to Dagster. How do I backfill?", 0.5),
        ("assistant", "1", "Use a partitioned asset and launch a backfill from the UI; it runs each partition once.", 0.0),
        ("user", "2", "Thanks!", 0.0),
    ]);
    let (burst, b) = store(&[
        ("user", "1", "I moved the jobs to Dagster.", 0.0),
        ("user", "1", " How do I backfill?", 1.0),
        (
            "assistant",
            "1",
            "Use a partitioned asset and launch a backfill from the UI;",
            0.0,
        ),
        ("assistant", "1", " it runs each partition once.", 0.0),
        ("user", "2", "Thanks!", 0.0),
    ]);
    let speaker_part = |s: &MemoryStore, id: NodeId| {
        let [_, asks, length] = s.styles(&[id], None)[0];
        [asks.to_bits(), length.to_bits()]
    };
    assert_eq!(speaker_part(&whole, w[0]), speaker_part(&burst, b[1]));
    assert_eq!(speaker_part(&whole, w[1]), speaker_part(&burst, b[2]));
    // the user's two turns: one asks half, one not at all
    assert_eq!(whole.styles(&[w[0]], None)[0][1], 0.25);
    // the user is the shorter speaker either way
    assert!(burst.styles(&[b[0]], None)[0][2] < 0.5);
    assert!(burst.styles(&[b[2]], None)[0][2] > 0.5);
}
