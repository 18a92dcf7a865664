//! `context`: a node's time-order neighbours, the reply link and the
//! context matches, checked against a plain model (a sorted list indexed by
//! position, as the Python read path computed them before they moved here).

use std::collections::HashMap;

use jevmem_core::context::{self, ContextConfig};
use jevmem_core::filter::Allowed;
use jevmem_core::hashing::ShortKeyMap;
use jevmem_core::ops::NewNode;
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{NodeId, Timestamp};
use proptest::prelude::*;

const DIM: usize = 4;
const DAY: Timestamp = 86_400;

#[derive(Clone, Debug)]
struct Turn {
    ts: Option<Timestamp>,
    session: Option<u8>,
    /// The session given as the node's scope, not its provenance.
    in_scope: bool,
    speaker: Option<&'static str>,
    share: f64,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        // half of the times within two hours of a midnight: chats that run
        // past one, and ones that stop short of it
        prop::option::weighted(
            0.9,
            prop_oneof![
                -2 * DAY..4 * DAY,
                (-2i64..4, -7_200i64..7_200).prop_map(|(d, s)| d * DAY + s),
            ],
        ),
        prop::option::of(0u8..3),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            "Ana", "ana", "Ben", "BEN", "Cleo",
        ])),
        prop::sample::select(vec![0.0, 0.25, 0.5, 1.0]),
    )
        .prop_map(|(ts, session, in_scope, speaker, share)| Turn {
            ts,
            session,
            in_scope,
            speaker,
            share,
        })
}

fn store_of(turns: &[Turn]) -> MemoryStore {
    let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    for (i, t) in turns.iter().enumerate() {
        let mut n = NewNode::new(format!("turn {i}"), vec![1.0, i as f32, 0.5, -1.0]);
        n.timestamp = t.ts;
        // a session in the scope is the node's session as one in its provenance is
        match (t.session, t.in_scope) {
            (Some(sess), true) => n.scope.push(("session".into(), sess.to_string())),
            (Some(sess), false) => n.provenance.push(("session".into(), sess.to_string())),
            (None, _) => {}
        }
        if let Some(spk) = t.speaker {
            n.provenance.push(("speaker".into(), spk.into()));
        }
        s.add_node(n).unwrap();
    }
    let shares: Vec<(NodeId, f64)> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| (i as NodeId, t.share))
        .collect();
    s.set_question_shares(&shares).unwrap();
    s
}

/// The model: episodes as strings, the timeline as a sorted list.
fn episode(t: &Turn) -> Option<String> {
    match (t.session, t.ts) {
        (Some(s), _) => Some(format!("session:{s}")),
        (None, Some(ts)) => Some(format!("day:{}", ts.div_euclid(DAY))),
        (None, None) => None,
    }
}

fn model_neighbours(
    turns: &[Turn],
    id: usize,
    allowed: Option<&[bool]>,
    cfg: &ContextConfig,
) -> Vec<(i8, usize, f64)> {
    // a node without a timestamp: the nodes without one, in write order,
    // when it has an episode (a session); else no context
    if turns[id].ts.is_none() && episode(&turns[id]).is_none() {
        return vec![];
    }
    let mut timeline: Vec<(Timestamp, usize)> = turns
        .iter()
        .enumerate()
        .filter(|(_, t)| t.ts.is_some() == turns[id].ts.is_some())
        .map(|(i, t)| (t.ts.unwrap_or(0), i))
        .collect();
    timeline.sort();
    let key = (turns[id].ts.unwrap_or(0), id);
    let pos = timeline.iter().position(|&e| e == key).unwrap();
    let ok = |i: usize| allowed.is_none_or(|a| a[i]);
    // a turn in a session: its session's turns only, however many of other
    // episodes lie between
    let own = turns[id].session.map(|_| episode(&turns[id]));
    let nearest = |side: &mut dyn Iterator<Item = usize>| -> Vec<usize> {
        side.filter(|&i| ok(i))
            .filter(|&i| own.as_ref().is_none_or(|e| episode(&turns[i]) == *e))
            .take(2)
            .collect()
    };
    let before = nearest(&mut timeline[..pos].iter().rev().map(|&(_, i)| i));
    let after = nearest(&mut timeline[pos + 1..].iter().map(|&(_, i)| i));
    // without sessions a chat runs on past midnight: a neighbour without a
    // session is context while every step to it is at most RUN_GAP_S
    let run_ts = |t: &Turn| if t.session.is_none() { t.ts } else { None };
    let runs_on = |side: &[usize], step: usize| {
        let mut last = run_ts(&turns[id]);
        side[..step]
            .iter()
            .all(|&o| match (last, run_ts(&turns[o])) {
                (Some(a), Some(b)) if (b - a).abs() <= context::RUN_GAP_S => {
                    last = Some(b);
                    true
                }
                _ => false,
            })
    };
    let mut out = vec![];
    for (step, w) in [(1usize, 1.0), (2, cfg.second_step_decay)] {
        for (sign, side) in [(-1i8, &before), (1, &after)] {
            if let Some(&o) = side.get(step - 1) {
                if episode(&turns[o]) == episode(&turns[id]) || runs_on(side, step) {
                    out.push((sign * step as i8, o, w));
                }
            }
        }
    }
    out
}

