//! Tokenizer for the lexical index: Unicode word segmentation, lowercasing,
//! an English stopword list that also drops question words, optional stemming.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenizerConfig {
    /// Snowball English stemming.
    pub stem: bool,
    /// Drop stopwords (including question words such as "when", "did", "what").
    pub stopwords: bool,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        Self {
            stem: true,
            stopwords: true,
        }
    }
}

/// How many distinct words a tokenizer remembers the tokens of. A memory's
/// vocabulary grows ever more slowly with its size; past this many words
/// (about 20 MB), new ones are stemmed each time and not kept.
pub const STEM_MEMO_WORDS: usize = 200_000;

/// Normalised word -> its token (None: dropped), shared by a tokenizer's
/// clones. Stemming is most of the cost of tokenizing, and a memory meets
/// the same words again and again: in every write, every query and the
/// texts a query's assessment reads.
type SharedMemo = Arc<RwLock<HashMap<String, Option<String>>>>;

/// Cheap to clone (the stemmer and the word memo are shared), `Send + Sync`.
#[derive(Clone)]
pub struct Tokenizer {
    config: TokenizerConfig,
    // `rust_stemmers::Stemmer` is not `Clone`; share one instance, built once.
    stemmer: Option<Arc<Stemmer>>,
    memo: SharedMemo,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("config", &self.config)
            .finish()
    }
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self::new(TokenizerConfig::default())
    }
}

impl Tokenizer {
    pub fn new(config: TokenizerConfig) -> Self {
        let stemmer = config
            .stem
            .then(|| Arc::new(Stemmer::create(Algorithm::English)));
        Self {
            config,
            stemmer,
            memo: SharedMemo::default(),
        }
    }

    pub fn config(&self) -> TokenizerConfig {
        self.config
    }

    /// Lowercased, segmented, filtered (and optionally stemmed) tokens, in text order.
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.to_owned()));
        out
    }

    /// `tokenize`, without the words (as written, any case) for which
    /// `skip_word` holds: read before stemming, so a word that shares a
    /// stem with a skipped one ("presentation", "presently") is kept.
    pub fn tokenize_skipping(&self, text: &str, skip_word: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_word_token(text, skip_word, |_, t| out.push(t.to_owned()));
        out
    }

    /// Call `f` with each token of `text`, in order (`tokenize` without
    /// building the tokens). A word's token comes from the shared memo when
    /// it is there, without allocating; the words it lacks are stemmed and
    /// added afterwards (one read lock, and at most one write lock, per
    /// text). `f` must not use this tokenizer (the memo is locked meanwhile).
    pub fn for_each_token(&self, text: &str, mut f: impl FnMut(&str)) {
        self.for_each_word_token(text, |_| false, |_, t| f(t));
    }

    /// `for_each_token`, with each token's word's start (bytes into `text`).
    pub fn for_each_token_at(&self, text: &str, f: impl FnMut(usize, &str)) {
        self.for_each_word_token(text, |_| false, f);
    }

    /// `for_each_token` for a caller that only wants tokens starting with
    /// one of `firsts`: an ASCII word whose lower-cased first char is not
    /// among them is skipped before it is normalised or looked up. An ASCII
    /// word's token starts with that char: normalising lower-cases and only
    /// trims the end, stemming only rewrites suffixes, and word segmentation
    /// never starts an ASCII word with an apostrophe (which the stemmer
    /// would drop). Other words are read as `for_each_token` reads them: an
    /// apostrophe followed by combining marks is a word, for one. Tests
    /// hold this over tricky words and generated text.
    pub fn for_each_token_starting(&self, text: &str, firsts: &[char], mut f: impl FnMut(&str)) {
        if firsts.is_empty() {
            return;
        }
        let skip = |raw: &str| {
            raw.is_ascii()
                && raw
                    .as_bytes()
                    .first()
                    .is_some_and(|&b| !firsts.contains(&char::from(b.to_ascii_lowercase())))
        };
        self.for_each_word_token(text, skip, |_, t| f(t));
    }

    /// The walk both read: each word `skip` leaves, its token from the memo
    /// or stemmed now (and remembered afterwards).
    fn for_each_word_token(
        &self,
        text: &str,
        skip: impl Fn(&str) -> bool,
        mut f: impl FnMut(usize, &str),
    ) {
        let mut word = String::new();
        let mut fresh: Vec<(String, Option<String>)> = Vec::new();
        {
            let memo = self.memo.read().unwrap_or_else(PoisonError::into_inner);
            for (at, raw) in text.unicode_word_indices() {
                if skip(raw) {
                    continue;
                }
                normalize_word_into(raw, &mut word);
                match memo.get(word.as_str()) {
                    Some(token) => {
                        if let Some(t) = token {
                            f(at, t);
                        }
                    }
                    None => {
                        let token = self.token(word.clone());
                        if let Some(t) = &token {
                            f(at, t);
                        }
                        fresh.push((word.clone(), token));
                    }
                }
            }
        }
        self.remember(fresh);
    }

    /// Add freshly stemmed words to the shared memo, up to its bound.
    fn remember(&self, fresh: Vec<(String, Option<String>)>) {
        if fresh.is_empty() {
            return;
        }
        let mut memo = self.memo.write().unwrap_or_else(PoisonError::into_inner);
        for (word, token) in fresh {
            if memo.len() >= STEM_MEMO_WORDS {
                break;
            }
            memo.insert(word, token);
        }
    }

    /// The token of one normalised word; None for an empty word or a stopword.
    fn token(&self, word: String) -> Option<String> {
        if word.is_empty() || (self.config.stopwords && is_stopword(&word)) {
            return None;
        }
        Some(match &self.stemmer {
            Some(stemmer) => match stemmer.stem(&word) {
                // Reuse the normalised buffer when stemming changed nothing.
                std::borrow::Cow::Borrowed(s) if s.len() == word.len() => word,
                stemmed => stemmed.into_owned(),
            },
            None => word,
        })
    }
}

