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
use regex_automata::{meta, Input};

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
    /// Set for a pattern that is one character class repeated (`[\w'-]{3,}`,
    /// a text's words): its matches are the class's maximal runs of at least
    /// the minimum, found by one walk over the characters; the two regex
    /// searches a match otherwise costs were most of reading a long text's
    /// words.
    run: Option<ClassRun>,
    /// The loose form on the regex crate's automata. A pattern that starts
    /// with `\b` has an ASCII word character before none of its matches, so
    /// its loose form asks for that too: "i" or "so" then skips the letters
    /// inside words in the automaton rather than one search each.
    loose: meta::Regex,
    /// For a pattern whose only lookaround is `\b`: the whole pattern on the
    /// regex crate's automata with ASCII word boundaries, which are Python's
    /// on a text of ASCII characters only. Such a text (most are) is read in
    /// one pass, without a backtracking run at each place the loose form
    /// matched.
    ascii: Option<meta::Regex>,
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
        let run = match class_run_parts(py) {
            Some((class, min)) => Some(ClassRun::new(compile(&format!("^{class}$"))?, min)),
            None => None,
        };
        // a class run reads every text by hand already
        let ascii = (run.is_none() && crate::grounding::strip_lookaround(py) == py)
            .then(|| meta::Regex::new(&crate::grounding::translate_with(py, true)).ok())
            .flatten();
        Ok(Self {
            run,
            ascii,
            loose: {
                let loose = crate::grounding::loose_syntax(py);
                let loose = if leading_boundary {
                    format!(r"(?-u:\b{{start-half}}){loose}")
                } else {
                    loose
                };
                meta::Regex::new(&loose)
                    .map_err(|e| Error::invalid(format!("pattern {py:?}: {e}")))?
            },
            anchored: compile(&format!("^(?:{})", replace_boundaries(rest)))?,
            leading_boundary,
        })
    }

    /// The next match at or after byte `pos`, as (start, end).
    fn next_match(&self, text: &str, mut pos: usize) -> Option<(usize, usize)> {
        while pos <= text.len() {
            // no backtracking limit: a search cannot fail at run time
            let start = self.loose.find(Input::new(text).range(pos..))?.start();
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

    fn matches<'a>(&'a self, text: &'a str) -> Box<dyn Iterator<Item = (usize, usize)> + 'a> {
        if let Some(ascii) = &self.ascii {
            if text.is_ascii() {
                return Box::new(ascii.find_iter(text).map(|m| (m.start(), m.end())));
            }
        }
        let mut pos = Some(0);
        Box::new(std::iter::from_fn(move || {
            if let Some(run) = &self.run {
                let (s, e) = run.next_run(text, pos?)?;
                pos = Some(e);
                return Some((s, e));
            }
            let (s, e) = self.next_match(text, pos?)?;
            // after an empty match, one character on (as `re.findall`)
            pos = Some(if e > s {
                e
            } else {
                e + text[e..].chars().next().map_or(1, char::len_utf8)
            });
            Some((s, e))
        }))
    }

    /// How many non-overlapping matches `text` holds (`len(re.findall(...))`).
    pub fn count(&self, text: &str) -> usize {
        self.matches(text).count()
    }

    /// Whether `text` holds a match (`re.search(...) is not None`).
    pub fn found(&self, text: &str) -> bool {
        match (&self.run, &self.ascii) {
            (Some(run), _) => run.next_run(text, 0).is_some(),
            (None, Some(ascii)) if text.is_ascii() => ascii.is_match(text),
            (None, _) => self.next_match(text, 0).is_some(),
        }
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
        // one buffer for every match: a long text repeats most of its words
        let mut w = String::new();
        for (s, e) in self.matches(text) {
            let word = &text[s..e];
            w.clear();
            if word.is_ascii() {
                w.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
            } else {
                w.push_str(&word.to_lowercase());
            }
            if skip.contains(&w) {
                continue;
            }
            if w.ends_with('s') && w.chars().count() > plural_over {
                w.pop();
            }
            if !out.contains(&w) {
                out.insert(w.clone());
            }
        }
        out
    }
}

/// The text's first `max` sentences as Python's
/// `re.split(r"(?<=[.!?])\s+|\n+", text, maxsplit=max)[:max]` gives them: a
/// sentence ends at a run of whitespace after `.`, `!` or `?`, or at a run of
/// newlines; the pieces between are kept as they are (one may be empty, when
/// the text starts with a newline). One walk over the characters, stopping
/// after the last sentence asked for.
pub fn sentences(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut piece_start = 0;
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if out.len() == max {
            return out;
        }
        let after_stop = matches!(prev, Some('.' | '!' | '?'));
        let run: fn(char) -> bool = if after_stop && crate::grounding::is_py_space(c) {
            crate::grounding::is_py_space
        } else if c == '\n' {
            |c| c == '\n'
        } else {
            prev = Some(c);
            continue;
        };
        out.push(&text[piece_start..i]);
        let mut last = c;
        while let Some(&(_, next)) = chars.peek() {
            if !run(next) {
                break;
            }
            last = next;
            chars.next();
        }
        piece_start = chars.peek().map_or(text.len(), |&(j, _)| j);
        prev = Some(last);
    }
    if out.len() < max {
        out.push(&text[piece_start..]);
    }
    out
}

