//! A node's episode (its session, else its calendar day) and the 64-bit key
//! the read path groups and compares episodes by. Apart from `context` so
//! that the store can key each node's episode at write without a module cycle.

use crate::types::{Node, Timestamp};

/// Seconds in a day: a node without a session is in its UTC calendar day's episode.
pub const DAY_S: Timestamp = 86_400;

/// The episode a node belongs to, as a comparable key: the session it
/// names (`session_from`: its provenance's, else its scope's), else the UTC
/// calendar day of its timestamp, else none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Episode<'a> {
    Session { key: &'a str, value: &'a str },
    Day(Timestamp),
    None,
}

/// The episode of a stored node.
pub fn episode_of(node: &Node) -> Episode<'_> {
    episode_from(&node.provenance, &node.scope, node.timestamp)
}

/// Keys that name a session (or episode), in the order they are looked up.
pub const SESSION_KEYS: [&str; 3] = ["session", "session_id", "episode"];

/// The session a node names, as (key, value): the first of `SESSION_KEYS`
/// its provenance carries (the last value of a repeated key), else the first
/// its scope carries (a chat kept in scope `{"session": id}`, as the
/// LangChain history keeps one, is that session).
pub fn session_from<'a>(
    provenance: &'a [(String, String)],
    scope: &'a [(String, String)],
) -> Option<(&'static str, &'a str)> {
    [provenance, scope].into_iter().find_map(|pairs| {
        SESSION_KEYS.into_iter().find_map(|key| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| (key, v.as_str()))
        })
    })
}

/// `episode_of` a node's provenance, scope and observation time.
pub fn episode_from<'a>(
    provenance: &'a [(String, String)],
    scope: &'a [(String, String)],
    timestamp: Option<Timestamp>,
) -> Episode<'a> {
    if let Some((key, value)) = session_from(provenance, scope) {
        return Episode::Session { key, value };
    }
    match timestamp {
        Some(ts) => Episode::Day(ts.div_euclid(DAY_S)),
        None => Episode::None,
    }
}

/// A 64-bit key of an episode, equal for the nodes of one episode: 0 for
/// none, else a fixed hash of the episode with its low bit set. Two
/// episodes share a key with probability about 2^-63; the read path, which
/// groups and compares nodes by key, would then take them for one.
pub fn episode_key(episode: Episode<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same key in every process and run
    let mut h = std::hash::DefaultHasher::new();
    match episode {
        Episode::None => return 0,
        Episode::Session { key, value } => (0u8, key, value).hash(&mut h),
        Episode::Day(day) => (1u8, day).hash(&mut h),
    }
    h.finish() | 1
}
