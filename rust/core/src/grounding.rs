//! Time-expression grounding without an LLM: find expressions such as
//! "yesterday", "two weekends ago", "since June" or "the summer of 2022" in a
//! text and resolve each to a `[start, end)` interval of Unix seconds (UTC)
//! against the text's observation time.
//!
//! It replaced a Python implementation and must return the same references
//! for every input: same order, same code point spans, same intervals and
//! precisions. `jevmem.temporal`'s docstring lists the supported patterns;
//! the Python it replaced is kept as the tests' oracle
//! (`tests/support/grounding_reference`), and this file keeps its pattern
//! table and resolvers one for one so the two can be compared side by side.
//!
//! The patterns need lookbehind and lookahead and Python's backtracking
//! (leftmost-first) match selection, so they run on `fancy_regex`, which
//! backtracks like Python's `re`. Python's character classes differ from the
//! Rust ones, so the pattern text is translated before compiling (see
//! [`translate`]): `\w` becomes letters, numbers and `_` (Python's
//! `str.isalnum`), `\s` Python's `str.isspace` set, `\d` the decimal digits of
//! the Unicode version Python 3.11 ships, and a literal `i` also matches the
//! dotless and dotted capital I, as Python's case-insensitive matching does.
//! Each pattern also has a lookaround-free form that proposes candidate
//! starts (see [`for_each_match`]), which keeps the search fast.
//!
//! Known differences from the Python, on exotic input only: letters and
//! numbers added to Unicode after 14.0 count as word characters here (the
//! regex crate's tables are newer than Python 3.11's), and an amount whose
//! unit is spelt with a long s ("2 dayſ ago"), for which Python reports a
//! precision outside `PRECISIONS`, is dropped.

use std::sync::LazyLock;

use fancy_regex::{Captures, Regex, RegexBuilder, RegexInput};
use regex_automata::{meta, Input, MatchKind, PatternID, PatternSet};

use crate::calendar::{
    add_months, day_iv, days_in_month, month_iv, nearest_year, season_iv, week_iv, year_iv, Date,
    DAY,
};
use crate::derived::{precision_code, TimeRef, PRECISIONS};
use crate::error::{Error, Result};

/// One grounded time expression: `[start, end)` in Unix seconds (UTC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroundedRef {
    /// Code point offsets of the expression in the grounded text (Python
    /// `str` indices).
    pub span: (usize, usize),
    /// The expression: the text's code points `span.0..span.1`.
    pub text: String,
    pub start: i64,
    pub end: i64,
    /// One of [`PRECISIONS`].
    pub precision: &'static str,
    /// Whether the interval depends on the observation time.
    pub relative: bool,
    /// For `precision == "range"`, the precision of the range's start; else "".
    pub anchor_precision: &'static str,
}

impl From<&GroundedRef> for TimeRef {
    fn from(r: &GroundedRef) -> TimeRef {
        // Both precisions come from `PRECISIONS`, so the lookups cannot fail.
        let code = |p: &str| precision_code(p).expect("a grounding precision is in PRECISIONS");
        TimeRef {
            text: r.text.clone(),
            start: r.start,
            end: r.end,
            precision: code(r.precision),
            relative: r.relative,
            span: (r.span.0 as u64, r.span.1 as u64),
            anchor_precision: (!r.anchor_precision.is_empty()).then(|| code(r.anchor_precision)),
        }
    }
}

// ------------------------------------------------------------------ classes

/// Python's `str.isspace` characters (`\s` of a `str` pattern).
const SPACE_CLASS: &str =
    r"\t-\r\x1C-\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}";
/// Python's `\w` (`str.isalnum` plus `_`): the general categories L and N.
const WORD_CLASS: &str = r"\p{L}\p{N}_";

/// The zero of every run of ten decimal digits (general category Nd) in
/// Unicode 14.0, the version of Python 3.11's `unicodedata`; `\d` and `int()`
/// in the reference accept exactly these.
const DIGIT_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

/// The value of a decimal digit, if `c` is one.
fn digit_value(c: char) -> Option<i64> {
    let c = c as u32;
    let i = DIGIT_ZEROS.partition_point(|&z| z <= c);
    let zero = *DIGIT_ZEROS.get(i.checked_sub(1)?)?;
    (c - zero < 10).then(|| i64::from(c - zero))
}

/// Python's `int(s)` for a string of decimal digits (what `\d` matched).
fn parse_int(s: &str) -> Option<i64> {
    let mut n: i64 = 0;
    let mut any = false;
    for c in s.chars() {
        n = n.checked_mul(10)?.checked_add(digit_value(c)?)?;
        any = true;
    }
    any.then_some(n)
}

pub(crate) fn is_py_space(c: char) -> bool {
    matches!(c, '\t'..='\r' | '\x1c'..='\x20' | '\u{85}' | '\u{a0}' | '\u{1680}'
        | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Python's `\w`: `str.isalnum()` (letters and numbers) or `_`.
pub(crate) fn is_py_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    // The regex engine's tables, so that this agrees with the translated patterns.
    static WORD: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("^[{WORD_CLASS}]$")).expect("a valid class"));
    let mut buf = [0u8; 4];
    WORD.is_match(c.encode_utf8(&mut buf)).unwrap_or(false)
}