/// A character class repeated at least `min` times, matched by hand.
struct ClassRun {
    /// Membership of each ASCII character, read off the compiled class once.
    ascii: [bool; 128],
    /// The compiled class (anchored at both ends), asked for other characters.
    class: Regex,
    min: usize,
}

impl ClassRun {
    fn new(class: Regex, min: usize) -> Self {
        let mut ascii = [false; 128];
        for (b, member) in ascii.iter_mut().enumerate() {
            *member = class
                .is_match(&char::from(b as u8).to_string())
                .unwrap_or(false);
        }
        Self { ascii, class, min }
    }

    fn member(&self, c: char) -> bool {
        if c.is_ascii() {
            self.ascii[c as usize]
        } else {
            let mut buf = [0u8; 4];
            self.class
                .is_match(c.encode_utf8(&mut buf))
                .unwrap_or(false)
        }
    }

    /// The first maximal run of members with at least `min` characters at or
    /// after byte `pos`, as (start, end): the leftmost match of the greedy
    /// `[class]{min,}`, since a match can start neither inside a run nor in
    /// a shorter one.
    fn next_run(&self, text: &str, pos: usize) -> Option<(usize, usize)> {
        let mut start = None;
        let mut len = 0;
        for (i, c) in text[pos..].char_indices() {
            if self.member(c) {
                start.get_or_insert(pos + i);
                len += 1;
            } else {
                if len >= self.min {
                    return start.map(|s| (s, pos + i));
                }
                start = None;
                len = 0;
            }
        }
        (len >= self.min)
            .then(|| start.map(|s| (s, text.len())))
            .flatten()
    }
}

