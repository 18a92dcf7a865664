//! Python `re` patterns run at the core's speed, for Python code that keeps
//! its cue lexicons as patterns (the local controller's): each is compiled
//! as the grounding patterns are (`grounding::compile_python`: Python's
//! `\w`, `\s` and case-insensitive `i` kept exactly), with one difference: a
//! `\b` anywhere but at the very start is Python's full word boundary, so a
//! pattern may end in an optional group. A pattern may look behind only at
//! its very start (a leading `\b`). Python's `re` takes 40-150 ns a
//! character on a case-insensitive alternation; an agent's long turns made
//! that most of a write. `tests/test_cue_patterns.py` holds every pattern the
//! controller uses to `re` over every development text.
//!
//! The syntax is the subset the grounding patterns use (groups, classes,
//! `\w \s \d \b \W`, lazy and counted repetition, lookarounds). Every
//! pattern is matched ignoring case, as Python's `re.IGNORECASE` does.

use fancy_regex::Regex;

use crate::error::{Error, Result};
use crate::grounding::try_compile;
pub use crate::hashing::ShortKeySet;

/// Python's `\b` between any two characters, in Python syntax.
const BOUNDARY: &str = r"(?:(?<=\w)(?!\w)|(?<!\w)(?=\w))";

/// One pattern: its loose form (no word boundaries or lookarounds), which
/// runs on the regex crate's automata and finds every place a match can
/// start, and the exact pattern anchored there (the lookarounds run on
/// fancy-regex's backtracking VM, only where the loose form matched).
pub struct CuePattern {
    loose: Regex,
    anchored: Regex,
    /// The pattern starts with `\b` (checked by hand: no word character
    /// before the match; every alternative of a cue list starts with one).
    leading_boundary: bool,
}

impl CuePattern {
    pub fn new(py: &str) -> Result<Self> {
        let compile =
            |p: &str| try_compile(p).map_err(|e| Error::invalid(format!("pattern {py:?}: {e}")));
        let (leading_boundary, rest) = match py.strip_prefix(r"\b") {
            Some(rest) => (true, rest),
            None => (false, py),
        };
        Ok(Self {
            loose: compile(&crate::grounding::loose_form(py))?,
            anchored: compile(&format!("^(?:{})", replace_boundaries(rest)))?,
            leading_boundary,
        })
    }

    /// The next match at or after byte `pos`, as (start, end).
    fn next_match(&self, text: &str, mut pos: usize) -> Option<(usize, usize)> {
        while pos <= text.len() {
            // no backtracking limit: a search cannot fail at run time
            let start = self.loose.find_from_pos(text, pos).ok()??.start();
            let after = start + text[start..].chars().next().map_or(1, char::len_utf8);
            let boundary_ok = !self.leading_boundary
                || !text[..start]
                    .chars()
                    .next_back()
                    .is_some_and(crate::grounding::is_py_word);
            if boundary_ok {
                if let Ok(Some(m)) = self.anchored.find(&text[start..]) {
                    return Some((start, start + m.end()));
                }
            }
            pos = after;
        }
        None
    }

    fn matches<'a>(&'a self, text: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
        let mut pos = Some(0);
        std::iter::from_fn(move || {
            let (s, e) = self.next_match(text, pos?)?;
            // after an empty match, one character on (as `re.findall`)
            pos = Some(if e > s {
                e
            } else {
                e + text[e..].chars().next().map_or(1, char::len_utf8)
            });
            Some((s, e))
        })
    }

    /// How many non-overlapping matches `text` holds (`len(re.findall(...))`).
    pub fn count(&self, text: &str) -> usize {
        self.matches(text).count()
    }

    /// Whether `text` holds a match (`re.search(...) is not None`).
    pub fn found(&self, text: &str) -> bool {
        self.next_match(text, 0).is_some()
    }

    /// The matched strings, in order (`re.findall` of a pattern without groups).
    pub fn find_all<'t>(&self, text: &'t str) -> Vec<&'t str> {
        self.matches(text).map(|(s, e)| &text[s..e]).collect()
    }

    /// The distinct matches lower-cased (`str.lower`), without those in
    /// `skip`, a final `s` dropped from those longer than `plural_over`
    /// characters: a text's words as a set, read in one pass.
    pub fn word_set(
        &self,
        text: &str,
        skip: &ShortKeySet<String>,
        plural_over: usize,
    ) -> ShortKeySet<String> {
        let mut out = ShortKeySet::default();
        for (s, e) in self.matches(text) {
            let mut w = text[s..e].to_lowercase();
            if skip.contains(&w) {
                continue;
            }
            if w.ends_with('s') && w.chars().count() > plural_over {
                w.pop();
            }
            out.insert(w);
        }
        out
    }
}

/// `py` with every `\b` (outside classes) written as Python's full boundary.
fn replace_boundaries(py: &str) -> String {
    let mut out = String::with_capacity(py.len());
    let mut chars = py.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('b') if !in_class => out.push_str(BOUNDARY),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cue(p: &str) -> CuePattern {
        CuePattern::new(p).unwrap()
    }

    #[test]
    fn counts_whole_words_ignoring_case() {
        let p = cue(r"\b(?:now|nowadays|so)\b");
        assert_eq!(p.count("Now, nowadays so SO soon snow"), 4);
        assert!(p.found("and so on") && !p.found("soon"));
        assert_eq!(p.count(""), 0);
    }

    #[test]
    fn a_trailing_optional_group_keeps_pythons_boundary() {
        // Python: "increased " then \b needs a word character next
        let p = cue(r"\b(?:increased) (?:to|by)?\b");
        assert_eq!(p.count("increased to 5"), 1);
        assert_eq!(p.count("increased x"), 1); // "increased " + boundary before x
        assert_eq!(p.count("increased ."), 0);
    }

    #[test]
    fn find_all_returns_the_matches() {
        let p = cue(r"[\w'-]{3,}");
        assert_eq!(
            p.find_all("I can't go-to Paris, ok"),
            ["can't", "go-to", "Paris"]
        );
    }

    #[test]
    fn a_bad_pattern_is_an_error() {
        assert!(CuePattern::new(r"\b(?:unclosed").is_err());
    }
}