/// Python's `" ".join(s.split())`.
fn squash(s: &str) -> String {
    s.split(is_py_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Python's `s.lower()`.
fn lower(s: &str) -> String {
    s.to_lowercase()
}

/// Python's `s.rstrip(".")`.
fn rstrip_dots(s: &str) -> &str {
    s.trim_end_matches('.')
}

/// Rewrite a Python `re` pattern (the subset the table uses) into an
/// equivalent `fancy_regex` pattern under `(?i)`.
///
/// Character classes are compiled case-sensitively, because Python tests
/// `\w` and `\s` on the character itself while Rust's case folding would add
/// characters (U+0345 folds to a Greek letter). Python's case-insensitive
/// `i` also matches U+0130 and U+0131, which simple case folding does not.
/// A scoped `(?-i:...)` group (no `i` inside) stays case-sensitive.
fn translate(py: &str) -> String {
    translate_with(py, false)
}

/// `translate`, with every `\b` outside a class written as the ASCII word
/// boundary `(?-u:\b)` when `ascii_boundaries`: Python's `\b` on a text of
/// ASCII characters only, which the regex crate's automata run (they have no
/// lookaround).
pub(crate) fn translate_with(py: &str, ascii_boundaries: bool) -> String {
    let mut out = String::from("(?i)");
    let chars: Vec<char> = py.chars().collect();
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let e = chars[i + 1];
                i += 2;
                let class = match e {
                    'w' => Some(WORD_CLASS.to_string()),
                    's' => Some(SPACE_CLASS.to_string()),
                    'd' => Some(digit_class()),
                    _ => None,
                };
                if let Some(class) = class {
                    if in_class {
                        out.push_str(&class);
                    } else {
                        out.push_str(&format!("(?-i:[{class}])"));
                    }
                } else if e == 'b' && ascii_boundaries && !in_class {
                    out.push_str(r"(?-u:\b)");
                } else if e == 'b' && i == 2 {
                    // At the start of a pattern, before a word character
                    // ("\bwhen"): no word character before.
                    out.push_str(&format!("(?-i:(?<![{WORD_CLASS}]))"));
                } else if e == 'b' {
                    // Elsewhere only right after a word character ("am\b").
                    out.push_str(&format!("(?-i:(?![{WORD_CLASS}]))"));
                } else if e == 'W' && !in_class {
                    out.push_str(&format!("(?-i:[^{WORD_CLASS}])"));
                } else if e == 'u' {
                    let hex: String = chars[i..i + 4].iter().collect();
                    i += 4;
                    out.push_str(&format!("\\x{{{hex}}}"));
                } else {
                    out.push('\\');
                    out.push(e);
                }
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push_str("(?-i:[");
            }
            ']' if in_class => {
                in_class = false;
                out.push_str("])");
            }
            // a case-sensitive group, as Python's scoped flag reads it
            '(' if chars[i..].starts_with(&['(', '?', '-', 'i', ':']) => {
                out.push_str("(?-i:");
                i += 5;
                continue;
            }
            '(' if chars[i..].starts_with(&['(', '?', 'P', '<']) => {
                while chars[i] != '>' {
                    out.push(chars[i]);
                    i += 1;
                }
                out.push('>');
            }
            'i' | 'I' if !in_class => out.push_str("(?-i:[iI\\x{130}\\x{131}])"),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// `py` without its lookbehinds and lookaheads (balanced `(?<!`, `(?<=`,
/// `(?!` and `(?=` groups).
pub(crate) fn strip_lookaround(py: &str) -> String {
    let chars: Vec<char> = py.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let look = [
            &['(', '?', '<', '!'][..],
            &['(', '?', '<', '='],
            &['(', '?', '!'],
            &['(', '?', '='],
        ]
        .iter()
        .any(|p| rest.starts_with(p));
        if !look {
            if chars[i] == '\\' {
                out.push(chars[i]);
                i += 1;
            }
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // skip to the matching parenthesis
        let (mut depth, mut in_class) = (0, false);
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 1,
                '[' if !in_class => in_class = true,
                ']' if in_class => in_class = false,
                '(' if !in_class => depth += 1,
                ')' if !in_class => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The matches of `p` in `piece`, as Python's `finditer` gives them: the
/// loose pattern proposes each candidate start, the exact one is tried there.
fn for_each_match<'t>(p: &Pattern, piece: &'t str, mut f: impl FnMut(&Captures<'t, str>)) {
    let mut pos = 0;
    while pos <= piece.len() {
        let Ok(Some(candidate)) = p.loose.find_from_pos(piece, pos) else {
            return;
        };
        let s = candidate.start();
        let input = RegexInput::new(piece).from_pos(s).anchored(true);
        let step = piece[s..].chars().next().map_or(1, char::len_utf8);
        match p.re.captures_input(input) {
            Ok(Some(caps)) => {
                let e = caps.get(0).map_or(s, |m| m.end());
                f(&caps);
                pos = if e > s { e } else { s + step };
            }
            _ => pos = s + step,
        }
    }
}

fn digit_class() -> String {
    DIGIT_ZEROS
        .iter()
        .map(|z| format!("\\x{{{:x}}}-\\x{{{:x}}}", z, z + 9))
        .collect()
}

// ------------------------------------------------------------------ vocabulary

const MONTH_RE: &str = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?";
const MONTH_FULL_RE: &str = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan\.|feb\.|mar\.|apr\.|aug\.|sept\.|sep\.|oct\.|nov\.|dec\.|jan|feb|aug|sept|oct|nov|dec)";
const WEEKDAY_ALTS: &str = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|tues|tue|thurs|thur|thu|fri|mon|wed|sat|sun)\.?";
const NUM_WORD_RE: &str = r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)";
const UNIT_RE: &str = r"(?P<unit>days?|weeks?|weekends?|months?|years?)";
const B: &str = r"(?<![\w-])";
const E: &str = r"(?![\w-])";
const YEAR: &str = r"(?P<y>(?:19|20)\d\d)";
/// A plural noun: a number before one counts things ("2000 dollars", "1950
/// people", "march 5 miles"), it names no year or day; after "in", "since"
/// and the like a year stays one ("In 2019 prices rose"). Words ending in "s"
/// that are no plural ("in 2019 is", "since 2016 has") are left out.
const PLURAL: &str = r"(?:people|men|women|children|feet|(?!(?:is|as|us|was|has|his|hers|its|this|thus|plus|yes|does|goes|less|unless|across|always|perhaps|sometimes|whereas|besides|towards|afterwards|nowadays|ours|yours|theirs|news)(?![\w-]))\w*s)(?![\w-])";
/// Words that make the number after them a count ("all 3 may attend",
/// "the 4 march together"): with the modal "may" or the verb "march" and a
/// word after it, such a number is no day.
const QUANTIFIERS: [&str; 11] = [
    "all", "these", "those", "the", "only", "both", "some", "any", "many", "other", "just",
];

/// A year after a written date ("8 May 1850", "May 2024", "the first week
/// of May 1850"), in a group named `name`: 1000 to 2099; one before 1900
/// followed by a plural noun is a count ("on May 5, 1500 people came"; "by
/// August 2024 requires" keeps its year). Python syntax.
fn date_year(name: &str) -> String {
    format!(r"(?P<{name}>{})", date_year_re())
}

/// [`date_year`] without its group.
fn date_year_re() -> String {
    format!(r"(?:(?:19|20)\d\d|1[0-8]\d\d(?!\s+{PLURAL}))")
}

/// Where a number before "may"/"march" is no day: not after a quantifier,
/// or not followed by the modal's or verb's next word (Python syntax).
fn day_before_month_guard() -> String {
    let not_after: String = QUANTIFIERS
        .iter()
        .map(|q| format!(r"(?<!(?<![\w-]){q}\s)"))
        .collect();
    // ... unless the month is written with its capital ("the 3 May deadline")
    format!(
        r"(?:{not_after}|(?!\d{{1,2}}\s+(?:may|march)\s+(?!\d)\w)|(?=\d{{1,2}}\s+(?-i:May|March)(?![\w-])))"
    )
}

/// A range of months: "between March and May 2023", "from April to July",
/// "February - March 2024" (without "between" or "from", only before a
/// year). Python syntax.
fn month_range_re() -> String {
    let (ya, ya2, yb) = (date_year("ya"), date_year("ya2"), date_year("yb"));
    let any_y = date_year_re();
    format!(
        r"(?:(?:between|from)\s+(?:the\s+months?\s+of\s+)?(?P<ma>{MONTH_FULL_RE})(?:,?\s+{ya})?\s+(?:and|to|through|till|until)\s+(?P<mb>{MONTH_FULL_RE})|(?P<ma2>{MONTH_FULL_RE})(?:,?\s+{ya2})?\s*(?:-|\u2013|\u2014|to|through)\s*(?P<mb2>{MONTH_FULL_RE})(?=,?\s+{any_y}(?![\w-])))(?:,?\s+{yb})?(?![\w-]|\s*(?::\d|%)|[.,]\d)"
    )
}

/// An ordinal week, weekend or weekday of a named month: "the first week
/// of May", "the last weekend in June 2023", "the second Tuesday of March".
/// Python syntax.
fn week_of_month_re() -> String {
    let y = date_year("y");
    format!(
        r"(?:the\s+)?(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|last|final)\s+(?P<unit>week|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+(?:of|in)\s+(?P<mon>{MONTH_FULL_RE})(?:,?\s+{y})?(?![\w-]|\s*(?::\d|%)|[.,]\d)"
    )
}

fn amount_re() -> String {
    format!(
        r"(?P<n>\d{{1,3}}|{NUM_WORD_RE}|an?|a\s+couple(?:\s+of)?|a\s+few|couple(?:\s+of)?|few|several)"
    )
}

/// The resolver of each pattern, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    SimpleDay,
    PartOfDay,
    Weekday,
    AnaphoricUnit,
    RelUnit,
    Ago,
    OtherDay,
    Window,
    IsoDay,
    DayMonth,
    Month,
    /// "in <Month>": `resolve_month` on a pattern with an `x` group.
    InMonth,
    MonthRange,
    /// "the first week of May", "the last weekend in June", "the second
    /// Tuesday of March".
    WeekOfMonth,
    Year,
    Decade,
    Season,
    Holiday,
}

struct Pattern {
    re: Regex,
    /// `re` without its lookarounds: it matches wherever `re` does (and
    /// more), and without lookaround it runs on the regex crate's automata,
    /// so it finds candidate starts far faster than `re` scans for them.
    loose: Regex,
    kind: Kind,
    /// Whether the pattern has an `x` group whose span is the reference's.
    has_x: bool,
}

/// The Python table's patterns, in its order (the order breaks ties).
fn python_patterns() -> Vec<(String, Kind)> {
    let amount = amount_re();
    let guard = day_before_month_guard();
    let (date_y, date_y2) = (date_year("y"), date_year("y2"));
    vec![
        (
            format!(
                r"{B}(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|the\s+day\s+before|the\s+day\s+after|yesterday|today|tomorrow){E}"
            ),
            Kind::SimpleDay,
        ),
        (
            format!(
                r"{B}(?:(?P<rel>this|yesterday|tomorrow|last)\s+(?P<part>morning|afternoon|evening|night)|(?P<rel_t>to)(?P<part_t>night)){E}"
            ),
            Kind::PartOfDay,
        ),
        (
            format!(
                r"{B}(?:(?P<rel>last|this\s+past|this\s+coming|this|next|coming)\s+(?P<wd>{WEEKDAY_ALTS}|the\s+(?P<wdx>{WEEKDAY_ALTS}\s+(?P<rel2>before|after)){E}"
            ),
            Kind::Weekday,
        ),
        (
            format!(
                r"{B}(?:the\s+)?(?P<unit>week|weekend|month|year)\s+(?P<dir>before|after)(?P<last>\s+last)?{E}"
            ),
            Kind::AnaphoricUnit,
        ),
        (
            format!(
                r"{B}(?:(?P<rel>last|this\s+past|this\s+coming|this|next|the\s+previous|the\s+following|over\s+the)\s+(?P<unit>week|weekend|month|year)){E}"
            ),
            Kind::RelUnit,
        ),
        (
            format!(
                r"{B}(?:(?P<fut>in)\s+)?{amount}\s+{UNIT_RE}(?:\s+(?P<ago>ago|back)|(?P<fromnow>\s+from\s+(?:now|(?P<anchor>today|tomorrow|yesterday))))?{E}"
            ),
            Kind::Ago,
        ),
        (format!(r"{B}the\s+other\s+day{E}"), Kind::OtherDay),
        (
            format!(
                r"{B}(?:the\s+)?(?P<dir>past|last|next|coming)\s+{amount}\s+(?P<unit>days|weeks|weekends|months|years){E}"
            ),
            Kind::Window,
        ),
        (
            format!(
                r"{B}the\s+(?P<dir>past|coming)\s+(?P<unit>days|weeks|months|years|week|month|year){E}"
            ),
            Kind::Window,
        ),
        (
            format!(
                r"{B}(?P<iso>(?P<y>\d{{4}})[-/](?P<mo>\d{{1,2}})[-/](?P<d>\d{{1,2}}))(?![\w-]|:\d)"
            ),
            Kind::IsoDay,
        ),
        (
            format!(
                r"{B}(?:{guard}(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<mon>{MONTH_RE})|(?!(?:may|march)\s+\d{{1,2}}\s+{PLURAL})(?P<mon2>{MONTH_RE})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?!\s*:|\d))(?:,?\s+{date_y})?(?![\w-])"
            ),
            Kind::DayMonth,
        ),
        (
            format!(
                r"{B}(?:(?P<mod>early|mid|late)[-\s]+(?:in\s+)?(?P<mon>{MONTH_RE})(?:,?\s+(?:of\s+)?{date_y})?|(?P<mon2>{MONTH_RE})(?:,?\s+(?:of\s+)?{date_y2})|(?P<rel>last|this|next)\s+(?P<mon3>{MONTH_FULL_RE})){E}"
            ),
            Kind::Month,
        ),
        (
            format!(
                r"{B}(?:in|during|by|until|till|through|throughout|from|since|around|before|after|of)\s+(?:the\s+month\s+of\s+)?(?P<x>{MONTH_FULL_RE})(?![\w-]|\s+\d)"
            ),
            Kind::InMonth,
        ),
        (format!(r"{B}{}", month_range_re()), Kind::MonthRange),
        (format!(r"{B}{}", week_of_month_re()), Kind::WeekOfMonth),
        (
            format!(
                r"{B}(?:(?:in|during|since|until|till|before|after|back\s+in|the\s+year|between|(?<=between\s(?:19|20)\d\d\s)and|(?<=from\s(?:19|20)\d\d\s)(?:to|through))\s+|(?:of|by|from|around|circa)\s+(?!(?:19|20)\d\d\s+{PLURAL}))(?P<x>{YEAR})(?![\w-]|\s*(?::\d|%|am\b|pm\b)|[.,]\d)"
            ),
            Kind::Year,
        ),
        (
            format!(r"{B}the\s+(?P<dec>(?:19|20)\d0|\d0)(?:'?s){E}"),
            Kind::Decade,
        ),
        (
            format!(
                r"{B}(?:(?P<prep>in|during|over|through|throughout|since|for)\s+)?(?P<x>(?:(?P<rel>last|this\s+past|this|next|past)\s+)?(?:the\s+)?(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?{YEAR})?){E}"
            ),
            Kind::Season,
        ),
        (
            format!(
                r"{B}(?:(?:on|at|for|over|during|since|until|till|before|after)\s+)?(?P<x>(?:(?P<rel>last|this|next)\s+)?(?P<hol>christmas\s+eve|christmas\s+day|christmas|xmas|new\s+year['\u2019]?s\s+eve|new\s+year['\u2019]?s\s+day|halloween|valentine['\u2019]?s\s+day|independence\s+day|the\s+fourth\s+of\s+july|thanksgiving)(?:,?\s+{YEAR})?){E}"
            ),
            Kind::Holiday,
        ),
    ]
}