fn model_context(
    turns: &[Turn],
    id: usize,
    allowed: Option<&[bool]>,
    cfg: &ContextConfig,
) -> Vec<(usize, f64)> {
    model_neighbours(turns, id, allowed, cfg)
        .into_iter()
        .map(|(offset, o, w)| {
            if offset != -1 {
                return (o, w);
            }
            let spk = |t: &Turn| t.speaker.map(str::to_lowercase);
            let share = match (spk(&turns[o]), spk(&turns[id])) {
                (Some(a), Some(b)) if a == b => 0.0,
                _ => turns[o].share,
            };
            (o, w + cfg.reply_link * share)
        })
        .collect()
}

fn allowed_of(mask: &[bool]) -> Allowed {
    Allowed::from_sorted(
        mask.iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(i, _)| i as NodeId)
            .collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn context_equals_the_model(
        turns in prop::collection::vec(turn(), 1..24),
        mask in prop::collection::vec(any::<bool>(), 24),
        scoped in any::<bool>(),
        decay in prop::sample::select(vec![0.7, 0.5]),
        reply in prop::sample::select(vec![1.0, 0.5]),
    ) {
        let s = store_of(&turns);
        let cfg = ContextConfig { second_step_decay: decay, reply_link: reply };
        let mask = &mask[..turns.len()];
        let allowed = allowed_of(mask);
        let (a, m) = if scoped { (Some(&allowed), Some(mask)) } else { (None, None) };
        for id in 0..turns.len() {
            let got: Vec<(usize, f64)> = context::temporal_context(&s, id as NodeId, a, &cfg)
                .into_iter()
                .map(|(n, w)| (n as usize, w))
                .collect();
            prop_assert_eq!(got, model_context(&turns, id, m, &cfg));
            let near: Vec<(i8, usize, f64)> = context::neighbours(&s, id as NodeId, a, &cfg)
                .into_iter()
                .map(|n| (n.offset, n.node as usize, n.weight))
                .collect();
            prop_assert_eq!(near, model_neighbours(&turns, id, m, &cfg));
        }
    }

    #[test]
    fn context_matches_equal_the_model(
        turns in prop::collection::vec(turn(), 1..20),
        known in prop::collection::vec(prop::option::of(0.0f64..1.0), 20),
        own in prop::collection::vec(0.0f64..1.0, 20),
        asked in prop::collection::vec(0usize..20, 0..12),
        sequential in any::<bool>(),
    ) {
        let s = store_of(&turns);
        let cfg = ContextConfig::default();
        let n = turns.len();
        let ids: Vec<NodeId> = asked.iter().map(|&i| (i % n) as NodeId).collect();
        let mut model_topical: HashMap<NodeId, f64> = known[..n]
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i as NodeId, v)))
            .collect();
        let mut topical: ShortKeyMap<NodeId, f64> =
            model_topical.iter().map(|(&k, &v)| (k, v)).collect();
        let own = &own[..ids.len()];
        let got = context::context_matches(
            &s, &ids, &mut topical, sequential.then_some(own), None, &cfg,
        );
        prop_assert_eq!(got.len(), ids.len());
        for (k, &id) in ids.iter().enumerate() {
            if sequential {
                model_topical.insert(id, own[k]);
            }
            let get = |o: usize| model_topical.get(&(o as NodeId)).copied().unwrap_or(0.0);
            let ctx = model_context(&turns, id as usize, None, &cfg);
            let support = ctx.iter().map(|&(o, w)| w * get(o)).fold(0.0, f64::max).min(1.0);
            let sides = model_neighbours(&turns, id as usize, None, &cfg);
            let side = |before: bool| {
                sides
                    .iter()
                    .filter(|(off, _, _)| (*off < 0) == before)
                    .map(|&(_, o, w)| w * get(o))
                    .fold(0.0, f64::max)
            };
            prop_assert_eq!(got[k], [support, side(true), side(false)], "candidate {}", k);
        }
        prop_assert_eq!(topical.into_iter().collect::<HashMap<_, _>>(), model_topical);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Two nodes share an episode key exactly when the model puts them in
    /// one episode; a node in none (and an id not stored) has key 0.
    #[test]
    fn episode_keys_group_as_the_model(turns in prop::collection::vec(turn(), 1..24)) {
        let s = store_of(&turns);
        let ids: Vec<NodeId> = (0..turns.len() as NodeId + 1).collect();
        let keys = s.episode_keys(&ids);
        prop_assert_eq!(keys[turns.len()], 0);
        for (i, a) in turns.iter().enumerate() {
            prop_assert_eq!(keys[i] == 0, episode(a).is_none());
            for (j, b) in turns.iter().enumerate() {
                if episode(a).is_some() && episode(b).is_some() {
                    prop_assert_eq!(keys[i] == keys[j], episode(a) == episode(b), "{} {}", i, j);
                }
            }
        }
    }
}

