//! The few pieces of Python's `str` and `re` semantics that entity extraction
//! depends on, so that the Rust port splits and folds text exactly as the
//! Python did (ids are compared across the two, so one differing character
//! would split an entity in two).
//!
//! Character classes (`\w`, `\d`, `isalpha`) and the `casefold` exceptions
//! come from tables generated from Python (see `pyunicode.rs`); upper and
//! lower case use Rust's `char::is_uppercase`/`is_lowercase` and
//! `to_lowercase`, which follow the same Unicode properties of a newer
//! Unicode version: the few assigned characters whose properties changed
//! since are pinned to Python's answer, and characters that Python's
//! Unicode leaves unassigned may differ in case (never in class).

use super::pyunicode::{ALPHA, DECIMAL, WORD};
use super::pyunicode::{CASEFOLD_EXTRA, CLASS_RUNS, TITLECASE};

#[inline]
fn class(c: char) -> u8 {
    if c.is_ascii() {
        // the common case, without a table search
        return match c {
            'a'..='z' | 'A'..='Z' => WORD | ALPHA,
            '0'..='9' => WORD | DECIMAL,
            '_' => WORD,
            _ => 0,
        };
    }
    let cp = c as u32;
    // the first run starts at 0, so the index is at least 1
    let i = CLASS_RUNS.partition_point(|&(start, _)| start <= cp);
    CLASS_RUNS[i - 1].1
}

/// Python `re`'s `\w` on a `str` pattern: `str.isalnum()` or `_`.
#[inline]
pub fn is_word(c: char) -> bool {
    class(c) & WORD != 0
}

/// Python `re`'s `[^\W\d_]`: a word character that is neither a decimal
/// digit nor `_` (letters, and numerals such as `½` or `Ⅳ`).
#[inline]
pub fn is_word_start(c: char) -> bool {
    class(c) & (WORD | DECIMAL) == WORD && c != '_'
}

/// Python's `str.isalpha()` on one character (general category L*).
#[inline]
pub fn is_alpha(c: char) -> bool {
    class(c) & ALPHA != 0
}

/// Python's `str.isdecimal()` on one character (`re`'s `\d`).
#[inline]
pub fn is_decimal(c: char) -> bool {
    class(c) & DECIMAL != 0
}

/// Python's `str.isspace()` on one character (`re`'s `\s`, the separators
/// of `str.split()`): Unicode White_Space plus the ASCII information
/// separators U+001C..U+001F, which Python counts and Rust does not.
#[inline]
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_titlecase(c: char) -> bool {
    !c.is_ascii() && TITLECASE.binary_search(&c).is_ok()
}

/// Python's `str.isupper()` on one character.
#[inline]
pub fn char_is_upper(c: char) -> bool {
    c.is_uppercase()
}

/// Python's `str.islower()` on one character.
#[inline]
pub fn char_is_lower(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_lowercase();
    }
    // Unicode 15/16 changed the Lowercase property of these; keep Python
    // 3.11's (Unicode 14) answer so both sides agree
    match c {
        '\u{295}' => true,
        '\u{10fc}' | '\u{a7f2}'..='\u{a7f4}' | '\u{ab69}' => false,
        _ => c.is_lowercase(),
    }
}

/// Python's `str.isupper()`: at least one upper-case character and no
/// lower- or title-case one.
pub fn is_upper(s: &str) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if char_is_lower(c) || is_titlecase(c) {
            return false;
        }
        cased |= c.is_uppercase();
    }
    cased
}

/// Appends Python's `str.casefold()` of `s` to `out`.
pub fn casefold_into(s: &str, out: &mut String) {
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else if let Ok(i) = CASEFOLD_EXTRA.binary_search_by_key(&c, |&(k, _)| k) {
            out.push_str(CASEFOLD_EXTRA[i].1);
        } else {
            // per character: casefold has no final-sigma rule (str::to_lowercase has)
            out.extend(c.to_lowercase());
        }
    }
}

/// Python's `str.casefold()`.
pub fn casefold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    casefold_into(s, &mut out);
    out
}

/// Python's `str.strip()` (no argument).
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `str.split()` (no argument): runs of non-space characters.
pub fn split(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_space).filter(|w| !w.is_empty())
}