const TRIGGER_PY: &str = r"\d|today|yesterday|tomorrow|night|morning|afternoon|evening|day|week|mon|tue|wed|thu|fri|sat|sun|month|year|ago|back|now|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|spring|summer|autumn|fall|winter|christmas|xmas|halloween|thanksgiving|0s";

/// A pattern in Python's `re` syntax (the subset `translate` reads: `\b`
/// at the start or right after a word character, `\w`, `\W`, `\s`, `\d`)
/// compiled to match as Python's `re.IGNORECASE` does.
pub(crate) fn compile_python(py: &str) -> Regex {
    compile(py)
}

/// `py` without its word boundaries and lookarounds, in the regex crates'
/// syntax: it matches wherever `py` does (and more) and any regex engine
/// runs it, so it rules most texts out fast.
pub(crate) fn loose_syntax(py: &str) -> String {
    translate(&loose_form(py))
}

/// `py` without its word boundaries and lookarounds (Python syntax).
pub(crate) fn loose_form(py: &str) -> String {
    strip_lookaround(&py.replace(r"\b", ""))
}

fn compile(py: &str) -> Regex {
    try_compile(py).expect("the grounding patterns compile")
}

/// `compile_python`, with an error for a pattern the regex engine refuses.
pub(crate) fn try_compile(py: &str) -> std::result::Result<Regex, String> {
    RegexBuilder::new(&translate(py))
        // The patterns have no nested repetition, so the work per start
        // position is bounded; the default limit counts a whole search and a
        // long piece could reach it.
        .backtrack_limit(usize::MAX)
        .build()
        .map_err(|e| e.to_string())
}

/// The grounding patterns, and their loose forms (`loose_syntax`: no word
/// boundaries, no lookaround) in one multi-pattern search in the same
/// order: one pass over a piece rules out the patterns that cannot match
/// anywhere in it, where each pattern's own search cost a pass each.
struct Grounders {
    patterns: Vec<Pattern>,
    scan: meta::Regex,
}

static PATTERNS: LazyLock<Grounders> = LazyLock::new(|| {
    let sources = python_patterns();
    let loose: Vec<String> = sources.iter().map(|(py, _)| loose_syntax(py)).collect();
    Grounders {
        scan: meta::Builder::new()
            // every pattern that matches anywhere, as a regex set reports them
            .configure(meta::Config::new().match_kind(MatchKind::All))
            .build_many(&loose)
            .expect("the grounding patterns' loose forms compile"),
        patterns: sources
            .into_iter()
            .map(|(py, kind)| Pattern {
                has_x: py.contains("(?P<x>"),
                re: compile(&py),
                loose: compile(&strip_lookaround(&py)),
                kind,
            })
            .collect(),
    }
});
static TRIGGER: LazyLock<Regex> = LazyLock::new(|| compile(TRIGGER_PY));

/// Long texts are grounded in pieces of about this many code points, cut
/// after a line break (else a space), so the cost stays linear in the length.
/// How far past its cut a piece is read (longer than any time expression).
const PIECE_OVERLAP: usize = 64;
const PIECE: usize = 16_384;

/// The earliest and latest supported observation days (a margin of 400 days
/// inside years 1..=9999 keeps "last year" and the like in range).
const MIN_TS: i64 = -62_135_596_800 + 400 * DAY;
const MAX_TS: i64 = 253_402_214_400 - 400 * DAY;

// ------------------------------------------------------------------ resolvers

type Resolved = (i64, i64, &'static str, bool);

/// The groups of one match (a name the pattern lacks reads as absent).
struct M<'a, 't> {
    caps: &'a Captures<'t, str>,
    has_x: bool,
}

impl<'t> M<'_, 't> {
    fn g(&self, name: &str) -> Option<&'t str> {
        self.caps.name(name).map(|m| m.as_str())
    }
    fn first(&self, names: &[&str]) -> Option<&'t str> {
        names.iter().find_map(|n| self.g(n))
    }
    fn all(&self) -> &'t str {
        self.caps.get(0).map_or("", |m| m.as_str())
    }
}

fn precision(name: &str) -> Option<&'static str> {
    PRECISIONS.iter().copied().find(|p| *p == name)
}

fn month_num(raw: &str) -> Option<i64> {
    Some(match lower(rstrip_dots(raw)).as_str() {
        "january" | "jan" => 1,
        "february" | "feb" => 2,
        "march" | "mar" => 3,
        "april" | "apr" => 4,
        "may" => 5,
        "june" | "jun" => 6,
        "july" | "jul" => 7,
        "august" | "aug" => 8,
        "september" | "sep" | "sept" => 9,
        "october" | "oct" => 10,
        "november" | "nov" => 11,
        "december" | "dec" => 12,
        _ => return None,
    })
}

fn weekday_num(key: &str) -> Option<i64> {
    Some(match key {
        "monday" | "mon" => 0,
        "tuesday" | "tues" | "tue" => 1,
        "wednesday" | "wed" => 2,
        "thursday" | "thurs" | "thur" | "thu" => 3,
        "friday" | "fri" => 4,
        "saturday" | "sat" => 5,
        "sunday" | "sun" => 6,
        _ => return None,
    })
}

fn units_value(w: &str) -> i64 {
    match w {
        "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        "thirteen" => 13,
        "fourteen" => 14,
        "fifteen" => 15,
        "sixteen" => 16,
        "seventeen" => 17,
        "eighteen" => 18,
        "nineteen" => 19,
        _ => 0,
    }
}

fn tens_value(w: &str) -> i64 {
    match w {
        "twenty" => 20,
        "thirty" => 30,
        "forty" => 40,
        "fifty" => 50,
        "sixty" => 60,
        "seventy" => 70,
        "eighty" => 80,
        "ninety" => 90,
        _ => 0,
    }
}

/// `(lo, hi)` of an amount ("3", "twenty-five", "a few"); exact amounts have lo == hi.
fn parse_amount(raw: &str) -> Option<(i64, i64)> {
    let s = squash(&lower(raw).replace('-', " "));
    if !s.is_empty() && s.chars().all(|c| digit_value(c).is_some()) {
        let n = parse_int(&s)?;
        return Some((n, n));
    }
    if s == "a" || s == "an" {
        return Some((1, 1));
    }
    for (key, rng) in [("couple", (2, 3)), ("few", (2, 5)), ("several", (3, 7))] {
        if s.contains(key) {
            return Some(rng);
        }
    }
    let total = s.split(' ').map(|p| tens_value(p) + units_value(p)).sum();
    Some((total, total))
}

fn resolve_simple_day(m: &M, obs: Date) -> Option<Resolved> {
    let offset = match squash(&lower(m.all())).as_str() {
        "today" => 0,
        "yesterday" => -1,
        "tomorrow" => 1,
        "the day before yesterday" => -2,
        "the day after tomorrow" => 2,
        "the day before" => -1,
        "the day after" => 1,
        _ => return None,
    };
    let (s, e) = day_iv(obs.add_days(offset)?);
    Some((s, e, "day", true))
}

fn resolve_part_of_day(m: &M, obs: Date) -> Option<Resolved> {
    let rel = lower(m.first(&["rel", "rel_t"]).unwrap_or(""));
    let part = lower(m.first(&["part", "part_t"]).unwrap_or(""));
    let base = if rel == "last" {
        if part != "night" {
            return None;
        }
        obs.add_days(-1)?
    } else {
        obs.add_days(match rel.as_str() {
            "yesterday" => -1,
            "tomorrow" => 1,
            _ => 0,
        })?
    };
    let (h0, h1) = match part.as_str() {
        "morning" => (6, 12),
        "afternoon" => (12, 18),
        "evening" => (18, 24),
        "night" => (18, 30),
        _ => return None,
    };
    let t = base.start();
    Some((t + h0 * 3600, t + h1 * 3600, "part_of_day", true))
}

