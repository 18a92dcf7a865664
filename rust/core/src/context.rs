//! A node's time-order context: the observations one and two steps before
//! and after it on the timeline, within its episode.
//!
//! A node's episode is its session, else its calendar day (`episode`). A
//! chat kept without sessions often runs past midnight (UTC midnight falls
//! in many people's evening), so for such nodes a neighbour across the
//! midnight within `RUN_GAP_S` is context too, and the read path puts the
//! turns of such a run in the episode of the day it started, while a later
//! chat that day keeps its own (`MemoryStore::run_episode_keys`): measured,
//! every session of both development sets started at 23:55 UTC lost
//! 0.009-0.010 recall@10 without this (BENCHMARKS.md sections 62, 63).
//!
//! These are the temporal view's rule links, read off the timeline itself
//! (exact also when observations arrive out of order). The read path weighs
//! what the context says about a query: the best topical match among a
//! node's neighbours ("support": answers often sit in the reply to the turn
//! that matches), and the best before it and after it apart (which side
//! answers the other differs between friends chatting and a user asking an
//! assistant).
//!
//! The turn right before a node counts more when someone else asked it a
//! question: the node is then its reply. How much a text is a question (its
//! question share) is measured by the caller and kept here per node.

use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::Allowed;
use crate::hashing::ShortKeyMap;
use crate::store::MemoryStore;
use crate::types::{Node, NodeId, Timestamp};

pub use crate::episode::{episode_from, episode_key, episode_of, Episode, DAY_S};

/// The longest silence inside one run of a chat without sessions: a
/// neighbour this close in time is in a node's context across midnight.
pub const RUN_GAP_S: Timestamp = 3_600;

/// How many midnights back a run of a chat without sessions is followed.
pub const MAX_RUN_DAYS: usize = 7;

/// How many nodes either side of a midnight a scoped view steps over to
/// find the ones it sees.
const RUN_LOOKUP: usize = 256;

/// How many nodes after a midnight a run of a chat is followed through.
const RUN_WALK: usize = 4_096;

/// The weights of a time-order context.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextConfig {
    /// Weight of a neighbour two steps away (one step: 1).
    pub second_step_decay: f64,
    /// Added to the weight of the turn right before, times its question
    /// share, when another speaker said it.
    pub reply_link: f64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            second_step_decay: 0.7,
            reply_link: 1.0,
        }
    }
}

/// One neighbour: its offset on the timeline (-2, -1, +1, +2), id, weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Neighbour {
    pub offset: i8,
    pub node: NodeId,
    pub weight: f64,
}