/// A turn in the two hours either side of one of two midnights, a
/// quarter of them with a session: chats that run past a midnight, pause,
/// and start again.
fn turn_near_a_midnight() -> impl Strategy<Value = Turn> {
    (
        (0i64..2, -7_200i64..7_200),
        prop::option::weighted(0.25, 0u8..2),
    )
        .prop_map(|((d, s), session)| Turn {
            ts: Some(d * DAY + s),
            session,
            in_scope: false,
            speaker: None,
            share: 0.0,
        })
}

/// The model of the read path's episodes: the day a node's chat started,
/// for a node without a session (see `MemoryStore::run_episode_keys`).
fn model_run_day(turns: &[Turn], id: usize, allowed: Option<&[bool]>) -> i64 {
    let ts = turns[id].ts.unwrap();
    let mut timeline: Vec<(Timestamp, usize)> = turns
        .iter()
        .enumerate()
        .filter(|&(i, t)| t.ts.is_some() && allowed.is_none_or(|a| a[i]))
        .map(|(i, t)| (t.ts.unwrap(), i))
        .collect();
    timeline.sort();
    let free = |i: usize| turns[i].session.is_none();
    let (mut day, mut at) = (ts.div_euclid(DAY), ts);
    for _ in 0..context::MAX_RUN_DAYS {
        let midnight = day * DAY;
        let before = timeline.iter().rev().find(|e| e.0 < midnight);
        let mut after = timeline
            .iter()
            .filter(|e| midnight <= e.0 && e.0 < midnight + DAY);
        let (Some(&(t0, a)), Some(&(t1, b))) = (before, after.next()) else {
            break;
        };
        if t1 - t0 > context::RUN_GAP_S || !free(a) || !free(b) {
            break;
        }
        let mut last = t1;
        for &(t, i) in after {
            if t - last > context::RUN_GAP_S || !free(i) {
                break;
            }
            last = t;
        }
        if at > last {
            break;
        }
        day -= 1;
        at = t0;
    }
    day
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The read path's episode of a node without a session is the day its
    /// chat started, as the model follows it; other nodes keep theirs.
    #[test]
    fn run_episode_keys_follow_the_model(
        turns in prop::collection::vec(prop_oneof![1 => turn(), 3 => turn_near_a_midnight()], 1..24),
        mask in prop::collection::vec(any::<bool>(), 24),
        scoped in any::<bool>(),
    ) {
        let s = store_of(&turns);
        let mask = &mask[..turns.len()];
        let allowed = allowed_of(mask);
        let (a, m) = if scoped { (Some(&allowed), Some(mask)) } else { (None, None) };
        let ids: Vec<NodeId> = (0..turns.len() as NodeId).collect();
        let got = s.run_episode_keys(&ids, a);
        let stored = s.episode_keys(&ids);
        for (i, t) in turns.iter().enumerate() {
            let want = match (t.session, t.ts) {
                (None, Some(_)) => context::episode_key(context::Episode::Day(
                    model_run_day(&turns, i, m),
                )),
                _ => stored[i],
            };
            prop_assert_eq!(got[i], want, "node {}", i);
        }
    }
}

