//! What relation judgment reads about a new node and one of its write
//! candidates, beside the discovery signals (`candidates::Signals`): whether
//! they share a session and a speaker, which is older, and how well their
//! names match as aliases ("mel" ~ "melanie"). Computed here so the write
//! path makes no per-candidate Python call.

use crate::hashing::{ShortKeyMap, ShortKeySet};

use crate::types::Node;

/// Each node's entity list is read only this far (speaker first, then in
/// order of appearance): every kept pair is compared, and a long text can
/// carry thousands of names.
pub const ALIAS_SCAN: usize = 64;

/// Provenance keys that name a session (or episode), in the order they are looked up.
const SESSION_KEYS: [&str; 3] = ["session", "session_id", "episode"];

/// The pair signals, each in [0, 1].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairSignals {
    /// 1 when both name the same session (the same key and value).
    pub same_session: f64,
    /// 1 when both carry the same speaker (case-insensitive).
    pub same_speaker: f64,
    /// 1 when the candidate was observed no later than the new node, or
    /// either time is unknown (then insertion order says it came first).
    pub older: f64,
    /// The best alias match between differing entity ids (see [`alias_signal`]).
    pub alias: f64,
}

pub(crate) fn provenance_value<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    // provenance comes from a mapping, so a key appears once
    node.provenance
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The session (or episode) a node's provenance names, as (key, value): the
/// first of `session`, `session_id`, `episode` it carries.
pub fn session_of(node: &Node) -> Option<(&'static str, &str)> {
    SESSION_KEYS
        .iter()
        .find_map(|&key| provenance_value(node, key).map(|v| (key, v)))
}

/// The signals of candidate `other` for the new node `new`.
pub fn pair_signals(new: &Node, other: &Node) -> PairSignals {
    NewNodePairs::of(new).signals(other)
}

/// What [`pair_signals`] reads of a new node, read once for all of its
/// candidates: its session, lowercased speaker and alias index.
pub struct NewNodePairs<'a> {
    new: &'a Node,
    session: Option<(&'static str, &'a str)>,
    speaker: String,
    names: WordStarts<'a>,
}

impl<'a> NewNodePairs<'a> {
    pub fn of(new: &'a Node) -> Self {
        Self {
            new,
            session: session_of(new),
            speaker: provenance_value(new, "speaker")
                .unwrap_or("")
                .to_lowercase(),
            names: WordStarts::of(&new.entities),
        }
    }

    /// The signals of candidate `other`.
    pub fn signals(&self, other: &Node) -> PairSignals {
        let same_session = match self.session {
            Some(s) => f64::from(u8::from(session_of(other) == Some(s))),
            None => 0.0,
        };
        let same_speaker = !self.speaker.is_empty()
            && self.speaker
                == provenance_value(other, "speaker")
                    .unwrap_or("")
                    .to_lowercase();
        let older = match (other.timestamp, self.new.timestamp) {
            (Some(a), Some(b)) => a <= b,
            _ => true,
        };
        PairSignals {
            same_session,
            same_speaker: f64::from(u8::from(same_speaker)),
            older: f64::from(u8::from(older)),
            alias: alias_between(&self.names, &WordStarts::of(&other.entities)),
        }
    }
}

/// The first `n` characters of `s` (all of it when shorter).
fn prefix_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// A side's ids of 3+ characters (first [`ALIAS_SCAN`], deduplicated) and,
/// for each three-character string, the ids with a word starting with it:
/// the longer id of a match always has a word that starts with the
/// shorter's first three characters, so only those pairs are compared.
struct WordStarts<'a> {
    ids: Vec<(&'a str, usize)>,
    starts: ShortKeyMap<&'a str, Vec<(&'a str, usize)>>,
}

impl<'a> WordStarts<'a> {
    fn of(ids: &'a [String]) -> Self {
        let mut seen = ShortKeySet::default();
        let mut kept = Vec::new();
        for id in ids.iter().take(ALIAS_SCAN) {
            let len = id.chars().count();
            if len >= 3 && seen.insert(id.as_str()) {
                kept.push((id.as_str(), len));
            }
        }
        let mut starts: ShortKeyMap<&str, Vec<(&str, usize)>> = ShortKeyMap::default();
        for &(id, len) in &kept {
            let mut grams: Vec<&str> = vec![prefix_chars(id, 3)];
            for (i, c) in id.char_indices() {
                if c == ' ' {
                    let rest = &id[i + 1..];
                    if rest.chars().count() >= 3 {
                        grams.push(prefix_chars(rest, 3));
                    }
                }
            }
            grams.sort_unstable();
            grams.dedup();
            for g in grams {
                starts.entry(g).or_default().push((id, len));
            }
        }
        WordStarts { ids: kept, starts }
    }
}

/// Best prefix/containment match between differing entity ids: a shorter id
/// (3+ characters) that starts the longer one, or one of its words, scores
/// the length ratio plus 0.3, at most 1; 0 when nothing matches.
pub fn alias_signal(a: &[String], b: &[String]) -> f64 {
    alias_between(&WordStarts::of(a), &WordStarts::of(b))
}

fn alias_between(a: &WordStarts<'_>, b: &WordStarts<'_>) -> f64 {
    let mut best = 0.0f64;
    for (shorts, longs) in [(&a.ids, &b.starts), (&b.ids, &a.starts)] {
        for &(short, short_len) in shorts.iter() {
            let Some(candidates) = longs.get(prefix_chars(short, 3)) else {
                continue;
            };
            for &(long, long_len) in candidates {
                if short_len < long_len
                    && (long.starts_with(short) || long.contains(&format!(" {short}")))
                {
                    best = best.max(short_len as f64 / long_len as f64 + 0.3);
                    if best >= 1.0 {
                        return 1.0;
                    }
                }
            }
        }
    }
    best.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn aliases_score_the_length_ratio() {
        assert_eq!(
            alias_signal(&ids(&["mel"]), &ids(&["melanie"])),
            3.0 / 7.0 + 0.3
        );
        assert_eq!(
            alias_signal(&ids(&["melanie"]), &ids(&["mel"])),
            3.0 / 7.0 + 0.3
        );
        // a word of the longer id
        assert_eq!(
            alias_signal(&ids(&["york"]), &ids(&["new york"])),
            4.0 / 8.0 + 0.3
        );
        // equal ids and short ids do not count
        assert_eq!(alias_signal(&ids(&["mel"]), &ids(&["mel"])), 0.0);
        assert_eq!(alias_signal(&ids(&["al"]), &ids(&["alan"])), 0.0);
        // inside a word is not a match
        assert_eq!(alias_signal(&ids(&["ork"]), &ids(&["new york"])), 0.0);
        assert_eq!(
            alias_signal(&ids(&["caro"]), &ids(&["caroline", "x"])),
            1.0f64.min(4.0 / 8.0 + 0.3)
        );
    }

    #[test]
    fn only_the_first_ids_are_read() {
        let mut many: Vec<String> = (0..ALIAS_SCAN).map(|i| format!("zz{i:03}")).collect();
        many.push("melanie".into());
        assert_eq!(alias_signal(&ids(&["mel"]), &many), 0.0);
    }
}