/// The node's speaker as its provenance names it (the last `speaker` value), if any.
pub fn speaker_of(node: &Node) -> Option<&str> {
    node.provenance
        .iter()
        .rev()
        .find(|(k, _)| k == "speaker")
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Whether two speaker names are the same person, case aside (full Unicode
/// lower case, as Python's `str.lower`, final sigma included).
pub fn same_speaker(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        // Unicode lower case is ASCII's on ASCII text: no allocation (this
        // runs for the turn before every candidate)
        return a.eq_ignore_ascii_case(b);
    }
    a == b || a.to_lowercase() == b.to_lowercase()
}

/// What the context functions read of the store: node lookup, the timeline
/// and each node's question share.
pub trait ContextSource {
    fn node(&self, id: NodeId) -> Option<&Node>;
    /// The two nodes nearest after (`forward`) or before `(ts, id)` on the
    /// timeline that `allowed` lets through, nearest first; for a node
    /// without a timestamp (`ts` None), the nearest in write order among the
    /// nodes without one. With `own_session`, only the nodes of the
    /// node's own session count, however many others lie between (sessions
    /// kept at once interleave on the timeline: a group chat's threads, an
    /// agent's chats with several users).
    fn nearest_two(
        &self,
        ts: Option<Timestamp>,
        id: NodeId,
        forward: bool,
        allowed: Option<&Allowed>,
        own_session: bool,
    ) -> [Option<NodeId>; 2];
    fn question_share(&self, id: NodeId) -> f64;
    /// The node's `episode_key` (0 for an unknown id). A store keeps them
    /// from write time: the context of every candidate reads them.
    fn episode(&self, id: NodeId) -> u64 {
        self.node(id).map_or(0, |n| episode_key(episode_of(n)))
    }
}

/// A node's time when it is part of a chat kept without sessions (its
/// episode is its calendar day); None for a node with a session or no time.
fn run_time(node: &Node) -> Option<Timestamp> {
    match episode_of(node) {
        Episode::Day(_) => node.timestamp,
        _ => None,
    }
}

/// The observations one and two steps before and after `id` on the
/// timeline (the allowed ones only, when given: the others are stepped over,
/// as if they were not stored), in its episode, in the order -1, +1, -2, +2,
/// weighted 1 and `second_step_decay`. A node in a session reads its
/// session's nearest turns, stepping over the turns of other episodes
/// between: its context is its own thread's, however many threads run at
/// once. A node without a timestamp has the
/// nodes without one written before and after it (a log kept without its
/// times is still in order), when its episode is known (a session); without
/// either it has none. Empty for an unknown node.
pub fn neighbours(
    src: &impl ContextSource,
    id: NodeId,
    allowed: Option<&Allowed>,
    cfg: &ContextConfig,
) -> Vec<Neighbour> {
    let mut out = Vec::new();
    let Some(node) = src.node(id) else {
        return out;
    };
    let ts = node.timestamp;
    let episode = src.episode(id);
    if ts.is_none() && episode == 0 {
        // neither a time nor a session: nothing says which notes belong
        // together (measured: a chat's turns without either lost recall
        // with write-order context, BENCHMARKS.md section 60)
        return out;
    }
    let in_session = matches!(episode_of(node), Episode::Session { .. });
    let before = src.nearest_two(ts, id, false, allowed, in_session);
    let after = src.nearest_two(ts, id, true, allowed, in_session);
    // A node without a session is in its calendar day's episode; a chat
    // that runs past midnight goes on: a neighbour without a session
    // within `RUN_GAP_S` of the node (and of the one between them) is in
    // its context whatever the day.
    let own_run = run_time(node);
    let continues = |got: &[Option<NodeId>; 2], step: usize| -> bool {
        let Some(mut last) = own_run else {
            return false;
        };
        for other in got.iter().take(step + 1) {
            let Some(t) = other.and_then(|o| src.node(o)).and_then(run_time) else {
                return false;
            };
            if (t - last).abs() > RUN_GAP_S {
                return false;
            }
            last = t;
        }
        true
    };
    for (step, weight) in [(0usize, 1.0), (1, cfg.second_step_decay)] {
        for (sign, got) in [(-1i8, &before), (1, &after)] {
            if let Some(other) = got[step] {
                if src.node(other).is_some()
                    && (src.episode(other) == episode || continues(got, step))
                {
                    out.push(Neighbour {
                        offset: sign * (step as i8 + 1),
                        node: other,
                        weight,
                    });
                }
            }
        }
    }
    out
}

/// How much `answered_by` replies to a question in `asked_by` (the turn
/// before it): the question share of that turn, unless one speaker said both
/// (a question followed by its asker's own next turn is not answered by it).
pub fn reply_share(src: &impl ContextSource, asked_by: NodeId, answered_by: NodeId) -> f64 {
    let speaker = |id| src.node(id).and_then(speaker_of);
    if let (Some(a), Some(b)) = (speaker(asked_by), speaker(answered_by)) {
        if same_speaker(a, b) {
            return 0.0;
        }
    }
    src.question_share(asked_by)
}

/// `neighbours` with the reply link: the turn right before weighs
/// `1 + reply_link * reply_share`.
pub fn temporal_context(
    src: &impl ContextSource,
    id: NodeId,
    allowed: Option<&Allowed>,
    cfg: &ContextConfig,
) -> Vec<(NodeId, f64)> {
    neighbours(src, id, allowed, cfg)
        .into_iter()
        .map(|n| {
            let w = if n.offset == -1 {
                n.weight + cfg.reply_link * reply_share(src, n.node, id)
            } else {
                n.weight
            };
            (n.node, w)
        })
        .collect()
}

/// What a node's context says about a query, each at least 0: the best
/// `weight * match` over its `temporal_context` (at most 1), and the best
/// over the neighbours before it and after it (plain weights). A neighbour
/// without a match in `topical` matches 0.
///
/// `own`: the candidates' own matches, entered into `topical` one by one
/// in order, each before its candidate is measured (a candidate's context
/// then reads the matches of the candidates before it).
pub fn context_matches(
    src: &impl ContextSource,
    ids: &[NodeId],
    topical: &mut ShortKeyMap<NodeId, f64>,
    own: Option<&[f64]>,
    allowed: Option<&Allowed>,
    cfg: &ContextConfig,
) -> Vec<[f64; 3]> {
    let mut out = Vec::with_capacity(ids.len());
    for (k, &id) in ids.iter().enumerate() {
        if let Some(own) = own {
            topical.insert(id, own[k]);
        }
        let near = neighbours(src, id, allowed, cfg);
        let matched = |n: NodeId| topical.get(&n).copied().unwrap_or(0.0);
        let (mut support, mut prev, mut next) = (0.0f64, 0.0f64, 0.0f64);
        for n in &near {
            let context_weight = if n.offset == -1 {
                n.weight + cfg.reply_link * reply_share(src, n.node, id)
            } else {
                n.weight
            };
            let m = matched(n.node);
            let s = context_weight * m;
            if s > support {
                support = s;
            }
            let side = n.weight * m;
            if n.offset < 0 {
                if side > prev {
                    prev = side;
                }
            } else if side > next {
                next = side;
            }
        }
        // a reply link weighs up to 1 + reply_link: support stays in [0, 1]
        out.push([if support < 1.0 { support } else { 1.0 }, prev, next]);
    }
    out
}

impl ContextSource for MemoryStore {
    fn node(&self, id: NodeId) -> Option<&Node> {
        self.get(id)
    }

    fn nearest_two(
        &self,
        ts: Option<Timestamp>,
        id: NodeId,
        forward: bool,
        allowed: Option<&Allowed>,
        own_session: bool,
    ) -> [Option<NodeId>; 2] {
        // along the links of the node's session's line, or of the timeline
        // (the untimed nodes' own, in write order), stepping over the nodes
        // not allowed
        let step = |n: NodeId| {
            if own_session {
                self.sessions.step(n, forward)
            } else if ts.is_some() {
                self.by_time.step(n, forward)
            } else {
                self.untimed.step(n, forward)
            }
        };
        let mut got = [None, None];
        let mut found = 0;
        let mut at = step(id);
        while let Some(n) = at {
            if allowed.is_none_or(|a| a.contains(n)) {
                got[found] = Some(n);
                found += 1;
                if found == 2 {
                    break;
                }
            }
            at = step(n);
        }
        got
    }

    fn episode(&self, id: NodeId) -> u64 {
        self.episode_keys.get(&id).copied().unwrap_or(0)
    }

    fn question_share(&self, id: NodeId) -> f64 {
        self.question_shares.get(&id).copied().unwrap_or(0.0)
    }
}

impl MemoryStore {
    /// Record how much each node's text is a question (a share in [0, 1]),
    /// as the caller measured it. All or nothing: an unknown id or a value
    /// outside [0, 1] changes nothing.
    pub fn set_question_shares(&mut self, shares: &[(NodeId, f64)]) -> Result<()> {
        for &(id, share) in shares {
            self.require(id)?;
            check_share(id, share)?;
        }
        self.record_shares(shares);
        Ok(())
    }

    /// Keep checked shares of stored nodes and count them in the style.
    pub(crate) fn record_shares(&mut self, shares: &[(NodeId, f64)]) {
        for &(id, share) in shares {
            self.question_shares.insert(id, share);
        }
        let (graph, episodes) = (&self.graph, &self.episode_keys);
        self.style.record_many(
            shares.iter().map(|&(id, share)| {
                let node = graph.get(id).expect("a stored node");
                // kept from the node's write
                let episode = episodes.get(&id).copied().unwrap_or(0);
                (node, episode, share)
            }),
            &self.question_shares,
        );
    }

    /// A node's question share (0 when none was recorded).
    pub fn question_share_of(&self, id: NodeId) -> f64 {
        ContextSource::question_share(self, id)
    }

    /// Each node's `episode_key` (0 for an id not stored: it is in no episode).
    pub fn episode_keys(&self, ids: &[NodeId]) -> Vec<u64> {
        ids.iter()
            .map(|&id| ContextSource::episode(self, id))
            .collect()
    }

    /// `episode_keys` as the read path groups nodes: a node without a
    /// session is in its calendar day's episode, unless the chat it is part
    /// of ran on from the day before: a run crosses a midnight when the last
    /// node before it and the first after, both without a session, are at
    /// most `RUN_GAP_S` apart, and goes on while each next node is without
    /// a session and at most `RUN_GAP_S` after the one before. A node in
    /// such a run is in the episode of the day the run started (followed
    /// up to `MAX_RUN_DAYS` midnights back); a later chat on the same day
    /// keeps its own day. Only the nodes `allowed` lets through make a run.
    pub fn run_episode_keys(&self, ids: &[NodeId], allowed: Option<&Allowed>) -> Vec<u64> {
        let mut runs: ShortKeyMap<Timestamp, Option<MorningRun>> = ShortKeyMap::default();
        ids.iter()
            .map(|&id| {
                let Some(node) = self.graph.get(id) else {
                    return ContextSource::episode(self, id);
                };
                match (episode_of(node), node.timestamp) {
                    (Episode::Day(day), Some(ts)) => {
                        let (mut day, mut ts) = (day, ts);
                        for _ in 0..MAX_RUN_DAYS {
                            let run = *runs
                                .entry(day)
                                .or_insert_with(|| self.morning_run(day, allowed));
                            match run {
                                Some(run) if ts <= run.last => {
                                    // on in the day before, from its last node
                                    day -= 1;
                                    ts = run.before;
                                }
                                _ => break,
                            }
                        }
                        episode_key(Episode::Day(day))
                    }
                    _ => ContextSource::episode(self, id),
                }
            })
            .collect()
    }

    /// The run of a chat without sessions that goes on past the midnight
    /// starting `day` (see `run_episode_keys`), if one does.
    fn morning_run(&self, day: Timestamp, allowed: Option<&Allowed>) -> Option<MorningRun> {
        let midnight = day.saturating_mul(DAY_S);
        let next_midnight = midnight.saturating_add(DAY_S);
        let set = self.by_time.set();
        let seen = |&&(_, n): &&(Timestamp, NodeId)| allowed.is_none_or(|a| a.contains(n));
        let sessionless = |n: NodeId| self.graph.get(n).and_then(run_time).is_some();
        let &(before, a) = set
            .range(..(midnight, NodeId::MIN))
            .rev()
            .take(RUN_LOOKUP)
            .find(seen)?;
        let mut after = set
            .range((midnight, NodeId::MIN)..(next_midnight, NodeId::MIN))
            .take(RUN_WALK)
            .filter(seen);
        let &(first, b) = after.next()?;
        if first - before > RUN_GAP_S || !sessionless(a) || !sessionless(b) {
            return None;
        }
        let mut last = first;
        for &(t, n) in after {
            if t - last > RUN_GAP_S || !sessionless(n) {
                break;
            }
            last = t;
        }
        Some(MorningRun { before, last })
    }
}

/// A chat without sessions running on past a midnight: the time of its
/// last node before the midnight, and of its last node that day after it.
#[derive(Clone, Copy, Debug)]
struct MorningRun {
    before: Timestamp,
    last: Timestamp,
}

/// Whether every (key, value) of `own` is in `other` (both sorted by key, one value per key).
fn scope_within(own: &[(String, String)], other: &[(String, String)]) -> bool {
    own.iter().all(|pair| {
        other
            .binary_search_by(|p| p.0.cmp(&pair.0))
            .is_ok_and(|i| other[i] == *pair)
    })
}

impl MemoryStore {
    /// The nodes observed in `[lo, hi)` (half-open, as every window a query
    /// names: a day's window ends at the next midnight, which is not in it),
    /// in time order (ties by id); the allowed ones only, when given.
    pub fn timeline_window(
        &self,
        lo: Timestamp,
        hi: Timestamp,
        allowed: Option<&Allowed>,
    ) -> Vec<NodeId> {
        if lo >= hi {
            return Vec::new();
        }
        self.by_time
            .set()
            .range((lo, NodeId::MIN)..(hi, NodeId::MIN))
            .map(|&(_, n)| n)
            .filter(|&n| allowed.is_none_or(|a| a.contains(n)))
            .collect()
    }

    /// The nodes right before and right after `id` in time order among those
    /// it sees (a scoped node: the nodes whose scope holds its own), with
    /// their timestamps: where the write path links it on the temporal view.
    /// A node in a session links to its own session's nearest that it
    /// sees instead, when its session has one that side (a thread's turns
    /// link to each other, not to the turns of the threads between them);
    /// else to the nearest it sees.
    /// None for an unknown node or one without a timestamp.
    #[allow(clippy::type_complexity)]
    pub fn time_neighbours_seen(
        &self,
        id: NodeId,
    ) -> Option<(Option<(NodeId, Timestamp)>, Option<(NodeId, Timestamp)>)> {
        let node = self.get(id)?;
        let ts = node.timestamp?;
        let seen = |&&(t, n): &&(Timestamp, NodeId)| {
            self.get(n)
                .is_some_and(|o| scope_within(&node.scope, &o.scope))
                .then_some((n, t))
        };
        let in_session = matches!(episode_of(node), Episode::Session { .. });
        let own = |forward: bool| {
            let mut at = self.sessions.step(id, forward);
            while let Some(n) = at {
                let t = self.get(n)?.timestamp?;
                if let Some(hit) = seen(&&(t, n)) {
                    return Some(hit);
                }
                at = self.sessions.step(n, forward);
            }
            None
        };
        let prev = in_session.then(|| own(false)).flatten().or_else(|| {
            self.by_time
                .set()
                .range(..(ts, id))
                .rev()
                .find_map(|e| seen(&e))
        });
        let next = in_session.then(|| own(true)).flatten().or_else(|| {
            self.by_time
                .set()
                .range((Bound::Excluded((ts, id)), Bound::Unbounded))
                .find_map(|e| seen(&e))
        });
        Some((prev, next))
    }
}

/// A question share must lie in [0, 1] (NaN does not).
pub(crate) fn check_share(id: NodeId, share: f64) -> Result<()> {
    if (0.0..=1.0).contains(&share) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "question share of node {id} is {share}, not in [0, 1]"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The two nearest allowed nodes each way, read along the
        /// timeline's links, are the ordered set's (for a node without a
        /// timestamp, the nodes without one in id order), after writes with
        /// equal timestamps, nodes without one, removals and a snapshot load.
        #[test]
        fn nearest_two_along_links_equal_the_ordered_set(
            stamps in proptest::collection::vec(proptest::option::weighted(0.7, 0i64..8), 1..30),
            gone in proptest::collection::vec(any::<bool>(), 30),
            allowed in proptest::collection::vec(any::<bool>(), 30),
            sessions in proptest::collection::vec(proptest::option::of(0u8..3), 30),
        ) {
            use crate::ops::NewNode;
            use crate::store::StoreConfig;
            let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
            for (i, &ts) in stamps.iter().enumerate() {
                let mut n = NewNode::new("a turn", vec![1.0, 0.0]);
                n.timestamp = ts;
                if let Some(v) = sessions[i] {
                    n.provenance = vec![("session".into(), v.to_string())];
                }
                s.add_node(n).unwrap();
            }
            let ids: Vec<NodeId> = (0..stamps.len() as NodeId).collect();
            let forget: Vec<NodeId> = ids.iter().copied().filter(|&i| gone[i as usize]).collect();
            s.forget_nodes(&forget).unwrap();
            let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
            let scope = Allowed::from_sorted(
                ids.iter().copied().filter(|&i| allowed[i as usize]).collect(),
            );
            for store in [&s, &loaded] {
                // a node without a timestamp: the stored nodes without one,
                // in write (id) order, whatever the timestamped ones between
                let untimed: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|&i| store.get(i).is_some_and(|n| n.timestamp.is_none()))
                    .collect();
                for (k, &id) in untimed.iter().enumerate() {
                    for a in [None, Some(&scope)] {
                        let ok = |n: &&NodeId| a.is_none_or(|a| a.contains(**n));
                        let mut after = untimed[k + 1..].iter().filter(ok).copied();
                        let mut before = untimed[..k].iter().rev().filter(ok).copied();
                        prop_assert_eq!(
                            store.nearest_two(None, id, true, a, false),
                            [after.next(), after.next()]
                        );
                        prop_assert_eq!(
                            store.nearest_two(None, id, false, a, false),
                            [before.next(), before.next()]
                        );
                    }
                }
                for &id in &ids {
                    let Some(ts) = store.get(id).and_then(|n| n.timestamp) else { continue };
                    for a in [None, Some(&scope)] {
                        let ok = |n: &NodeId| a.is_none_or(|a| a.contains(*n));
                        let set = store.by_time.set();
                        let mut after = set
                            .range((Bound::Excluded((ts, id)), Bound::Unbounded))
                            .map(|&(_, n)| n)
                            .filter(ok);
                        let mut before = set.range(..(ts, id)).rev().map(|&(_, n)| n).filter(ok);
                        prop_assert_eq!(
                            store.nearest_two(Some(ts), id, true, a, false),
                            [after.next(), after.next()]
                        );
                        prop_assert_eq!(
                            store.nearest_two(Some(ts), id, false, a, false),
                            [before.next(), before.next()]
                        );
                    }
                }
                // along a session's own line: its live turns with a time (or
                // without one) in the timeline's order, whatever lies between
                for &id in &ids {
                    let Some(node) = store.get(id) else { continue };
                    let Some(sess) = sessions[id as usize] else { continue };
                    let timed = node.timestamp.is_some();
                    let line: Vec<NodeId> = store
                        .by_time
                        .set()
                        .iter()
                        .map(|&(_, n)| n)
                        .filter(|_| timed)
                        .chain(untimed.iter().copied().filter(|_| !timed))
                        .filter(|&n| sessions[n as usize] == Some(sess))
                        .collect();
                    let k = line.iter().position(|&n| n == id).unwrap();
                    for a in [None, Some(&scope)] {
                        let ok = |n: &&NodeId| a.is_none_or(|a| a.contains(**n));
                        let mut after = line[k + 1..].iter().filter(ok).copied();
                        let mut before = line[..k].iter().rev().filter(ok).copied();
                        prop_assert_eq!(
                            store.nearest_two(node.timestamp, id, true, a, true),
                            [after.next(), after.next()]
                        );
                        prop_assert_eq!(
                            store.nearest_two(node.timestamp, id, false, a, true),
                            [before.next(), before.next()]
                        );
                    }
                }
            }
        }
    }

    /// A stored node's episode key, kept from write time, is the one its
    /// provenance and timestamp give, after removals and a snapshot round trip.
    #[test]
    fn the_store_keeps_each_nodes_episode_key() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let provenances: [&[(&str, &str)]; 5] = [
            &[("session", "s1"), ("speaker", "Ana")],
            &[("episode", "e"), ("session_id", "x"), ("session_id", "y")],
            &[("speaker", "Bo")],
            &[],
            &[("session", "s1")],
        ];
        let mut ids = Vec::new();
        for (i, prov) in provenances.iter().enumerate() {
            let mut n = NewNode::new(format!("turn {i}"), vec![1.0, i as f32]);
            n.provenance = prov.iter().map(|&(k, v)| (k.into(), v.into())).collect();
            n.timestamp = (i != 3).then_some(86_400 * i as Timestamp + 5);
            ids.push(s.add_node(n).unwrap());
        }
        s.remove_node(ids[2]).unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
        for store in [&s, &loaded] {
            for &id in &ids {
                let want = store.get(id).map_or(0, |n| episode_key(episode_of(n)));
                assert_eq!(ContextSource::episode(store, id), want, "node {id}");
            }
            assert_eq!(store.episode_keys(&[ids[0]]), store.episode_keys(&[ids[4]]));
            assert_eq!(store.episode_keys(&[ids[3]]), vec![0]);
        }
    }

    /// Two sessions kept at once: each turn's context is its own session's
    /// turns, stepping over the other's, however many lie between.
    #[test]
    fn a_turn_in_a_session_steps_over_another_sessions_turns() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let mut at = 1_700_000_000;
        let mut add = |session: Option<&str>| {
            let mut n = NewNode::new("a turn", vec![1.0, 0.5]);
            at += 10;
            n.timestamp = Some(at);
            if let Some(v) = session {
                n.provenance = vec![("session".into(), v.into())];
            }
            s.add_node(n).unwrap()
        };
        let a1 = add(Some("a"));
        let b1 = add(Some("b"));
        let a2 = add(Some("a"));
        let b2 = add(Some("b"));
        let a3 = add(Some("a"));
        let between: Vec<NodeId> = (0..500).map(|_| add(Some("b"))).collect();
        let note = add(None);
        let a4 = add(Some("a"));
        let cfg = ContextConfig::default();
        let near = |s: &MemoryStore, id| -> Vec<(i8, NodeId)> {
            neighbours(s, id, None, &cfg)
                .iter()
                .map(|n| (n.offset, n.node))
                .collect()
        };
        assert_eq!(near(&s, a2), vec![(-1, a1), (1, a3), (2, a4)]);
        assert_eq!(
            near(&s, b2),
            vec![(-1, b1), (1, between[0]), (2, between[1])]
        );
        // five hundred of b's turns and a note without a session between
        assert_eq!(near(&s, a4), vec![(-1, a3), (-2, a2)]);
        // the note without a session reads the timeline as before: the
        // turns next to it are the sessions', not its episode
        assert!(near(&s, note).is_empty());
        // the temporal view links a4 to a3, a thread's first turn to the turn before it
        assert_eq!(
            s.time_neighbours_seen(a4).unwrap().0.map(|(n, _)| n),
            Some(a3)
        );
        assert_eq!(
            s.time_neighbours_seen(b1).unwrap().0.map(|(n, _)| n),
            Some(a1)
        );
        // a turn forgotten is stepped over; a snapshot keeps the lines
        s.forget_nodes(&[a3]).unwrap();
        assert_eq!(near(&s, a4), vec![(-1, a2), (-2, a1)]);
        let loaded = MemoryStore::from_snapshot_bytes(&s.to_snapshot_bytes().unwrap()).unwrap();
        assert_eq!(near(&loaded, a4), vec![(-1, a2), (-2, a1)]);
        assert_eq!(near(&loaded, a2), vec![(-1, a1), (1, a4)]);
    }

    /// A chat without sessions that runs past midnight keeps its context
    /// and its episode across the midnight; a long silence ends both.
    #[test]
    fn a_chat_without_sessions_runs_on_past_midnight() {
        use crate::ops::NewNode;
        use crate::store::StoreConfig;
        let midnight = 86_400 * 19_500;
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let mut add = |ts: Timestamp, session: Option<&str>| {
            let mut n = NewNode::new(format!("turn at {ts}"), vec![1.0, 0.5]);
            n.timestamp = Some(ts);
            if let Some(v) = session {
                n.provenance = vec![("session".into(), v.into())];
            }
            s.add_node(n).unwrap()
        };
        // 23:50, 23:55 | 00:05, 00:10, then 04:00 the same day
        let a = add(midnight - 600, None);
        let b = add(midnight - 300, None);
        let c = add(midnight + 300, None);
        let d = add(midnight + 600, None);
        let late = add(midnight + 4 * 3_600, None);
        let cfg = ContextConfig::default();
        let near = |id| -> Vec<(i8, NodeId)> {
            neighbours(&s, id, None, &cfg)
                .iter()
                .map(|n| (n.offset, n.node))
                .collect()
        };
        assert_eq!(near(c), vec![(-1, b), (1, d), (-2, a), (2, late)]);
        assert_eq!(near(b), vec![(-1, a), (1, c), (2, d)]);
        // the same day's episode as before: a node four hours on is still
        // in 00:10's (the calendar day), not across a silence past midnight
        assert_eq!(near(late), vec![(-1, d), (-2, c)]);
        let keys = s.run_episode_keys(&[a, b, c, d, late], None);
        assert!(
            keys[..4].iter().all(|&k| k == keys[0] && k != 0),
            "{keys:?}"
        );
        // four hours on, after a silence, is the day's own chat, not the run's
        assert_eq!(keys[4], s.episode_keys(&[late])[0]);
        assert_ne!(keys[4], keys[0]);
        // a chat that goes on, a turn every 50 minutes from 23:50, is one
        // run through the day and past the next midnight into the day after
        let mut r = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let run: Vec<NodeId> = (0..40)
            .map(|k| {
                let mut n = NewNode::new(format!("turn {k}"), vec![1.0, 0.5]);
                n.timestamp = Some(midnight - 600 + k * 3_000);
                r.add_node(n).unwrap()
            })
            .collect();
        let keys = r.run_episode_keys(&run, None);
        assert!(keys.iter().all(|&k| k == keys[0]), "{keys:?}");
        assert_eq!(keys[0], r.episode_keys(&run[..1])[0]);
        // a turn with a session ends a run: one after it is the day's own
        let mut q = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let ids: Vec<NodeId> = [(-600, None), (300, None), (600, Some("s")), (900, None)]
            .into_iter()
            .map(|(offset, session)| {
                let mut n = NewNode::new(format!("at {offset}"), vec![1.0, 0.5]);
                n.timestamp = Some(midnight + offset);
                if let Some(v) = session {
                    n.provenance = vec![("session".into(), v.into())];
                }
                q.add_node(n).unwrap()
            })
            .collect();
        let keys = q.run_episode_keys(&ids, None);
        assert_eq!(keys[1], keys[0]);
        assert_eq!(keys[3], q.episode_keys(&ids[3..])[0]);
        assert_ne!(keys[3], keys[0]);
        // stored keys stay the calendar days'
        assert_ne!(s.episode_keys(&[b])[0], s.episode_keys(&[c])[0]);
        // a silence of more than RUN_GAP_S at midnight: two episodes
        let mut t = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let mut ids = Vec::new();
        for ts in [midnight - 600, midnight + RUN_GAP_S] {
            let mut n = NewNode::new("x".to_string(), vec![1.0, 0.5]);
            n.timestamp = Some(ts);
            ids.push(t.add_node(n).unwrap());
        }
        let keys = t.run_episode_keys(&ids, None);
        assert_ne!(keys[0], keys[1]);
        assert!(neighbours(&t, ids[1], None, &cfg).is_empty());
        // a scoped view that sees nothing before the midnight: no run
        let after_only = Allowed::from_sorted(vec![c, d]);
        assert_ne!(
            s.run_episode_keys(&[c], Some(&after_only)),
            s.run_episode_keys(&[c], None)
        );
        // nodes with a session keep their session's episode
        let mut u = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let mut n = NewNode::new("y".to_string(), vec![1.0, 0.5]);
        n.timestamp = Some(midnight - 60);
        n.provenance = vec![("session".into(), "s1".into())];
        let x = u.add_node(n).unwrap();
        let mut n = NewNode::new("z".to_string(), vec![1.0, 0.5]);
        n.timestamp = Some(midnight + 60);
        let y = u.add_node(n).unwrap();
        assert!(neighbours(&u, y, None, &cfg).is_empty());
        assert_eq!(u.run_episode_keys(&[x], None), u.episode_keys(&[x]));
    }

    proptest! {
        /// The ASCII shortcut answers as full lower-casing does, also for
        /// text where only one side is ASCII (the Kelvin sign lower-cases to `k`).
        #[test]
        fn same_speaker_is_equality_after_lower_casing(
            a in "[a-zA-Z\u{212A}\u{3A3}\u{3C3}\u{3C2} ]{0,6}",
            b in "[a-zA-Z\u{212A}\u{3A3}\u{3C3}\u{3C2} ]{0,6}",
        ) {
            prop_assert_eq!(same_speaker(&a, &b), a.to_lowercase() == b.to_lowercase());
            prop_assert_eq!(same_speaker(&a, &a.to_uppercase()), a.to_lowercase() == a.to_uppercase().to_lowercase());
        }
    }
}