#[test]
fn question_shares_are_checked_all_or_nothing() {
    let turns: Vec<Turn> = (0..3)
        .map(|i| Turn {
            ts: Some(i * 60),
            session: None,
            in_scope: false,
            speaker: Some(if i % 2 == 0 { "Ana" } else { "Ben" }),
            share: 0.0,
        })
        .collect();
    let mut s = store_of(&turns);
    assert!(s.set_question_shares(&[(0, 0.5), (9, 0.5)]).is_err());
    assert!(s.set_question_shares(&[(0, 0.5), (1, 1.5)]).is_err());
    assert!(s.set_question_shares(&[(0, f64::NAN)]).is_err());
    assert_eq!(s.question_share_of(0), 0.0);
    s.set_question_shares(&[(0, 1.0)]).unwrap();
    // Ben's turn replies to Ana's question: 1 + reply_link * 1
    let cfg = ContextConfig::default();
    assert_eq!(
        context::temporal_context(&s, 1, None, &cfg),
        vec![(0, 2.0), (2, 1.0)]
    );
    s.forget_nodes(&[0]).unwrap();
    assert_eq!(s.question_share_of(0), 0.0);
    assert_eq!(context::temporal_context(&s, 1, None, &cfg), vec![(2, 1.0)]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn windows_and_seen_neighbours_equal_the_model(
        stamps in prop::collection::vec(prop::option::weighted(0.9, 0i64..50), 1..24),
        scopes in prop::collection::vec(
            prop::sample::select(vec![vec![], vec![("user", "a")], vec![("user", "b")],
                vec![("user", "a"), ("session", "1")]]),
            24,
        ),
        lo in -5i64..55,
        width in -3i64..30,
        mask in prop::collection::vec(any::<bool>(), 24),
        sessions in prop::collection::vec(prop::option::of(0u8..3), 24),
    ) {
        let mut s = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
        for (i, ts) in stamps.iter().enumerate() {
            let mut n = NewNode::new(format!("turn {i}"), vec![1.0, i as f32, 0.5, -1.0]);
            n.timestamp = *ts;
            n.scope = scopes[i].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if let Some(sess) = sessions[i] {
                n.provenance.push(("session".into(), sess.to_string()));
            }
            s.add_node(n).unwrap();
        }
        let mut timeline: Vec<(Timestamp, usize)> = stamps
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (t, i)))
            .collect();
        timeline.sort();
        let hi = lo + width;
        let mask = &mask[..stamps.len()];
        let allowed = allowed_of(mask);
        for a in [None, Some(&allowed)] {
            let want: Vec<NodeId> = timeline
                .iter()
                .filter(|&&(t, i)| lo <= t && t < hi && a.is_none_or(|_| mask[i]))
                .map(|&(_, i)| i as NodeId)
                .collect();
            prop_assert_eq!(s.timeline_window(lo, hi, a), want);
        }
        let within = |own: &Vec<(&str, &str)>, other: &Vec<(&str, &str)>| {
            own.iter().all(|p| other.contains(p))
        };
        for id in 0..stamps.len() {
            let got = s.time_neighbours_seen(id as NodeId);
            let Some(ts) = stamps[id] else {
                prop_assert_eq!(got, None);
                continue;
            };
            let pos = timeline.iter().position(|&e| e == (ts, id)).unwrap();
            let seen = |&&(t, i): &&(Timestamp, usize)| {
                within(&scopes[id], &scopes[i]).then_some((i as NodeId, t))
            };
            // a turn in a session: its session's nearest it sees, else the
            // nearest it sees
            // (its provenance's session, else its scope's)
            let session = |i: usize| {
                sessions[i].map(|s| s.to_string()).or_else(|| {
                    scopes[i].iter().find(|(k, _)| *k == "session").map(|(_, v)| v.to_string())
                })
            };
            let nearest = |side: Vec<(NodeId, Timestamp)>| {
                let own = session(id).and_then(|sess| {
                    side.iter()
                        .find(|&&(n, _)| session(n as usize).as_ref() == Some(&sess))
                        .copied()
                });
                own.or(side.first().copied())
            };
            let prev = nearest(timeline[..pos].iter().rev().filter_map(|e| seen(&e)).collect());
            let next = nearest(timeline[pos + 1..].iter().filter_map(|e| seen(&e)).collect());
            prop_assert_eq!(got, Some((prev, next)));
        }
    }
}