fn resolve_weekday(m: &M, obs: Date) -> Option<Resolved> {
    let raw = m.first(&["wd", "wdx"]).unwrap_or("");
    let stem = rstrip_dots(raw);
    let key = lower(stem);
    let ambiguous = matches!(key.as_str(), "wed" | "sat" | "sun" | "mon");
    if ambiguous && stem.chars().count() == 3 && !raw.chars().next().is_some_and(char::is_uppercase)
    {
        return None;
    }
    let wd = weekday_num(&key)?;
    let rel = squash(&lower(m.g("rel").or(m.g("rel2")).unwrap_or("")));
    let cur = obs.weekday();
    let delta = match rel.as_str() {
        "last" | "this past" | "past" | "before" => {
            let d = (cur - wd).rem_euclid(7);
            -(if d == 0 { 7 } else { d })
        }
        "next" | "after" | "this coming" | "coming" => {
            let d = (wd - cur).rem_euclid(7);
            if d == 0 {
                7
            } else {
                d
            }
        }
        _ => wd - cur,
    };
    let (s, e) = day_iv(obs.add_days(delta)?);
    Some((s, e, "day", true))
}

fn resolve_rel_unit(m: &M, obs: Date) -> Option<Resolved> {
    let rel = squash(&lower(m.g("rel")?));
    let unit = lower(m.g("unit")?);
    let step = match rel.as_str() {
        "last" | "this past" | "past" | "the previous" | "previous" => -1,
        "this" | "over the" => 0,
        "this coming" => i64::from(unit != "weekend" || obs.weekday() >= 5),
        "next" | "the following" | "following" => 1,
        _ => return None,
    };
    let past_weekend = matches!(rel.as_str(), "this past" | "past" | "over the");
    shift_unit(obs, &unit, step, past_weekend)
}

fn shift_unit(obs: Date, unit: &str, step: i64, past_weekend: bool) -> Option<Resolved> {
    match unit {
        "week" => {
            let (s, e) = week_iv(obs.add_days(7 * step)?)?;
            Some((s, e, "week", true))
        }
        "weekend" => {
            let step = if past_weekend {
                if obs.weekday() >= 5 {
                    0
                } else {
                    -1
                }
            } else {
                step
            };
            let t = obs.monday()?.add_days(5 + 7 * step)?.start();
            Some((t, t + 2 * DAY, "weekend", true))
        }
        "month" => {
            let (y, mo) = add_months(obs.year, obs.month, step);
            let (s, e) = month_iv(y, mo)?;
            Some((s, e, "month", true))
        }
        "day" => {
            let (s, e) = day_iv(obs.add_days(step)?);
            Some((s, e, "day", true))
        }
        _ => {
            let (s, e) = year_iv(obs.year + step)?;
            Some((s, e, "year", true))
        }
    }
}

fn resolve_anaphoric_unit(m: &M, obs: Date) -> Option<Resolved> {
    let unit = lower(m.g("unit")?);
    let mut step = if lower(m.g("dir")?) == "before" {
        -1
    } else {
        1
    };
    if m.g("last").is_some_and(|s| !s.is_empty()) {
        step = -2;
    }
    shift_unit(obs, &unit, step, false)
}

/// The interval `n` units from D (n < 0: in the past).
fn unit_interval(obs: Date, unit: &str, n: i64) -> Option<(i64, i64)> {
    match unit {
        "day" => Some(day_iv(obs.add_days(n)?)),
        "week" => week_iv(obs.add_days(n.checked_mul(7)?)?),
        "weekend" => {
            let t = obs.monday()?.add_days(7 * n + 5)?.start();
            Some((t, t + 2 * DAY))
        }
        "month" => {
            let (y, mo) = add_months(obs.year, obs.month, n);
            month_iv(y, mo)
        }
        _ => year_iv(obs.year.checked_add(n)?),
    }
}

fn resolve_ago(m: &M, obs: Date) -> Option<Resolved> {
    let some = |s: Option<&str>| s.is_some_and(|s| !s.is_empty());
    let (ago, fut, fromnow) = (m.g("ago"), some(m.g("fut")), some(m.g("fromnow")));
    if !(some(ago) || fut || fromnow) || (some(ago) && (fut || fromnow)) {
        return None; // a bare duration ("for two weeks") is not a point in time
    }
    let (lo, hi) = parse_amount(m.g("n")?)?;
    let unit = lower(m.g("unit")?).trim_end_matches('s').to_string();
    if hi == 0 || hi > 5000 {
        return None;
    }
    // "two days from tomorrow": counted from the day the anchor names
    let obs = match m.g("anchor").map(lower).as_deref() {
        Some("tomorrow") => obs.add_days(1)?,
        Some("yesterday") => obs.add_days(-1)?,
        _ => obs,
    };
    let (start, end) = if ago.is_none() {
        (
            unit_interval(obs, &unit, lo)?.0,
            unit_interval(obs, &unit, hi)?.1,
        )
    } else {
        (
            unit_interval(obs, &unit, -hi)?.0,
            unit_interval(obs, &unit, -lo)?.1,
        )
    };
    // Python names the precision after the unit; an exotic spelling (a long
    // s for the plural) gives a name outside PRECISIONS, which is dropped here.
    let name = if lo != hi {
        precision(&format!("few_{unit}s"))?
    } else {
        precision(&unit)?
    };
    Some((start, end, name, true))
}

fn resolve_other_day(_m: &M, obs: Date) -> Option<Resolved> {
    Some((obs.add_days(-7)?.start(), obs.start(), "few_days", true))
}

/// D moved by `n` units (months and years clamp the day of the month).
fn shift_day(obs: Date, unit: &str, n: i64) -> Option<Date> {
    match unit {
        "day" => obs.add_days(n),
        "week" | "weekend" => obs.add_days(n.checked_mul(7)?),
        _ => {
            let (y, mo) = if unit == "month" {
                add_months(obs.year, obs.month, n)
            } else {
                (obs.year + n, obs.month)
            };
            Date::new(y, mo, obs.day.min(days_in_month(y, mo)?))
        }
    }
}

fn resolve_window(m: &M, obs: Date) -> Option<Resolved> {
    let raw_unit = lower(m.g("unit")?);
    let hi = match m.g("n") {
        Some(n) if !n.is_empty() => parse_amount(n)?.1,
        _ => {
            if raw_unit.ends_with('s') {
                5
            } else {
                1
            }
        }
    };
    if hi == 0 || hi > 5000 {
        return None;
    }
    let unit = raw_unit.trim_end_matches('s');
    let dir = lower(m.g("dir")?);
    if dir == "past" || dir == "last" {
        Some((
            shift_day(obs, unit, -hi)?.start(),
            obs.start() + DAY,
            "range",
            true,
        ))
    } else {
        Some((
            obs.start(),
            shift_day(obs, unit, hi)?.start() + DAY,
            "range",
            true,
        ))
    }
}

/// From the first month's start to the last's end. A year given on one end
/// sets the other's (the later month of the two in that year, or the year
/// after / before it when the range crosses a new year); without either,
/// the first month is the nearest one.
fn resolve_month_range(m: &M, obs: Date) -> Option<Resolved> {
    let first = month_num(m.first(&["ma", "ma2"]).unwrap_or(""))?;
    let last = month_num(m.g("mb").or_else(|| m.g("mb2")).unwrap_or(""))?;
    let given = |y: Option<&str>| y.filter(|y| !y.is_empty()).and_then(parse_int);
    let (start_y, end_y) = (given(m.first(&["ya", "ya2"])), given(m.g("yb")));
    let wraps = i64::from(last < first);
    let (start, end) = match (start_y, end_y) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => (a, a + wraps),
        (None, Some(b)) => (b - wraps, b),
        (None, None) => {
            let a = nearest_year(obs, first, 15)?;
            (a, a + wraps)
        }
    };
    if (end, last) < (start, first) {
        return None;
    }
    let relative = start_y.is_none() && end_y.is_none();
    Some((
        month_iv(start, first)?.0,
        month_iv(end, last)?.1,
        "month",
        relative,
    ))
}

/// An ordinal week of a month: its days 1-7, 8-14, 15-21 or 22-28, or its
/// last seven ("last", "final"); an ordinal weekend: the month's first to
/// fourth Saturday, or its last, and the Sunday after; an ordinal weekday:
/// the month's first to fourth such day, or its last. Without a year, the
/// month nearest the observation.
fn resolve_week_of_month(m: &M, obs: Date) -> Option<Resolved> {
    let month = month_num(m.g("mon").unwrap_or(""))?;
    let year_s = m.g("y").filter(|y| !y.is_empty());
    let year = match year_s {
        Some(y) => parse_int(y)?,
        None => nearest_year(obs, month, 15)?,
    };
    let days = days_in_month(year, month)?;
    // 0: the last
    let nth = match lower(m.g("ord").unwrap_or("")).as_str() {
        "first" | "1st" => 1,
        "second" | "2nd" => 2,
        "third" | "3rd" => 3,
        "fourth" | "4th" => 4,
        _ => 0,
    };
    let unit = lower(m.g("unit").unwrap_or(""));
    if unit != "week" {
        let (weekday, length, precision) = if unit == "weekend" {
            (5, 2, "weekend")
        } else {
            (weekday_num(&unit)?, 1, "day")
        };
        let first = 1 + (weekday - Date::new(year, month, 1)?.weekday()).rem_euclid(7);
        let weeks = if nth > 0 { nth - 1 } else { (days - first) / 7 };
        let start = Date::new(year, month, first + 7 * weeks)?.start();
        return Some((start, start + length * DAY, precision, year_s.is_none()));
    }
    let first_day = if nth > 0 { 7 * (nth - 1) + 1 } else { days - 6 };
    let start = Date::new(year, month, first_day)?.start();
    Some((start, start + 7 * DAY, "week", year_s.is_none()))
}

