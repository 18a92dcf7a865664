//! Tokenizer for the lexical index: Unicode word segmentation, lowercasing,
//! an English stopword list that also drops question words, optional stemming.
//! (STUB: interface fixed, implementation pending.)

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenizerConfig {
    /// Snowball English stemming.
    pub stem: bool,
    /// Drop stopwords (including question words such as "when", "did", "what").
    pub stopwords: bool,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        Self { stem: true, stopwords: true }
    }
}

#[derive(Clone)]
pub struct Tokenizer {
    config: TokenizerConfig,
}

impl Tokenizer {
    pub fn new(config: TokenizerConfig) -> Self {
        Self { config }
    }

    pub fn config(&self) -> TokenizerConfig {
        self.config
    }

    /// Lowercased, segmented, filtered (and optionally stemmed) tokens, in text order.
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        let _ = text;
        todo!()
    }
}

/// True for words the lexical index ignores.
pub fn is_stopword(word: &str) -> bool {
    let _ = word;
    todo!()
}