/// Lowercase, fold the typographic apostrophe to ASCII (so the stopword list
/// needs one spelling of "don't") and strip an English possessive `'s`.
fn normalize_word_into(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.push_str(word);
        out.make_ascii_lowercase();
    } else {
        // compatibility-composed first (one term for "cafe\u{301}" and
        // "caf\u{e9}", "\u{fb01}le" and "file"), then the whole word at once:
        // a final sigma lower-cases by its context
        let composed: String = word.nfkc().collect();
        out.push_str(&composed.to_lowercase().replace('\u{2019}', "'"));
    }
    if out.len() > 2 && out.ends_with("'s") {
        out.truncate(out.len() - 2);
    }
}

/// Adverbs that only say when a query asks about, not what (the fact time
/// reads the tense: `cues::query_fact_time`); as BM25 terms they ranked
/// any turn that says "now" (`MemoryStore::query_tokens` leaves them out of
/// a query). "currently" and "presently" stay terms: a turn that says "I'm
/// currently reading ..." shares more than the tense with "What is she
/// currently reading?" (on LoCoMo dev, dropping them cost the BM25 ranking
/// a gold turn; the dev questions hold no "now").
pub const QUERY_TIME_WORDS: [&str; 3] = ["now", "nowadays", "anymore"];

/// Sorted (checked by a test) so lookup is a binary search over ~190 entries.
/// Besides the usual function words this drops question words and auxiliaries:
/// queries are mostly questions ("When did Caroline ...?") and those words
/// match every document that happens to contain them.
static STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "can't",
    "cannot",
    "could",
    "couldn't",
    "did",
    "didn't",
    "do",
    "does",
    "doesn't",
    "doing",
    "don't",
    "down",
    "during",
    "each",
    "either",
    "else",
    "ever",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn't",
    "has",
    "hasn't",
    "have",
    "haven't",
    "having",
    "he",
    "he'd",
    "he'll",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "i'd",
    "i'll",
    "i'm",
    "i've",
    "if",
    "in",
    "into",
    "is",
    "isn't",
    "it",
    "its",
    "itself",
    "just",
    "let's",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "mustn't",
    "my",
    "myself",
    "neither",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "s",
    "same",
    "shall",
    "shan't",
    "she",
    "she'd",
    "she'll",
    "should",
    "shouldn't",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "they'd",
    "they'll",
    "they're",
    "they've",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "upon",
    "very",
    "was",
    "wasn't",
    "we",
    "we'd",
    "we'll",
    "we're",
    "we've",
    "were",
    "weren't",
    "what",
    "whatever",
    "when",
    "whenever",
    "where",
    "whereas",
    "wherever",
    "whether",
    "which",
    "whichever",
    "while",
    "who",
    "whoever",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "won't",
    "would",
    "wouldn't",
    "yet",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// True for words the lexical index ignores. Expects a lowercased word
