//! The other spellings of an English word, British and American ("colour"
//! and "color", "organise" and "organize", "centre" and "center",
//! "travelled" and "traveled", "practise" and "practice"), so that a query
//! typed in one finds a turn written in the other.
//!
//! Rules over the word's ending, and a short list of words no rule covers.
//! A rule may make a string that is no word ("detour" -> "detor"): the
//! caller reads a variant only where the memory holds it
//! (`MemoryStore::related_terms`), so such a string finds nothing.

/// Endings after "our" / "or" that keep the spelling difference
/// ("colour", "colours", "coloured", "colourful", "favourite", ...).
const OUR_SUFFIXES: [&str; 16] = [
    "", "s", "ed", "ing", "ite", "ites", "able", "ably", "al", "ful", "less", "er", "ers", "hood",
    "ist", "ism",
];

/// -ise and -ize, -yse and -yze, and their inflections.
const ISE_ENDINGS: [(&str, &str); 14] = [
    ("ise", "ize"),
    ("ised", "ized"),
    ("ises", "izes"),
    ("ising", "izing"),
    ("isation", "ization"),
    ("isations", "izations"),
    ("iser", "izer"),
    ("isers", "izers"),
    ("yse", "yze"),
    ("ysed", "yzed"),
    ("yses", "yzes"),
    ("ysing", "yzing"),
    ("yser", "yzer"),
    ("ysers", "yzers"),
];

/// Words written with "-ise" in American English too: the -ise rule leaves
/// them (and their inflections) alone, since a made-up "-ize" form can
/// stem to another word ("expertize" to "expert", "improvize" to "improve").
const ISE_EVERYWHERE: [&str; 36] = [
    "advertise",
    "advise",
    "chastise",
    "comprise",
    "compromise",
    "concise",
    "demise",
    "despise",
    "devise",
    "disguise",
    "enterprise",
    "excise",
    "exercise",
    "expertise",
    "franchise",
    "improvise",
    "incise",
    "likewise",
    "merchandise",
    "otherwise",
    "paradise",
    "precise",
    "premise",
    "promise",
    "reprise",
    "revise",
    "supervise",
    "surmise",
    "surprise",
    "televise",
    "treatise",
    "circumcise",
    "valise",
    "anise",
    "noise",
    "praise",
];

/// Endings after a doubled British "l" ("travelled", "modelling", "counsellor").
const DOUBLED_L_SUFFIXES: [&str; 6] = ["ed", "ing", "er", "ers", "or", "ors"];

/// Pairs no rule makes (British first), each inflected form listed.
const PAIRS: [(&str, &str); 44] = [
    ("practise", "practice"),
    ("practised", "practiced"),
    ("practises", "practices"),
    ("practising", "practicing"),
    ("licence", "license"),
    ("licences", "licenses"),
    ("defence", "defense"),
    ("defences", "defenses"),
    ("offence", "offense"),
    ("offences", "offenses"),
    ("pretence", "pretense"),
    ("grey", "gray"),
    ("greys", "grays"),
    ("programme", "program"),
    ("programmes", "programs"),
    ("mum", "mom"),
    ("mums", "moms"),
    ("aluminium", "aluminum"),
    ("ageing", "aging"),
    ("judgement", "judgment"),
    ("judgements", "judgments"),
    ("acknowledgement", "acknowledgment"),
    ("enrol", "enroll"),
    ("enrolment", "enrollment"),
    ("fulfil", "fulfill"),
    ("fulfilment", "fulfillment"),
    ("skilful", "skillful"),
    ("instalment", "installment"),
    ("instalments", "installments"),
    ("jewellery", "jewelry"),
    ("pyjamas", "pajamas"),
    ("plough", "plow"),
    ("mould", "mold"),
    ("moustache", "mustache"),
    ("sceptical", "skeptical"),
    ("manoeuvre", "maneuver"),
    ("paediatric", "pediatric"),
    ("paediatrician", "pediatrician"),
    ("encyclopaedia", "encyclopedia"),
    ("anaemia", "anemia"),
    ("learnt", "learned"),
    ("dreamt", "dreamed"),
    ("spelt", "spelled"),
    ("spoilt", "spoiled"),
];

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// `word` with its ending `a` swapped for `b`, or `b` for `a`: the stem
/// before the ending and the ending that replaces it.
fn swap_ending<'w>(
    word: &'w str,
    a: &'static str,
    b: &'static str,
) -> Option<(&'w str, &'static str)> {
    if let Some(stem) = word.strip_suffix(a) {
        Some((stem, b))
    } else {
        word.strip_suffix(b).map(|stem| (stem, a))
    }
}

