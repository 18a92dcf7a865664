//! What relation judgment reads about a new node and one of its write
//! candidates, beside the discovery signals (`candidates::Signals`): whether
//! they share a session and a speaker, which is older, and how well their
//! names match as aliases ("mel" ~ "melanie"). Computed here so the write
//! path makes no per-candidate Python call.

use crate::hashing::{ShortKeyMap, ShortKeySet};

use crate::episode::session_from;
use crate::types::Node;

/// Each node's entity list is read only this far (speaker first, then in
/// order of appearance): every kept pair is compared, and a long text can
/// carry thousands of names.
pub const ALIAS_SCAN: usize = 64;

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

/// The session (or episode) a node names, as (key, value) (`session_from`).
pub fn session_of(node: &Node) -> Option<(&'static str, &str)> {
    session_from(&node.provenance, &node.scope)
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
            alias: self.names.alias_with(&other.entities),
        }
    }
}

/// The first `n` characters of `s` (all of it when shorter).
fn prefix_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// A side's ids of 3+ characters (first [`ALIAS_SCAN`], deduplicated),
/// indexed twice: by each three-character string a word of theirs starts
/// with, and by their own first three characters. The longer id of a match
/// always has a word that starts with the shorter's first three characters,
/// so only those pairs are compared, and the other side's ids are read
/// without indexing them (a new node meets many candidates).
struct WordStarts<'a> {
    starts: ShortKeyMap<&'a str, Vec<(&'a str, usize)>>,
    prefixes: ShortKeyMap<&'a str, Vec<(&'a str, usize)>>,
}

/// The first three characters of `id` and of each of its words (after a
/// space) of three or more.
fn word_grams(id: &str) -> impl Iterator<Item = &str> {
    std::iter::once(prefix_chars(id, 3)).chain(id.char_indices().filter_map(|(i, c)| {
        if c != ' ' {
            return None;
        }
        let rest = &id[i + 1..];
        rest.chars().nth(2).is_some().then(|| prefix_chars(rest, 3))
    }))
}

/// Whether `short` starts `long` or one of its words (after a space).
fn starts_a_word(long: &str, short: &str) -> bool {
    long.starts_with(short)
        || long
            .bytes()
            .enumerate()
            .any(|(i, b)| b == b' ' && long[i + 1..].starts_with(short))
}

/// The score of `short` as an alias of `long`: the length ratio plus 0.3
/// when it is shorter and starts `long` or one of its words, else 0.
fn alias_score(short: &str, short_len: usize, long: &str, long_len: usize) -> f64 {
    if short_len < long_len && starts_a_word(long, short) {
        short_len as f64 / long_len as f64 + 0.3
    } else {
        0.0
    }
}

impl<'a> WordStarts<'a> {
    fn of(ids: &'a [String]) -> Self {
        let mut seen = ShortKeySet::default();
        let mut starts: ShortKeyMap<&str, Vec<(&str, usize)>> = ShortKeyMap::default();
        let mut prefixes: ShortKeyMap<&str, Vec<(&str, usize)>> = ShortKeyMap::default();
        for id in ids.iter().take(ALIAS_SCAN) {
            let len = id.chars().count();
            if len < 3 || !seen.insert(id.as_str()) {
                continue;
            }
            let mut grams: Vec<&str> = word_grams(id).collect();
            grams.sort_unstable();
            grams.dedup();
            for g in grams {
                starts.entry(g).or_default().push((id, len));
            }
            prefixes
                .entry(prefix_chars(id, 3))
                .or_default()
                .push((id, len));
        }
        WordStarts { starts, prefixes }
    }

    /// The best alias match between these ids and `others` (see [`alias_signal`]).
    fn alias_with(&self, others: &[String]) -> f64 {
        let mut best = 0.0f64;
        // an id met twice only repeats a comparison (the best is kept)
        for other in others.iter().take(ALIAS_SCAN) {
            let len = other.chars().count();
            if len < 3 {
                continue;
            }
            // `other` the shorter: our ids with a word starting as it does
            let longs = self.starts.get(prefix_chars(other, 3));
            for &(long, long_len) in longs.into_iter().flatten() {
                best = best.max(alias_score(other, len, long, long_len));
            }
            // `other` the longer: our ids that start as one of its words
            for g in word_grams(other) {
                for &(short, short_len) in self.prefixes.get(g).into_iter().flatten() {
                    best = best.max(alias_score(short, short_len, other, len));
                }
            }
            if best >= 1.0 {
                return 1.0;
            }
        }
        best.min(1.0)
    }
}

/// Best prefix/containment match between differing entity ids: a shorter id
/// (3+ characters) that starts the longer one, or one of its words, scores
/// the length ratio plus 0.3, at most 1; 0 when nothing matches. Each side's
/// first [`ALIAS_SCAN`] ids are read.
pub fn alias_signal(a: &[String], b: &[String]) -> f64 {
    WordStarts::of(a).alias_with(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    /// `alias_signal` as its doc reads, over every pair of the two sides.
    fn alias_by_every_pair(a: &[String], b: &[String]) -> f64 {
        let side = |ids: &[String]| -> Vec<(String, usize)> {
            ids.iter()
                .take(ALIAS_SCAN)
                .map(|s| (s.clone(), s.chars().count()))
                .filter(|(_, n)| *n >= 3)
                .collect()
        };
        let (a, b) = (side(a), side(b));
        let mut best = 0.0f64;
        for (x, xn) in &a {
            for (y, yn) in &b {
                for (short, sn, long, ln) in [(x, xn, y, yn), (y, yn, x, xn)] {
                    if sn < ln
                        && (long.starts_with(short.as_str()) || long.contains(&format!(" {short}")))
                    {
                        best = best.max(*sn as f64 / *ln as f64 + 0.3);
                    }
                }
            }
        }
        best.min(1.0)
    }

    proptest::proptest! {
        /// The indexed reading equals comparing every pair, either side new.
        #[test]
        fn alias_signal_equals_every_pair(
            a in proptest::collection::vec("(ab|ba|a|b|é| ){1,9}", 0..6),
            b in proptest::collection::vec("(ab|ba|a|b|é| ){1,9}", 0..6),
        ) {
            proptest::prop_assert_eq!(alias_signal(&a, &b), alias_by_every_pair(&a, &b));
            proptest::prop_assert_eq!(alias_signal(&b, &a), alias_by_every_pair(&a, &b));
        }
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
