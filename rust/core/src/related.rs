//! Related words: for a rare query word, the words whose meaning is close to
//! it, so the lexical ranking also finds turns that say "job" for "work" or
//! "children" for "kids".
//!
//! The table (`data/related_words.bin`, built by
//! `scripts/build_related_words.py`) covers bert-base-uncased's whole-word
//! vocabulary; a word's related words are the others whose vectors under
//! the default embedder (each word embedded alone) are closest to its own,
//! with their cosine. It reads no dataset. Compiled into the core, parsed
//! on first use.

use std::collections::HashMap;
use std::sync::LazyLock;

const MAGIC: &[u8] = b"JVRW1\n";

/// The parsed table: words, and each word's related words with their
/// similarity, most similar first.
pub struct RelatedWords {
    words: Vec<&'static str>,
    index: HashMap<&'static str, u16>,
    /// Word `i`'s entries are `entries[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    /// (word index, similarity x 255).
    entries: Vec<(u16, u8)>,
}

static TABLE: LazyLock<RelatedWords> = LazyLock::new(|| {
    RelatedWords::parse(include_bytes!("../data/related_words.bin"))
        .expect("the compiled-in related-words table parses")
});

/// The table compiled into the core.
pub fn table() -> &'static RelatedWords {
    &TABLE
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl RelatedWords {
    /// Read the table's bytes (see `scripts/build_related_words.py` for
    /// the format); None when they are not a well-formed table.
    pub fn parse(b: &'static [u8]) -> Option<Self> {
        let rest = b.strip_prefix(MAGIC)?;
        let at = MAGIC.len();
        let n = u32_at(b, at)? as usize;
        let len = u32_at(b, at + 4)? as usize;
        let words_at = at + 8;
        let block = std::str::from_utf8(rest.get(8..8 + len)?).ok()?;
        let words: Vec<&'static str> = if n == 0 {
            Vec::new()
        } else {
            block.split('\n').collect()
        };
        if words.len() != n || n >= usize::from(u16::MAX) {
            return None;
        }
        let off_at = words_at + len;
        let offsets: Vec<u32> = (0..=n)
            .map(|i| u32_at(b, off_at + 4 * i))
            .collect::<Option<_>>()?;
        let entries_at = off_at + 4 * (n + 1);
        let raw = b.get(entries_at..)?;
        if raw.len() % 3 != 0
            || offsets.windows(2).any(|w| w[0] > w[1])
            || offsets[n] as usize != raw.len() / 3
        {
            return None;
        }
        let entries: Vec<(u16, u8)> = raw
            .chunks_exact(3)
            .map(|c| (u16::from_le_bytes([c[0], c[1]]), c[2]))
            .collect();
        if entries.iter().any(|&(j, _)| usize::from(j) >= n) {
            return None;
        }
        let index = words
            .iter()
            .enumerate()
            .map(|(i, w)| (*w, i as u16))
            .collect();
        Some(Self {
            words,
            index,
            offsets,
            entries,
        })
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The words related to `word` (lower-case), with their similarity in
    /// [0, 1], most similar first; none for a word the table lacks.
    pub fn related(&self, word: &str) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        let range = self.index.get(word).map_or(0..0, |&i| {
            let i = usize::from(i);
            self.offsets[i] as usize..self.offsets[i + 1] as usize
        });
        self.entries[range]
            .iter()
            .map(|&(j, s)| (self.words[usize::from(j)], f64::from(s) / 255.0))
    }
}

/// How a query's rare words are widened with related words (see
/// `MemoryStore::related_terms`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpandConfig {
    /// Off: the lexical ranking reads the query's own terms only.
    pub enabled: bool,
    /// A query word is widened when at most this share of the searched
    /// nodes holds it (a common word already finds its turns; widening it
    /// spreads its weight over many more).
    pub max_df_share: f64,
    /// Related words less similar than this are not read.
    pub min_similarity: f64,
    /// At most this many related terms per query word (those the memory holds).
    pub per_word: usize,
    /// A related term weighs this times its similarity (a query term 1).
    pub weight: f64,
}

impl Default for ExpandConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_df_share: 0.01,
            min_similarity: 0.6,
            per_word: 3,
            weight: 0.5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_table_parses_and_relates_words() {
        let t = table();
        assert!(t.len() > 20_000);
        let work: Vec<(&str, f64)> = t.related("work").collect();
        assert!(work.iter().any(|&(w, s)| w == "job" && s > 0.6), "{work:?}");
        assert!(work.windows(2).all(|p| p[0].1 >= p[1].1));
        assert!(work
            .iter()
            .all(|&(w, s)| w != "work" && (0.0..=1.0).contains(&s)));
        assert_eq!(t.related("notawordhere").count(), 0);
    }

    #[test]
    fn a_malformed_table_is_refused() {
        assert!(RelatedWords::parse(b"nope").is_none());
        assert!(RelatedWords::parse(b"JVRW1\n\x01\x00\x00\x00\x02\x00\x00\x00ab").is_none());
        // one word, no entries: well formed
        let ok: &'static [u8] =
            b"JVRW1\n\x01\x00\x00\x00\x02\x00\x00\x00ab\x00\x00\x00\x00\x00\x00\x00\x00";
        let t = RelatedWords::parse(ok).expect("parses");
        assert_eq!(t.len(), 1);
        assert_eq!(t.related("ab").count(), 0);
        // an entry pointing past the words
        let bad: &'static [u8] =
            b"JVRW1\n\x01\x00\x00\x00\x02\x00\x00\x00ab\x00\x00\x00\x00\x01\x00\x00\x00\x05\x00\xff";
        assert!(RelatedWords::parse(bad).is_none());
    }
}