fn resolve_month(m: &M, obs: Date) -> Option<Resolved> {
    let month = month_num(m.first(&["mon", "mon2", "mon3", "x"]).unwrap_or(""))?;
    let (rel, year_s, modifier) = if m.has_x {
        // "in <Month>": no year, no modifier
        (String::new(), None, String::new())
    } else {
        (
            lower(m.g("rel").unwrap_or("")),
            m.first(&["y", "y2"]),
            lower(m.g("mod").unwrap_or("")),
        )
    };
    let (year, relative) = match year_s {
        Some(y) if !y.is_empty() => (parse_int(y)?, false),
        _ => match rel.as_str() {
            "last" => (
                if month < obs.month {
                    obs.year
                } else {
                    obs.year - 1
                },
                true,
            ),
            "next" => (
                if month > obs.month {
                    obs.year
                } else {
                    obs.year + 1
                },
                true,
            ),
            "this" => (obs.year, true),
            _ => (nearest_year(obs, month, 15)?, true),
        },
    };
    let (s, e) = month_iv(year, month)?;
    if !modifier.is_empty() {
        let last = days_in_month(year, month)?;
        let (d0, d1) = match modifier.as_str() {
            "early" => (1, 11),
            "mid" => (11, 21),
            "late" => (21, last + 1),
            _ => return None,
        };
        return Some((
            s + (d0 - 1) * DAY,
            s + (d1 - 1) * DAY,
            "part_of_month",
            relative,
        ));
    }
    Some((s, e, "month", relative))
}

fn resolve_day_month(m: &M, obs: Date) -> Option<Resolved> {
    let month = month_num(m.first(&["mon", "mon2"]).unwrap_or(""))?;
    let day = parse_int(m.first(&["d", "d2"]).unwrap_or("0"))?;
    let (year, relative) = match m.g("y") {
        Some(y) if !y.is_empty() => (parse_int(y)?, false),
        _ => {
            if !(1..=31).contains(&day) {
                return None;
            }
            // the nearest year in which the date exists ("Dec 31" said on 1
            // July is the one before; "Feb 29" the leap year nearest)
            let year = (obs.year - 4..=obs.year + 4)
                .filter_map(|y| {
                    Date::new(y, month, day).map(|d| ((d.ordinal() - obs.ordinal()).abs(), y))
                })
                .min()?
                .1;
            (year, true)
        }
    };
    if day < 1 || day > days_in_month(year, month)? {
        return None;
    }
    let (s, e) = day_iv(Date::new(year, month, day)?);
    Some((s, e, "day", relative))
}

fn resolve_iso_day(m: &M, _obs: Date) -> Option<Resolved> {
    let y = parse_int(m.g("y")?)?;
    let mo = parse_int(m.g("mo")?)?;
    let d = parse_int(m.g("d")?)?;
    if !(1..=12).contains(&mo) {
        return None;
    }
    let (s, e) = day_iv(Date::new(y, mo, d)?);
    Some((s, e, "day", false))
}

fn resolve_year(m: &M, _obs: Date) -> Option<Resolved> {
    let (s, e) = year_iv(parse_int(m.g("y")?)?)?;
    Some((s, e, "year", false))
}

fn resolve_decade(m: &M, _obs: Date) -> Option<Resolved> {
    let raw = m.g("dec")?;
    let value = parse_int(raw)?;
    let short = raw.chars().count() == 2;
    let decade = if short {
        (if value >= 30 { 1900 } else { 2000 }) + value
    } else {
        value
    };
    Some((
        Date::new(decade, 1, 1)?.start(),
        Date::new(decade + 10, 1, 1)?.start(),
        "decade",
        short,
    ))
}

fn resolve_season(m: &M, obs: Date) -> Option<Resolved> {
    let first = match lower(m.g("season")?).as_str() {
        "spring" => 3,
        "summer" => 6,
        "autumn" | "fall" => 9,
        "winter" => 12,
        _ => return None,
    };
    let rel = squash(&lower(m.g("rel").unwrap_or("")));
    let year_s = m.g("y").filter(|y| !y.is_empty());
    if rel.is_empty() && year_s.is_none() && m.g("prep").is_none_or(str::is_empty) {
        return None;
    }
    let today = obs.start();
    if let Some(y) = year_s {
        let (s, e) = season_iv(parse_int(y)?, first)?;
        return Some((s, e, "season", false));
    }
    let cands = (obs.year - 2..obs.year + 2)
        .map(|y| season_iv(y, first))
        .collect::<Option<Vec<_>>>()?;
    let (s, e) = match rel.as_str() {
        "last" | "this past" | "past" => cands.iter().copied().filter(|c| c.1 <= today).max()?,
        "next" => cands.iter().copied().filter(|c| c.0 > today).min()?,
        "this" => {
            if first == 12 {
                let fallback = season_iv(obs.year, 12)?;
                cands
                    .iter()
                    .copied()
                    .find(|c| c.0 <= today && today < c.1)
                    .unwrap_or(fallback)
            } else {
                season_iv(obs.year, first)?
            }
        }
        _ => {
            // the first of the nearest (Python's `min` keeps the first)
            let mut best = cands[0];
            let dist = |c: (i64, i64)| ((c.0 + c.1).div_euclid(2) - today).abs();
            for &c in &cands[1..] {
                if dist(c) < dist(best) {
                    best = c;
                }
            }
            best
        }
    };
    Some((s, e, "season", true))
}

fn holiday_date(name: &str, year: i64) -> Option<Date> {
    let (month, day) = match name {
        "christmas eve" => (12, 24),
        "christmas day" | "christmas" | "xmas" => (12, 25),
        "new year's eve" | "new years eve" => (12, 31),
        "new year's day" | "new years day" => (1, 1),
        "halloween" => (10, 31),
        "valentine's day" | "valentines day" => (2, 14),
        "independence day" | "the fourth of july" => (7, 4),
        "thanksgiving" => (11, 0),
        _ => return None,
    };
    if day == 0 {
        // US Thanksgiving: the fourth Thursday of November
        let first = Date::new(year, 11, 1)?;
        return first.add_days((3 - first.weekday()).rem_euclid(7) + 21);
    }
    Date::new(year, month, day)
}

fn first_word(s: &str) -> String {
    lower(s)
        .split(is_py_space)
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_string()
}

fn resolve_holiday(m: &M, obs: Date) -> Option<Resolved> {
    let hol = m.g("hol")?;
    let year_s = m.g("y").filter(|y| !y.is_empty());
    // Only with a qualifier or a year: "I love Christmas" is generic.
    if first_word(m.all()) == first_word(hol) && year_s.is_none() {
        return None;
    }
    let name = squash(&lower(hol).replace('\u{2019}', "'"));
    let rel = lower(m.g("rel").unwrap_or(""));
    if let Some(y) = year_s {
        let (s, e) = day_iv(holiday_date(&name, parse_int(y)?)?);
        return Some((s, e, "day", false));
    }
    let cands = [obs.year - 1, obs.year, obs.year + 1]
        .iter()
        .map(|&y| holiday_date(&name, y))
        .collect::<Option<Vec<_>>>()?;
    let d = match rel.as_str() {
        "last" => cands.iter().copied().filter(|c| *c < obs).max()?,
        "next" => cands.iter().copied().filter(|c| *c > obs).min()?,
        "this" => cands[1],
        _ => {
            let mut best = cands[0];
            let dist = |c: Date| (c.ordinal() - obs.ordinal()).abs();
            for &c in &cands[1..] {
                if dist(c) < dist(best) {
                    best = c;
                }
            }
            best
        }
    };
    let (s, e) = day_iv(d);
    Some((s, e, "day", true))
}

/// A holiday without a year at its latest on or before the observation
/// day: where "since <holiday>" starts when the nearest one lies ahead
/// ("since Christmas" said in December is last year's; "since Thanksgiving"
/// said in October last November's fourth Thursday, not the same date a
/// year before).
fn holiday_before(m: &M, obs: Date) -> Option<Resolved> {
    if m.g("y").is_some_and(|y| !y.is_empty()) {
        return None;
    }
    let name = squash(&lower(m.g("hol")?).replace('\u{2019}', "'"));
    let last_year = holiday_date(&name, obs.year - 1)?;
    let this_year = holiday_date(&name, obs.year)?;
    let d = [last_year, this_year]
        .into_iter()
        .filter(|c| *c <= obs)
        .max()?;
    let (s, e) = day_iv(d);
    Some((s, e, "day", true))
}

fn resolve(kind: Kind, m: &M, obs: Date) -> Option<Resolved> {
    match kind {
        Kind::SimpleDay => resolve_simple_day(m, obs),
        Kind::PartOfDay => resolve_part_of_day(m, obs),
        Kind::Weekday => resolve_weekday(m, obs),
        Kind::AnaphoricUnit => resolve_anaphoric_unit(m, obs),
        Kind::RelUnit => resolve_rel_unit(m, obs),
        Kind::Ago => resolve_ago(m, obs),
        Kind::OtherDay => resolve_other_day(m, obs),
        Kind::Window => resolve_window(m, obs),
        Kind::IsoDay => resolve_iso_day(m, obs),
        Kind::DayMonth => resolve_day_month(m, obs),
        Kind::Month | Kind::InMonth => resolve_month(m, obs),
        Kind::MonthRange => resolve_month_range(m, obs),
        Kind::WeekOfMonth => resolve_week_of_month(m, obs),
        Kind::Year => resolve_year(m, obs),
        Kind::Decade => resolve_decade(m, obs),
        Kind::Season => resolve_season(m, obs),
        Kind::Holiday => resolve_holiday(m, obs),
    }
}

// ------------------------------------------------------------------ ground