/// (as produced by the tokenizer, with `'` as the apostrophe).
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    /// `tokenize` as it reads without the memo: each word normalised and stemmed anew.
    fn unmemoised(t: &Tokenizer, text: &str) -> Vec<String> {
        text.unicode_words()
            .filter_map(|raw| {
                let mut word = String::new();
                normalize_word_into(raw, &mut word);
                t.token(word)
            })
            .collect()
    }

    use super::*;
    use proptest::prelude::*;

    fn toks(t: &Tokenizer, s: &str) -> Vec<String> {
        t.tokenize(s)
    }

    fn plain() -> Tokenizer {
        Tokenizer::new(TokenizerConfig {
            stem: false,
            stopwords: true,
        })
    }

    #[test]
    fn stopword_list_sorted_unique_lowercase() {
        for w in STOPWORDS.windows(2) {
            assert!(w[0] < w[1], "{:?} !< {:?}", w[0], w[1]);
        }
        for w in STOPWORDS {
            assert_eq!(*w, w.to_lowercase());
        }
    }

    proptest! {
        /// The memo changes nothing: one memo shared by several texts (so
        /// later texts hit words the earlier ones stored), either config.
        #[test]
        fn memo_gives_the_same_tokens(
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "Running", "runs", "ran", "the", "When", "Caroline's", "don\u{2019}t",
                        "café", "CAFÉ", "x", "2024", "über", "flies", "flying", "-", "?", " ",
                    ]),
                    0..40,
                ).prop_map(|words| words.join(" ")),
                1..6,
            ),
            stem in proptest::bool::ANY,
            stopwords in proptest::bool::ANY,
            raw in "\\PC{0,80}",
        ) {
            // each text twice: the second time every word's token is remembered
            let t = Tokenizer::new(TokenizerConfig { stem, stopwords });
            for _ in 0..2 {
                for text in texts.iter().chain(std::iter::once(&raw)) {
                    prop_assert_eq!(t.tokenize(text), unmemoised(&t, text));
                    // a clone shares the memo
                    prop_assert_eq!(t.clone().tokenize(text), unmemoised(&t, text));
                }
            }
        }
    }

    /// Words whose stems rewrite their ends (Porter2's exceptions and
    /// suffix rules), capitals outside ASCII, digits, underscores.
    const TRICKY: &[&str] = &[
        "dying",
        "lying",
        "tying",
        "skies",
        "skis",
        "idly",
        "gently",
        "ugly",
        "early",
        "only",
        "singly",
        "news",
        "howe",
        "atlas",
        "cosmos",
        "bias",
        "andes",
        "generously",
        "happy",
        "relational",
        "sensitivity",
        "possibility",
        "famously",
        "yelling",
        "Yesterday",
        "İstanbul",
        "Σοφία",
        "ΣΟΦΟΣ",
        "Ärger",
        "Œuvre",
        "_private",
        "3D",
        "x86",
        "Caroline's",
        "don\u{2019}t",
        "naïve",
        "résumé",
        "ﬁnal",
        "Ǆemal",
        "ǅungla",
    ];

    proptest! {
        /// Skipping the words whose first char starts none of the wanted
        /// tokens loses none of them: the tokens that start with one of
        /// `firsts`, in order, are `tokenize`'s that do, and every token
        /// given is one of `tokenize`'s, in its order.
        #[test]
        fn tokens_starting_with_given_chars_are_tokenizes(
            words in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(TRICKY.to_vec()).prop_map(String::from),
                    "\\PC{1,12}",
                    "[a-zA-Z']{1,10}",
                ],
                0..30,
            ),
            seps in proptest::collection::vec(proptest::sample::select(vec![" ", ". ", ", ", "-", "\n"]), 1..4),
            firsts in proptest::collection::vec(proptest::char::any(), 0..6),
            stem in proptest::bool::ANY,
        ) {
            let text: String = words
                .iter()
                .zip(seps.iter().cycle())
                .flat_map(|(w, s)| [w.as_str(), s])
                .collect();
            let t = Tokenizer::new(TokenizerConfig { stem, stopwords: true });
            let all = t.tokenize(&text);
            // the wanted chars: some drawn, plus the first chars of half the tokens
            let mut wanted = firsts.clone();
            wanted.extend(all.iter().step_by(2).filter_map(|tok| tok.chars().next()));
            let want: Vec<&String> = all
                .iter()
                .filter(|tok| tok.chars().next().is_some_and(|c| wanted.contains(&c)))
                .collect();
            let mut got = Vec::new();
            t.for_each_token_starting(&text, &wanted, |tok| got.push(tok.to_owned()));
            // a word it does not skip (not ASCII) gives its token whatever it starts with
            let starts = |tok: &&String| tok.chars().next().is_some_and(|c| wanted.contains(&c));
            prop_assert_eq!(got.iter().filter(starts).collect::<Vec<_>>(), want);
            // and what it gives is tokenize's, in order
            let mut rest = all.iter();
            prop_assert!(got.iter().all(|g| rest.any(|a| a == g)));
        }
    }

    #[test]
    fn every_token_of_an_ascii_word_starts_with_its_first_char_lowercased() {
        let t = Tokenizer::default();
        for w in TRICKY.iter().filter(|w| w.is_ascii()) {
            for tok in t.tokenize(w) {
                let first = w.chars().next().and_then(|c| c.to_lowercase().next());
                assert_eq!(tok.chars().next(), first, "{w} -> {tok}");
            }
        }
    }

    #[test]
    fn tokenizer_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Tokenizer>();
    }

    #[test]
    fn segmentation_punctuation_and_unicode() {
        let t = plain();
        assert_eq!(
            toks(&t, "Hello, world! Foo-bar; (baz) \"qux\"..."),
            ["hello", "world", "foo", "bar", "baz", "qux"]
        );
        assert_eq!(
            toks(&t, "Café MÜNCHEN naïve Straße"),
            ["café", "münchen", "naïve", "straße"]
        );
        assert_eq!(toks(&t, "東京 tokyo"), ["東", "京", "tokyo"]);
        // Numbers survive, including decimals and years.
        assert_eq!(
            toks(&t, "In 2023 she ran 3.5 km, 42 times"),
            ["2023", "ran", "3.5", "km", "42", "times"]
        );
    }

    #[test]
    fn one_term_however_a_word_is_composed() {
        let t = plain();
        // decomposed (e + combining acute), composed, a ligature, full width
        assert_eq!(toks(&t, "cafe\u{301} Zoe\u{308}"), ["café", "zoë"]);
        assert_eq!(toks(&t, "caf\u{e9} Zo\u{eb}"), ["café", "zoë"]);
        assert_eq!(
            toks(&t, "\u{fb01}le \u{ff23}\u{ff25}\u{ff2c}\u{ff2c}\u{ff2f}"),
            ["file", "cello"]
        );
        let stemmed = Tokenizer::default();
        assert_eq!(
            stemmed.tokenize("re\u{301}sume\u{301}s"),
            stemmed.tokenize("r\u{e9}sum\u{e9}s")
        );
    }

    #[test]
    fn possessives_stripped() {
        let t = plain();
        assert_eq!(toks(&t, "Caroline's dog"), ["caroline", "dog"]);
        assert_eq!(toks(&t, "Caroline’s dog"), ["caroline", "dog"]);
        assert_eq!(toks(&t, "JAMES'S car"), ["james", "car"]);
        // "it's" -> "it", a stopword; contractions with the curly apostrophe are stopwords too.
        assert_eq!(toks(&t, "it's raining, don’t go"), ["raining", "go"]);
    }

    #[test]
    fn stopwords_including_question_words() {
        let t = plain();
        assert_eq!(
            toks(&t, "When did Caroline go to the LGBTQ support group?"),
            ["caroline", "go", "lgbtq", "support", "group"]
        );
        assert!(toks(
            &t,
            "what where who whom whose which why how did do does is are was were has have had"
        )
        .is_empty());
        for w in [
            "when", "what", "where", "who", "whom", "whose", "which", "why", "how", "did", "do",
            "does", "is", "are", "was", "were", "has", "have", "had", "the", "a", "of",
        ] {
            assert!(is_stopword(w), "{w}");
        }
        for w in ["caroline", "dog", "2023", "support"] {
            assert!(!is_stopword(w), "{w}");
        }
        let keep = Tokenizer::new(TokenizerConfig {
            stem: false,
            stopwords: false,
        });
        assert_eq!(toks(&keep, "When did she go"), ["when", "did", "she", "go"]);
    }

    #[test]
    fn stemming_on_and_off() {
        let stem = Tokenizer::default();
        assert!(stem.config().stem && stem.config().stopwords);
        assert_eq!(
            toks(&stem, "running runs ran easily connections"),
            ["run", "run", "ran", "easili", "connect"]
        );
        assert_eq!(toks(&stem, "Caroline's painting"), ["carolin", "paint"]);
        assert_eq!(
            toks(&plain(), "running connections"),
            ["running", "connections"]
        );
        // Stopwords are checked before stemming ("does" must not survive as "doe").
        assert!(toks(&stem, "does having").is_empty());
    }

    #[test]
    fn empty_and_whitespace_give_nothing() {
        let t = Tokenizer::default();
        assert!(t.tokenize("").is_empty());
        assert!(t.tokenize("   \t\n  ").is_empty());
        assert!(t.tokenize("?!... --- ,,,").is_empty());
    }
}