/// `(class, min)` for a pattern that is one character class repeated,
/// `[...]{min,}` or `[...]+` (`min` at least 1), with no other syntax.
fn class_run_parts(py: &str) -> Option<(&str, usize)> {
    let inner = py.strip_prefix('[')?;
    if inner.starts_with(['^', ']']) {
        // a negated class, or one whose first member is `]`: the general path
        return None;
    }
    // the class ends at the first unescaped `]` after its first character
    let mut chars = inner.char_indices();
    let mut end = None;
    let mut first = true;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => return None,
            ']' if !first => {
                end = Some(i);
                break;
            }
            _ => {}
        }
        first = false;
    }
    let end = end?;
    let class = &py[..end + 2];
    let rest = &inner[end + 1..];
    let min = if rest == "+" {
        1
    } else {
        rest.strip_prefix('{')?
            .strip_suffix(",}")?
            .parse::<usize>()
            .ok()
            .filter(|&m| m >= 1)?
    };
    Some((class, min))
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
    use proptest::strategy::Strategy as _;

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
    fn only_a_repeated_class_is_a_run() {
        assert_eq!(class_run_parts(r"[\w'-]{3,}"), Some((r"[\w'-]", 3)));
        assert_eq!(class_run_parts(r"[a\]b]+"), Some((r"[a\]b]", 1)));
        for other in [
            r"[a-z]{0,}",
            r"[a-z]{2,5}",
            r"[^a]+",
            r"[]a]+",
            r"[a-z]+x",
            r"\b[a]+",
            r"[a[b]+",
        ] {
            assert_eq!(class_run_parts(other), None, "{other}");
        }
    }

    proptest::proptest! {
        /// A repeated class read as runs gives the matches the two regex
        /// searches give.
        #[test]
        fn class_runs_match_the_regex_path(
            pattern in proptest::sample::select(vec![r"[\w'-]{3,}", r"[a-z]+", r"[\w]{1,}", r"[\d.]{2,}", r"[\s]{2,}", r"[K\w]{4,}"]),
            text in r"[a-zA-Z0-9 '\-._\n\u{e9}\u{212a}\u{130}\u{2019}\u{1f600}\u{660}\u{345}]{0,40}",
        ) {
            let run = cue(pattern);
            proptest::prop_assert!(run.run.is_some());
            let mut plain = cue(pattern);
            plain.run = None;
            proptest::prop_assert_eq!(run.find_all(&text), plain.find_all(&text));
            proptest::prop_assert_eq!(run.found(&text), plain.found(&text));
            let skip = ShortKeySet::default();
            proptest::prop_assert_eq!(run.word_set(&text, &skip, 3), plain.word_set(&text, &skip, 3));
        }
    }

    /// `sentences` by the regex it stands for: every match of the translated
    /// pattern, the pieces between them.
    fn sentences_by_regex(text: &str, max: usize) -> Vec<&str> {
        let re = crate::grounding::try_compile(r"(?<=[.!?])\s+|\n+").unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        for m in re.find_iter(text) {
            let m = m.unwrap();
            if out.len() == max {
                break;
            }
            out.push(&text[at..m.start()]);
            at = m.end();
        }
        if out.len() < max {
            out.push(&text[at..]);
        }
        out
    }

    #[test]
    fn sentences_end_after_stops_and_at_newlines() {
        assert_eq!(
            sentences("I moved. Now here!\n\nok", 24),
            ["I moved.", "Now here!", "ok"]
        );
        assert_eq!(sentences("\nx", 24), ["", "x"]);
        assert_eq!(sentences("a. b. c. d", 2), ["a.", "b."]);
        assert_eq!(sentences("", 3), [""]);
        assert!(sentences("a. b", 0).is_empty());
        // a newline run stops at other whitespace; after a stop every space counts
        assert_eq!(sentences("a\n \nb. \n c", 9), ["a", " ", "b.", "c"]);
    }

    proptest::proptest! {
        #[test]
        fn sentences_split_as_the_regex_does(
            text in r"[ab .!?\n\t\r\u{a0}\u{2028}\u{1c}\u{e9}]{0,40}",
            max in 0usize..6,
        ) {
            proptest::prop_assert_eq!(sentences(&text, max), sentences_by_regex(&text, max));
        }
    }

    proptest::proptest! {
        /// On ASCII texts the one-pass automaton with ASCII word boundaries
        /// gives the matches the loose search and the anchored run give.
        #[test]
        fn ascii_texts_match_as_the_general_path_does(
            pattern in proptest::sample::select(vec![
                r"\b(?:now|nowadays|so|i|i'm)\b",
                r"\b(?:increased) (?:to|by)?\b",
                r"\b(?:not .{1,40}? any ?more|don't|no longer)\b",
                r"\b(?:when .{1,12}, (?:do|use))\b",
                r"\b(?:my (?:\w+ )?(?:sister|job)|from [\w'-]+(?: [\w'-]+)? to)\b",
                r"\b(?:prefer\w*|fan of|can't stand)\b",
            ]),
            text in proptest::collection::vec(proptest::sample::select(vec![
                "now", "Nowadays", "so", "I", "i'm", "I'M", "increased", "to", "by", "not",
                "any", "more", "anymore", "don't", "no", "longer", "when", "it", "breaks,",
                "do", "use", "my", "big", "sister", "job", "from", "oat", "soy", "preferred",
                "fan", "of", "can't", "stand", " ", ".", ",", "\n", "-", "'", "_", "x2",
            ]), 0..24).prop_map(|w: Vec<&str>| w.concat()),
        ) {
            let fast = cue(pattern);
            proptest::prop_assert!(fast.ascii.is_some());
            let mut slow = cue(pattern);
            slow.ascii = None;
            proptest::prop_assert_eq!(fast.find_all(&text), slow.find_all(&text));
            proptest::prop_assert_eq!(fast.found(&text), slow.found(&text));
        }
    }

    #[test]
    fn a_bad_pattern_is_an_error() {
        assert!(CuePattern::new(r"\b(?:unclosed").is_err());
    }
}