/// Find the time expressions in `text` and resolve them against
/// `observed_at` (Unix seconds, UTC).
///
/// Returns non-overlapping references in text order (on overlap the earlier,
/// then the longer, match wins). Never fails on any `text`; fails with
/// [`Error::InvalidInput`] only for an `observed_at` within 400 days of the
/// ends of years 1..=9999 or beyond.
pub fn ground(text: &str, observed_at: i64) -> Result<Vec<GroundedRef>> {
    if !(MIN_TS..=MAX_TS).contains(&observed_at) {
        return Err(Error::invalid(format!(
            "observed_at {observed_at} is outside the supported calendar range"
        )));
    }
    let obs = Date::of_timestamp(observed_at)
        .ok_or_else(|| Error::invalid(format!("observed_at {observed_at} is out of range")))?;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= PIECE {
        return ground_piece(text, &chars, obs);
    }
    // Each piece is read with the start of the next one, so an expression
    // that straddles a cut is read whole: a piece keeps what starts in it,
    // and the next drops what starts inside an expression kept before.
    let mut refs: Vec<GroundedRef> = Vec::new();
    for (a, b) in pieces(&chars) {
        let c = chars.len().min(b + PIECE_OVERLAP);
        let piece: String = chars[a..c].iter().collect();
        let kept_end = refs.last().map_or(0, |r| r.span.1);
        for mut r in ground_piece(&piece, &chars[a..c], obs)? {
            r.span = (r.span.0 + a, r.span.1 + a);
            if r.span.0 < b && r.span.0 >= kept_end {
                refs.push(r);
            }
        }
    }
    Ok(refs)
}

/// Consecutive `[start, end)` code point ranges of at most `PIECE` code
/// points, each cut after the last line break in its second half, else the
/// last sentence's end (a space after ".", "!" or "?"), else the last
/// space: a time expression spans no line and rarely a sentence, but often
/// a space ("the day before yesterday", "two weeks ago").
fn pieces(chars: &[char]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut start, n) = (0, chars.len());
    while start < n {
        let mut end = n.min(start + PIECE);
        if end < n {
            let half = start + PIECE / 2;
            let window = &chars[half..end];
            let cut = window
                .iter()
                .rposition(|&c| c == '\n')
                .or_else(|| {
                    (1..window.len())
                        .rev()
                        .find(|&i| window[i] == ' ' && matches!(window[i - 1], '.' | '!' | '?'))
                })
                .or_else(|| window.iter().rposition(|&c| c == ' '));
            if let Some(c) = cut {
                end = half + c + 1;
            }
        }
        out.push((start, end));
        start = end;
    }
    out
}

/// Python's `(?:^|(?<![\w-]))(?:ever\s+)?since\s+$` searched in
/// `chars[pos..end]` (with the characters before `pos` visible to the
/// lookbehind): the start of the first match.
fn since_before(chars: &[char], pos: usize, end: usize) -> Option<usize> {
    (pos..end).find(|&s| {
        (s == 0 || !(is_py_word(chars[s - 1]) || chars[s - 1] == '-'))
            && (since_tail(&chars[s..end], true) || since_tail(&chars[s..end], false))
    })
}

/// Whether `tail` is all of `[ever\s+]since\s+` (case-insensitively, as Python).
fn since_tail(tail: &[char], ever: bool) -> bool {
    let mut i = 0;
    let word = |w: &str, i: &mut usize| {
        for expected in w.chars() {
            let Some(&c) = tail.get(*i) else {
                return false;
            };
            let ok = match expected {
                'i' => matches!(c, 'i' | 'I' | '\u{130}' | '\u{131}'),
                's' => matches!(c, 's' | 'S' | '\u{17f}'),
                e => c.to_ascii_lowercase() == e,
            };
            if !ok {
                return false;
            }
            *i += 1;
        }
        true
    };
    let spaces = |i: &mut usize| {
        let from = *i;
        while tail.get(*i).is_some_and(|&c| is_py_space(c)) {
            *i += 1;
        }
        *i > from
    };
    if ever && !(word("ever", &mut i) && spaces(&mut i)) {
        return false;
    }
    word("since", &mut i) && spaces(&mut i) && i == tail.len()
}

fn is_yearly(precision: &str) -> bool {
    matches!(precision, "day" | "month" | "part_of_month" | "season")
}

/// The same day a year earlier (the last of its month when that is shorter).
fn a_year_before(d: Date) -> Option<Date> {
    let y = d.year - 1;
    Date::new(y, d.month, d.day.min(days_in_month(y, d.month)?))
}

/// The same calendar interval one year earlier ("since June" means the past
/// June); a day: the latest with its month and day on or before the observation
/// (for Feb 29 the last leap year's, never a Feb 28), `None` where the
/// calendar has none.
fn year_earlier(start: i64, end: i64, precision: &str, obs: Date) -> Result<Option<(i64, i64)>> {
    let back = |ts: i64| Some(a_year_before(Date::of_timestamp(ts)?)?.start());
    // Python raises out of `ground` here; no observation time in range gets here.
    let out_of_range = || Error::invalid("a since-reference left the calendar's range");
    if precision == "day" {
        let a = Date::of_timestamp(start).ok_or_else(out_of_range)?;
        let latest = (obs.year.saturating_sub(8).max(1)..=obs.year)
            .rev()
            .filter_map(|y| Date::new(y, a.month, a.day))
            .find(|d| *d <= obs);
        return Ok(latest.map(day_iv));
    }
    Ok(Some((
        back(start).ok_or_else(out_of_range)?,
        back(end).ok_or_else(out_of_range)?,
    )))
}

/// Maps byte offsets of a piece to code point offsets.
struct Offsets {
    /// None when the piece is ASCII (byte offset = code point offset).
    table: Option<Vec<usize>>,
}

impl Offsets {
    fn new(piece: &str) -> Offsets {
        if piece.is_ascii() {
            return Offsets { table: None };
        }
        let mut table = vec![0; piece.len() + 1];
        let mut n = 0;
        for (b, _) in piece.char_indices() {
            table[b] = n;
            n += 1;
        }
        table[piece.len()] = n;
        Offsets { table: Some(table) }
    }

    fn cp(&self, byte: usize) -> usize {
        self.table.as_ref().map_or(byte, |t| t[byte])
    }
}