/// The word's other spellings (`word` lower-case ASCII; none for anything
/// else), each once, never the word itself.
pub fn variants(word: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return out;
    }
    let mut add = |v: String| {
        if v != word && !out.contains(&v) {
            out.push(v);
        }
    };
    for (british, american) in PAIRS {
        if word == british {
            add(american.to_owned());
        } else if word == american {
            add(british.to_owned());
        }
    }
    // colour / color: at least three letters before the "our" ("four",
    // "hour", "your", "flour" keep theirs), and none of "o", "u" right
    // before it
    for suffix in OUR_SUFFIXES {
        let Some(rest) = word.strip_suffix(suffix) else {
            continue;
        };
        if let Some((stem, to)) = swap_ending(rest, "our", "or") {
            if stem.len() >= 3 && !stem.ends_with(['o', 'u']) {
                add(format!("{stem}{to}{suffix}"));
            }
        }
    }
    // organise / organize, analyse / analyze: three letters before the
    // ending ("rise", "wise", "size", "prize" keep theirs), and not a word
    // written with -ise everywhere
    for (british, american) in ISE_ENDINGS {
        if let Some((stem, to)) = swap_ending(word, british, american) {
            let base = format!("{stem}{}se", &british[..1]);
            if stem.len() >= 3 && !ISE_EVERYWHERE.contains(&base.as_str()) {
                add(format!("{stem}{to}"));
            }
        }
    }
    // centre / center, fibre / fiber, meagre / meager: "t", "b" or "g"
    // after two letters or more ("acre", "ogre", "genre" keep theirs;
    // "timbre" and "timber" are two words)
    if !matches!(word, "timbre" | "timbres" | "timber" | "timbers") {
        for (british, american) in [("re", "er"), ("res", "ers")] {
            if let Some((stem, to)) = swap_ending(word, british, american) {
                if stem.len() >= 3 && stem.ends_with(['t', 'b', 'g']) {
                    add(format!("{stem}{to}"));
                }
            }
        }
    }
    // catalogue / catalog: four letters before it ("dog", "blog" keep theirs)
    if let Some((stem, to)) = swap_ending(word, "ogue", "og") {
        if stem.len() >= 4 {
            add(format!("{stem}{to}"));
        }
    }
    // travelled / traveled: a vowel before the "l", after three letters or
    // more ("filled" / "filed", "called", "willing" keep theirs)
    for suffix in DOUBLED_L_SUFFIXES {
        let Some(rest) = word.strip_suffix(suffix) else {
            continue;
        };
        if let Some((stem, to)) = swap_ending(rest, "ll", "l") {
            if stem.len() >= 3 && is_vowel(stem.as_bytes()[stem.len() - 1]) {
                add(format!("{stem}{to}{suffix}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::variants;
    use proptest::prelude::*;

    fn has(word: &str, other: &str) -> bool {
        variants(word).iter().any(|v| v == other)
    }

    #[test]
    fn british_and_american_spellings_find_each_other() {
        for (b, a) in [
            ("colour", "color"),
            ("colours", "colors"),
            ("favourite", "favorite"),
            ("behaviour", "behavior"),
            ("neighbourhood", "neighborhood"),
            ("honoured", "honored"),
            ("organise", "organize"),
            ("realised", "realized"),
            ("organisation", "organization"),
            ("analyse", "analyze"),
            ("centre", "center"),
            ("theatres", "theaters"),
            ("fibre", "fiber"),
            ("catalogue", "catalog"),
            ("dialogue", "dialog"),
            ("travelled", "traveled"),
            ("modelling", "modeling"),
            ("counsellor", "counselor"),
            ("cancelled", "canceled"),
            ("practise", "practice"),
            ("licence", "license"),
            ("grey", "gray"),
            ("programme", "program"),
            ("mum", "mom"),
            ("learnt", "learned"),
        ] {
            assert!(has(b, a), "{b} -> {a}: {:?}", variants(b));
            assert!(has(a, b), "{a} -> {b}: {:?}", variants(a));
        }
    }

    #[test]
    fn words_that_only_look_like_it_keep_their_spelling() {
        for (word, not) in [
            ("four", "for"),
            ("hour", "hor"),
            ("your", "yor"),
            ("flour", "flor"),
            ("tour", "tor"),
            ("for", "four"),
            ("rise", "rize"),
            ("wise", "wize"),
            ("size", "sise"),
            ("prize", "prise"),
            ("acre", "acer"),
            ("genre", "gener"),
            ("dog", "dogue"),
            ("blog", "blogue"),
            ("filled", "filed"),
            ("filed", "filled"),
            ("filling", "filing"),
            ("called", "caled"),
            ("willing", "wiling"),
            ("expertise", "expertize"),
            ("improvised", "improvized"),
            ("exercising", "exercizing"),
            ("advise", "advize"),
            ("surprize", "surprise"),
            ("timbre", "timber"),
            ("timber", "timbre"),
        ] {
            assert!(!has(word, not), "{word} -> {not}: {:?}", variants(word));
        }
        assert!(variants("Colour").is_empty(), "lower-case words only");
        assert!(variants("café").is_empty());
        assert!(variants("").is_empty());
    }

    proptest! {
        /// A variant is never the word, never repeated, always lower-case
        /// ASCII, and the word is among its variants' variants (both ways).
        #[test]
        fn variants_are_symmetric_and_distinct(word in "[a-z]{1,14}") {
            let vs = variants(&word);
            for (i, v) in vs.iter().enumerate() {
                prop_assert_ne!(v, &word);
                prop_assert!(!vs[..i].contains(v));
                prop_assert!(!v.is_empty() && v.bytes().all(|b| b.is_ascii_lowercase()));
                prop_assert!(variants(v).contains(&word), "{} -> {} -> {:?}", word, v, variants(v));
            }
        }
    }
}