/// `ground` on one piece (`chars` are its code points).
fn ground_piece(piece: &str, chars: &[char], obs: Date) -> Result<Vec<GroundedRef>> {
    if !TRIGGER.is_match(piece).unwrap_or(true) {
        return Ok(Vec::new());
    }
    let offsets = Offsets::new(piece);
    // (a, b, resolved, resolved a year before) in code points
    let mut found: Vec<(usize, usize, Resolved, Option<Resolved>)> = Vec::new();
    // an ordinal week of a month after "since" is the one before the
    // observation: resolved as if observed a year earlier; a holiday the
    // latest on or before the observation day
    let year_before = a_year_before(obs);
    let grounders = &*PATTERNS;
    let mut live = PatternSet::new(grounders.scan.pattern_len());
    grounders
        .scan
        .which_overlapping_matches(&Input::new(piece), &mut live);
    for (at, pattern) in grounders.patterns.iter().enumerate() {
        // a pattern whose loose form matches nowhere here has no match here
        if !live.contains(PatternID::new_unchecked(at)) {
            continue;
        }
        for_each_match(pattern, piece, |caps| {
            let m = M {
                caps,
                has_x: pattern.has_x,
            };
            let Some(res) = resolve(pattern.kind, &m, obs) else {
                return;
            };
            let span = caps
                .name("x")
                .filter(|_| pattern.has_x)
                .or_else(|| caps.get(0))
                .expect("a match has a group 0");
            let earlier = match (pattern.kind, year_before) {
                (Kind::WeekOfMonth, Some(before)) => resolve(pattern.kind, &m, before),
                (Kind::Holiday, _) => holiday_before(&m, obs),
                _ => None,
            };
            found.push((
                offsets.cp(span.start()),
                offsets.cp(span.end()),
                res,
                earlier,
            ));
        });
    }
    // stable, like Python's sort: ties keep the table order
    found.sort_by_key(|f| (f.0, std::cmp::Reverse(f.1 - f.0)));
    let today_end = obs.start() + DAY;
    let mut refs = Vec::new();
    let mut taken_end: Option<usize> = None;
    for (a, b, (start, end, precision, relative), earlier) in found {
        if taken_end.is_some_and(|t| a < t) || start >= end {
            continue;
        }
        taken_end = Some(b);
        if let Some(s) = since_before(chars, a.saturating_sub(16), a) {
            let ahead = relative && start >= today_end;
            let (start, end) = match earlier {
                Some((s, e, _, _)) if ahead => (s, e),
                _ if ahead && is_yearly(precision) => {
                    match year_earlier(start, end, precision, obs)? {
                        Some(shifted) => shifted,
                        // no such day before D in the calendar (Feb 29 in years 1-3)
                        None => continue,
                    }
                }
                _ => (start, end),
            };
            refs.push(GroundedRef {
                span: (s, b),
                text: chars[s..b].iter().collect(),
                start,
                end: end.max(today_end),
                precision: "range",
                relative: true,
                anchor_precision: precision,
            });
        } else {
            refs.push(GroundedRef {
                span: (a, b),
                text: chars[a..b].iter().collect(),
                start,
                end,
                precision,
                relative,
                anchor_precision: "",
            });
        }
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Sunday 2024-03-10 15:30 UTC.
    const SUNDAY: i64 = 1_710_084_600;

    type Want = (usize, usize, i64, i64, &'static str, bool, &'static str);

    /// Examples from the Python docstring's families, with the Python results.
    const EXAMPLES: &[(&str, &str, &[Want])] = &[
        (
            "simple_day",
            "I went there yesterday and the day before yesterday.",
            &[
                (13, 22, 1709942400, 1710028800, "day", true, ""),
                (27, 51, 1709856000, 1709942400, "day", true, ""),
            ],
        ),
        (
            "part_of_day",
            "We met last night, and again this morning; see you tonight.",
            &[
                (7, 17, 1710007200, 1710050400, "part_of_day", true, ""),
                (29, 41, 1710050400, 1710072000, "part_of_day", true, ""),
                (51, 58, 1710093600, 1710136800, "part_of_day", true, ""),
            ],
        ),
        (
            "weekday",
            "Last Friday was fun, next tue too, but sat alone; the Monday after.",
            &[
                (0, 11, 1709856000, 1709942400, "day", true, ""),
                (21, 29, 1710201600, 1710288000, "day", true, ""),
                (50, 66, 1710115200, 1710201600, "day", true, ""),
            ],
        ),
        (
            "anaphoric_unit",
            "The week before last we left; the month after we came back.",
            &[
                (0, 20, 1708300800, 1708905600, "week", true, ""),
                (30, 45, 1711929600, 1714521600, "month", true, ""),
            ],
        ),
        (
            "rel_unit",
            "This past weekend and next month, over the weekend, last year.",
            &[
                (0, 17, 1709942400, 1710115200, "weekend", true, ""),
                (22, 32, 1711929600, 1714521600, "month", true, ""),
                (34, 50, 1709942400, 1710115200, "weekend", true, ""),
                (52, 61, 1672531200, 1704067200, "year", true, ""),
            ],
        ),
        (
            "ago",
            "Two weeks ago, a few days ago, in 3 months, 5 years from now, twenty-five days back.",
            &[
                (0, 13, 1708300800, 1708905600, "week", true, ""),
                (15, 29, 1709596800, 1709942400, "few_days", true, ""),
                (31, 42, 1717200000, 1719792000, "month", true, ""),
                (44, 60, 1861920000, 1893456000, "year", true, ""),
                (62, 83, 1707868800, 1707955200, "day", true, ""),
            ],
        ),
        (
            "other_day",
            "I saw her the other day.",
            &[(10, 23, 1709424000, 1710028800, "few_days", true, "")],
        ),
        (
            "window",
            "Over the past 3 weeks and the coming months.",
            &[
                (5, 21, 1708214400, 1710115200, "range", true, ""),
                (26, 43, 1710028800, 1723334400, "range", true, ""),
            ],
        ),
        (
            "iso_day",
            "Released 2023-05-08, patched 2023/5/9, not 2023-02-30 or 2023-05-08:10.",
            &[
                (9, 19, 1683504000, 1683590400, "day", false, ""),
                (29, 37, 1683590400, 1683676800, "day", false, ""),
            ],
        ),
        (
            "day_month",
            "On 8th of May, 2023 and May 8 and 31 Feb, and Jan 3rd 2020.",
            &[
                (3, 19, 1683504000, 1683590400, "day", false, ""),
                (24, 29, 1715126400, 1715212800, "day", true, ""),
                (46, 58, 1578009600, 1578096000, "day", false, ""),
            ],
        ),
        (
            "month",
            "Early June 2022, mid-Sept, last December, March of 2021.",
            &[
                (0, 15, 1654041600, 1654905600, "part_of_month", false, ""),
                (17, 25, 1694390400, 1695254400, "part_of_month", true, ""),
                (27, 40, 1701388800, 1704067200, "month", true, ""),
                (42, 55, 1614556800, 1617235200, "month", false, ""),
            ],
        ),
        (
            "in_month",
            "It happened in June, during the month of August, and since March.",
            &[
                (15, 19, 1717200000, 1719792000, "month", true, ""),
                (41, 47, 1722470400, 1725148800, "month", true, ""),
                (53, 64, 1709251200, 1711929600, "range", true, "month"),
            ],
        ),
        (
            "year",
            "Back in 2016 and since 2020, but not in 2023:15 or in 2022%.",
            &[
                (8, 12, 1451606400, 1483228800, "year", false, ""),
                (17, 27, 1577836800, 1710115200, "range", true, "year"),
            ],
        ),
        (
            "decade",
            "Music of the 90s and the 1980's.",
            &[
                (9, 16, 631152000, 946684800, "decade", true, ""),
                (21, 31, 315532800, 631152000, "decade", false, ""),
            ],
        ),
        (
            "season",
            "Last summer, the winter of 2021, in the fall, since spring.",
            &[
                (0, 11, 1685577600, 1693526400, "season", true, ""),
                (13, 31, 1638316800, 1646092800, "season", false, ""),
                (36, 44, 1693526400, 1701388800, "season", true, ""),
                (46, 58, 1709251200, 1717200000, "range", true, "season"),
            ],
        ),
        (
            "holiday",
            "Next Christmas, on Halloween, Thanksgiving 2023, I love Christmas.",
            &[
                (0, 14, 1735084800, 1735171200, "day", true, ""),
                (19, 28, 1698710400, 1698796800, "day", true, ""),
                (30, 47, 1700697600, 1700784000, "day", false, ""),
            ],
        ),
        (
            "since_holiday",
            "Since Christmas, ever since the fourth of July, on May 5, 1500 people came.",
            &[
                (0, 15, 1703462400, 1710115200, "range", true, "day"),
                (17, 46, 1688428800, 1710115200, "range", true, "day"),
                (51, 56, 1714867200, 1714953600, "day", true, ""),
            ],
        ),
        (
            "old_year",
            "Lincoln was born on February 12, 1809; the ship sank on 8 May 1850, in May 1850.",
            &[
                (20, 37, -5077036800, -5076950400, "day", false, ""),
                (56, 66, -3775852800, -3775766400, "day", false, ""),
                (71, 79, -3776457600, -3773779200, "month", false, ""),
            ],
        ),
    ];

    #[test]
    fn each_pattern_family_matches_the_python_examples() {
        for (family, text, want) in EXAMPLES {
            let got: Vec<Want> = ground(text, SUNDAY)
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r.span.0,
                        r.span.1,
                        r.start,
                        r.end,
                        r.precision,
                        r.relative,
                        r.anchor_precision,
                    )
                })
                .collect();
            assert_eq!(&got, want, "{family}: {text}");
        }
    }

    #[test]
    fn a_range_of_months_runs_from_its_first_month_to_its_last() {
        let month = |y, m| Date::new(y, m, 1).unwrap().start();
        let one = |text: &str| {
            let refs = ground(text, SUNDAY).unwrap();
            assert_eq!(refs.len(), 1, "{text}");
            (
                refs[0].start,
                refs[0].end,
                refs[0].precision,
                refs[0].relative,
            )
        };
        let cases = [
            ("between March and May 2023", (2023, 3), (2023, 6), false),
            ("from Nov 2022 to February", (2022, 11), (2023, 3), false),
            ("between May and March 2024", (2023, 5), (2024, 4), false),
            ("February \u{2013} March 2024", (2024, 2), (2024, 4), false),
        ];
        for (text, (y0, m0), (y1, m1), relative) in cases {
            let want = (month(y0, m0), month(y1, m1), "month", relative);
            assert_eq!(one(text), want, "{text}");
        }
        // without a year: the first month is the nearest one
        let (start, end, _, relative) = one("from April to July");
        assert!(relative);
        assert_eq!(Date::of_timestamp(start).unwrap().month, 4);
        assert_eq!(Date::of_timestamp(end).unwrap().month, 8);
        // two months without "between" or "from" and no year are no range
        assert!(ground("we may - march on", SUNDAY).unwrap().is_empty());
        // a capitalised month after a quantifier stays a day
        assert_eq!(
            ground("the 3 May deadline", SUNDAY).unwrap()[0].precision,
            "day"
        );
        assert!(ground("all 3 may attend", SUNDAY).unwrap().is_empty());
    }

    #[test]
    fn an_ordinal_week_weekend_or_weekday_of_a_month_is_that_span() {
        let day = |y, m, d| Date::new(y, m, d).unwrap().start();
        let cases = [
            // June 2023 starts on a Thursday: its Saturdays are the 3rd ... 24th
            ("the first week of June 2023", day(2023, 6, 1), 7, "week"),
            ("the 3rd week of June 2023", day(2023, 6, 15), 7, "week"),
            ("the last week of June 2023", day(2023, 6, 24), 7, "week"),
            (
                "the final week of February, 2024",
                day(2024, 2, 23),
                7,
                "week",
            ),
            (
                "the first weekend in June 2023",
                day(2023, 6, 3),
                2,
                "weekend",
            ),
            (
                "the fourth weekend of June 2023",
                day(2023, 6, 24),
                2,
                "weekend",
            ),
            (
                "The last weekend of April 2022",
                day(2022, 4, 30),
                2,
                "weekend",
            ),
            // August 2023 starts on a Tuesday; November 2023 on a Wednesday
            ("the first Monday of August 2023", day(2023, 8, 7), 1, "day"),
            ("the last Friday of June 2023", day(2023, 6, 30), 1, "day"),
            (
                "the fourth Thursday of November 2023",
                day(2023, 11, 23),
                1,
                "day",
            ),
        ];
        for (text, start, days, precision) in cases {
            let refs = ground(text, SUNDAY).unwrap();
            assert_eq!(refs.len(), 1, "{text}");
            let r = &refs[0];
            assert_eq!((r.span.0, r.span.1), (0, text.len()), "{text}");
            assert_eq!(
                (r.start, r.end, r.precision, r.relative),
                (start, start + days * DAY, precision, false),
                "{text}"
            );
        }
        // after "since", the one before the observation, as a month is
        let since = ground("since the first week of June", SUNDAY).unwrap();
        let month = ground("since June", SUNDAY).unwrap();
        assert_eq!(since.len(), 1);
        assert_eq!(since[0].start, month[0].start);
        assert!(since[0].start < SUNDAY);
        assert_eq!(since[0].anchor_precision, "week");
        // "last week" of a month is not the week before the observation
        let refs = ground("in the last week of June", SUNDAY).unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].precision, "week");
        assert!(refs[0].relative);
        assert_eq!(Date::of_timestamp(refs[0].start).unwrap().month, 6);
    }

    #[test]
    fn since_a_holiday_or_a_day_starts_on_or_before_the_observation() {
        let at = |y, m, d| Date::new(y, m, d).unwrap().start();
        let friday = at(2024, 3, 1) + 12 * 3600;
        let one = |text: &str, obs: i64| {
            let refs = ground(text, obs).unwrap();
            assert_eq!(refs.len(), 1, "{text}");
            let r = &refs[0];
            (
                r.text.clone(),
                r.start,
                r.end,
                r.precision,
                r.anchor_precision,
            )
        };
        let cases = [
            // a holiday after "since" is a range; one ahead is last year's
            ("since Christmas", friday, at(2023, 12, 25), at(2024, 3, 2)),
            (
                "since the fourth of July",
                friday,
                at(2023, 7, 4),
                at(2024, 3, 2),
            ),
            (
                "ever since Halloween",
                friday,
                at(2023, 10, 31),
                at(2024, 3, 2),
            ),
            // last November's fourth Thursday, not 28 November 2023
            (
                "since Thanksgiving",
                at(2024, 10, 1),
                at(2023, 11, 23),
                at(2024, 10, 2),
            ),
            // a leap day ahead: the last leap year's, never a Feb 28
            (
                "since Feb 29",
                at(2100, 3, 1),
                at(2096, 2, 29),
                at(2100, 3, 2),
            ),
            (
                "since Feb 29",
                at(2023, 3, 5),
                at(2020, 2, 29),
                at(2023, 3, 6),
            ),
            (
                "since May 8",
                at(2100, 3, 1),
                at(2099, 5, 8),
                at(2100, 3, 2),
            ),
        ];
        for (text, obs, start, end) in cases {
            let got = one(text, obs);
            assert_eq!(
                got,
                (text.to_string(), start, end, "range", "day"),
                "{text}"
            );
        }
        // a preposition is left out of the text; a holiday alone is generic
        assert_eq!(one("on Halloween", friday).0, "Halloween");
        assert!(ground("I love Christmas", friday).unwrap().is_empty());
        // no leap day before year 4: no range
        assert!(ground("since Feb 29", at(3, 3, 1)).unwrap().is_empty());
        // a day without a year stays the nearest one
        assert_eq!(one("Feb 29", at(2100, 3, 1)).1, at(2104, 2, 29));
    }

    #[test]
    fn a_written_date_keeps_a_year_from_1000_on() {
        let at = |y, m, d| Date::new(y, m, d).unwrap().start();
        let one = |text: &str| {
            let refs = ground(text, SUNDAY).unwrap();
            assert_eq!(refs.len(), 1, "{text}");
            let r = &refs[0];
            (r.text.clone(), r.start, r.end, r.precision, r.relative)
        };
        let cases = [
            ("February 12, 1809", at(1809, 2, 12), at(1809, 2, 13), "day"),
            ("8 May 1850", at(1850, 5, 8), at(1850, 5, 9), "day"),
            ("May 1850", at(1850, 5, 1), at(1850, 6, 1), "month"),
            (
                "early May 1066",
                at(1066, 5, 1),
                at(1066, 5, 11),
                "part_of_month",
            ),
            (
                "the first week of May 1850",
                at(1850, 5, 1),
                at(1850, 5, 8),
                "week",
            ),
            (
                "between March and May 1850",
                at(1850, 3, 1),
                at(1850, 6, 1),
                "month",
            ),
        ];
        for (text, start, end, precision) in cases {
            let want = (text.to_string(), start, end, precision, false);
            assert_eq!(one(text), want, "{text}");
        }
        // a number before a plural noun is a count, not the year
        let (text, _, _, _, relative) = one("on May 5, 1500 people came");
        assert_eq!((text.as_str(), relative), ("May 5", true));
        // ... a year from 1900 on stays one, as before ("by August 2024 requires")
        let (text, _, _, _, relative) = one("on May 5, 2000 people came");
        assert_eq!((text.as_str(), relative), ("May 5, 2000", false));
        // a bare year stays 1900-2099
        assert!(ground("in 1850", SUNDAY).unwrap().is_empty());
    }

    #[test]
    fn spans_count_code_points_and_convert_to_time_refs() {
        let refs = ground("café ☕ — yesterday", SUNDAY).unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].span, (9, 18));
        assert_eq!(refs[0].text, "yesterday");
        let t = TimeRef::from(&refs[0]);
        assert_eq!(
            (t.span, t.precision, t.anchor_precision),
            ((9, 18), 1, None)
        );
        let since = ground("ever since June", SUNDAY).unwrap();
        assert_eq!(since[0].text, "ever since June");
        assert_eq!(since[0].anchor_precision, "month");
        // "June" would lie ahead of a March observation: the past June.
        assert_eq!(since[0].start, Date::new(2023, 6, 1).unwrap().start());
        assert_eq!(TimeRef::from(&since[0]).anchor_precision, Some(5));
    }

    #[test]
    fn out_of_range_observations_are_errors_and_dates_past_the_calendar_drop() {
        assert!(ground("yesterday", MIN_TS - 1).is_err());
        assert!(ground("yesterday", MAX_TS + 1).is_err());
        assert!(ground("", MIN_TS).unwrap().is_empty());
        // Year 2: "900 years ago" would be before year 1 and is dropped.
        let refs = ground("900 years ago, last year", MIN_TS).unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].text, "last year");
        assert!(ground("in 900 years", MAX_TS).unwrap().is_empty());
    }

    #[test]
    fn python_character_classes() {
        // a hyphen or word character before or after blocks a match
        assert!(ground("pre-yesterday yesterday_x", SUNDAY)
            .unwrap()
            .is_empty());
        // Python's \s includes U+001C..U+001F; its case folding maps U+0131 to i
        assert_eq!(ground("last\u{1c}night", SUNDAY).unwrap().len(), 1);
        assert_eq!(ground("th\u{131}s morning", SUNDAY).unwrap().len(), 1);
        assert_eq!(ground("TH\u{130}S MORNING", SUNDAY).unwrap().len(), 1);
        // ...but the resolvers' word lists do not know the dotless spelling
        assert!(ground("chr\u{131}stmas 2023", SUNDAY).unwrap().is_empty());
        // Arabic-Indic digits are decimal digits for \d and int()
        let refs = ground("in \u{662}\u{660}\u{662}\u{662}", SUNDAY);
        assert!(refs.unwrap().is_empty(), "the year needs ASCII 19/20");
        let refs = ground("\u{662}\u{660}\u{662}\u{663}-05-08", SUNDAY).unwrap();
        assert_eq!(refs[0].start, Date::new(2023, 5, 8).unwrap().start());
    }

    #[test]
    fn a_precision_python_would_misspell_is_dropped() {
        // Python lowercases "dayſ" to itself, keeps the long s through
        // rstrip("s") and reports the precision "dayſ" (resolved as years);
        // that name is not a precision, so the port drops the match.
        assert!(ground("2 day\u{17f} ago", SUNDAY).unwrap().is_empty());
        // A rolling window names no unit in its precision: same as Python,
        // the unknown unit shifts by years.
        let refs = ground("the past 2 day\u{17f}", SUNDAY).unwrap();
        assert_eq!((refs[0].start, refs[0].precision), (1646870400, "range"));
    }

    #[test]
    fn long_texts_are_cut_into_pieces() {
        let unit = "we met yesterday at noon. ";
        let text = unit.repeat(2000);
        let refs = ground(&text, SUNDAY).unwrap();
        assert_eq!(refs.len(), 2000);
        assert_eq!(refs[1999].span.0, 1999 * unit.len() + 7);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn never_panics_and_refs_are_ordered(
            text in "(?s)(.|yesterday|last |next |week|May |\\d|ago|since |the |summer|-){0,40}",
            obs in MIN_TS..=MAX_TS,
        ) {
            let refs = ground(&text, obs).unwrap();
            let n = text.chars().count();
            let mut prev_end = 0;
            for r in &refs {
                prop_assert!(r.span.0 < r.span.1 && r.span.1 <= n);
                prop_assert!(r.span.0 >= prev_end);
                prop_assert!(r.start < r.end);
                prop_assert!(PRECISIONS.contains(&r.precision));
                prev_end = r.span.1;
            }
        }

        #[test]
        fn never_panics_on_any_string(text in "\\PC*", obs in MIN_TS..=MAX_TS) {
            let _ = ground(&text, obs).unwrap();
        }

        /// The one-pass scan reports every pattern whose loose form (the
        /// search that proposes its candidate starts) matches the text, so
        /// skipping the others skips no match.
        #[test]
        fn the_scan_reports_every_pattern_that_can_match(
            text in "(?s)(.|\\d|\\d\\d|19\\d\\d|20\\d\\d|yesterday|today|tonight|last |next |this |ago|since |the |of |in |on |at |a |an |few |couple |week|weekend|month|year|day|days|morning|night|May|June|march|Sept\\.|Tuesday|mon|summer|spring|christmas|new year's eve|thanksgiving|'s|th|st|nd|, |/|-|:|am|pm|s){0,24}",
        ) {
            let grounders = &*PATTERNS;
            let mut live = PatternSet::new(grounders.scan.pattern_len());
            grounders.scan.which_overlapping_matches(&Input::new(&text), &mut live);
            for (at, pattern) in grounders.patterns.iter().enumerate() {
                let loose = pattern.loose.is_match(&text).unwrap();
                let exact = pattern.re.is_match(&text).unwrap();
                prop_assert!(!exact || loose, "pattern {} in {:?}", at, text);
                prop_assert!(!loose || live.contains(PatternID::new_unchecked(at)), "pattern {} in {:?}", at, text);
            }
        }
    }
}
