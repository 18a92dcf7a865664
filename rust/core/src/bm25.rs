//! Incremental BM25 over token lists.
//!
//! Scoring (Lucene's non-negative idf):
//!
//! ```text
//! idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//! score(q, d) = sum over query tokens t of
//!               idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * dl(d) / avgdl))
//! ```
//!
//! `N` and `avgdl` are over the currently indexed documents. A query token that
//! occurs twice in the query contributes twice (the sum runs over query token
//! occurrences, not distinct terms), so repeating a word weights it up.
//!
//! Layout: terms are interned to dense `u32` ids; each term keeps a posting
//! vector of `(doc, tf and doc length packed)` sorted by doc; each document
//! keeps its `(term, tf)` pairs (for removal and for [`Bm25Index::score`]) and
//! its length. Document ids are the memory's dense node ids, so per-document
//! data are plain vectors indexed by id.
//!
//! Search is term-at-a-time into a per-thread dense score buffer, rarest term
//! first, with exact MaxScore-style skipping of frequent terms once they can
//! no longer change the top k, then a thresholded partial selection.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::Allowed;
use crate::prefetch;
use crate::types::NodeId;

/// How many of a document's (term, count) pairs `score_weighted_scoped`
/// asks the cache for ahead of reading them (eight lines).
const PREFETCH_TERMS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// k1 finite and >= 0, b in [0, 1].
    pub fn validate(&self) -> Result<()> {
        if !(self.k1.is_finite() && self.k1 >= 0.0) {
            return Err(Error::config(format!(
                "BM25 k1 must be a finite number >= 0, got {}",
                self.k1
            )));
        }
        if !(self.b.is_finite() && (0.0..=1.0).contains(&self.b)) {
            return Err(Error::config(format!(
                "BM25 b must be a finite number in [0, 1], got {}",
                self.b
            )));
        }
        Ok(())
    }
}

/// Postings and per-document arrays address documents with `u32`.
pub const MAX_DOC_ID: NodeId = u32::MAX as NodeId - 1;

/// `(term, tf)` in a document's list; `(doc, packed tf and length)` in a
/// term's list (see [`pack`]).
type Posting = (u32, u32);

/// Escape bit of a packed posting: the low 31 bits are then the tf and the
/// length is read from `doc_len`.
const ESCAPE: u32 = 1 << 31;
const TF_BITS: u32 = 3;
const TF_MASK: u32 = (1 << TF_BITS) - 1;

/// Postings carry the document length next to the tf, so the hot loop of
/// `search` reads one sequential stream: `dl << 3 | tf` for tf < 8 and
/// dl < 2^28, otherwise `ESCAPE | tf`. Small packed values index a per-query
/// table of precomputed tf parts directly.
fn pack(tf: u32, dl: u32) -> u32 {
    if tf <= TF_MASK && dl < (1 << (31 - TF_BITS)) {
        dl << TF_BITS | tf
    } else {
        // A tf of 2^31 or more needs a document of over 2 billion tokens.
        ESCAPE | tf.min(ESCAPE - 1)
    }
}

/// `(tf, dl)` of a packed posting of document `d`.
#[inline]
fn unpack(p: u32, d: u32, doc_len: &[u32]) -> (u32, u32) {
    if p & ESCAPE == 0 {
        (p & TF_MASK, p >> TF_BITS)
    } else {
        (p & !ESCAPE, doc_len[d as usize])
    }
}

/// A document that is present. `terms` is sorted by term id.
struct Doc {
    len: u32,
    terms: Box<[Posting]>,
}

/// One document's terms in a [`LexicalSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LexicalDoc {
    /// (vocabulary position, count), ascending by position.
    pub terms: Vec<(u32, u32)>,
    /// Its token count (the counts' sum).
    pub len: u32,
}

/// The lexical index as a snapshot keeps it: what each document's text
/// tokenized to, so a load need not tokenize again (the index's own layout
/// is rebuilt from it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LexicalSnapshot {
    /// Every term some document holds, in term-id order.
    pub vocabulary: Vec<String>,
    pub docs: Vec<LexicalDoc>,
}

pub struct Bm25Index {
    params: Bm25Params,
    /// Term text -> term id. The `Arc<str>` is shared with `term_text`.
    term_ids: HashMap<Arc<str>, u32>,
    /// Term id -> text, `None` for a recycled slot (its df fell to zero).
    term_text: Vec<Option<Arc<str>>>,
    /// Term id -> postings sorted by doc id; `len()` is the document frequency.
    postings: Vec<Vec<Posting>>,
    free_terms: Vec<u32>,
    /// Doc id -> document, `None` when absent.
    docs: Vec<Option<Doc>>,
    /// Doc id -> token count (0 when absent); separate from `docs` so the hot
    /// loop of `search` reads a dense `u32` array.
    doc_len: Vec<u32>,
    n_docs: usize,
    total_len: u64,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index")
            .field("params", &self.params)
            .field("docs", &self.n_docs)
            .field("terms", &self.term_ids.len())
            .field("total_len", &self.total_len)
            .finish()
    }
}

/// Per-thread scratch for `search` and `score_terms_scoped`: searches run
/// concurrently under a shared read lock, so the buffers cannot live in the
/// index. Invariants between calls: every entry of `scores` is 0.0, and
/// every entry of `weight_by_term` is NaN (not a query term).
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
    cands: Vec<(u32, f32)>,
    table: Vec<f32>,
    weight_by_term: Vec<f32>,
}

/// Counts pruned searches, so tests can check the pruning path runs.
#[cfg(test)]
static PRUNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Counts the terms a pruned search finishes by lookups and by a pass over
/// their postings, so tests can check both ways run.
#[cfg(test)]
static LOOKED_UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
#[cfg(test)]
static SCANNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Run `f` on this thread's scratch, or on a fresh one when it is in use
/// already (re-entered from inside a search's `accept`).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// N and total document length of the documents a ranking counts.
struct CorpusStats {
    n_docs: usize,
    total_len: u64,
}

impl CorpusStats {
    fn avg_doc_len(&self) -> f64 {
        if self.n_docs == 0 {
            0.0
        } else {
            self.total_len as f64 / self.n_docs as f64
        }
    }
}

/// Query term after interning: its postings and its hoisted weight
/// `count * idf * (k1 + 1)`.
struct QueryTerm<'a> {
    id: u32,
    postings: &'a [Posting],
    weight: f32,
    /// The smallest document the term may count for (0: any; see
    /// [`Bm25Index::search_terms_recent`]).
    min_doc: u32,
}

/// Score desc, then id asc. Scores are finite and positive.
#[inline]
fn rank_cmp(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// `tf / (tf + k1 * (1 - b + b * dl / avgdl))` with `c1 = k1 * (1 - b)`,
/// `c2 = k1 * b / avgdl`. Every scoring path goes through this (or the table
/// built from it) so all paths agree bit for bit.
#[inline]
fn tf_part(tf: u32, dl: u32, c1: f32, c2: f32) -> f32 {
    let tf = tf as f32;
    tf / (tf + (c1 + c2 * dl as f32))
}

/// Per-query table of `tf_part` indexed by packed posting value, i.e. for
/// tf < 8 and dl < 128; built when a term has enough postings to amortise it.
const TABLE_LEN: usize = 128 << TF_BITS;
const TABLE_MIN_POSTINGS: usize = 2 * TABLE_LEN;

/// Fill the per-query table of `tf_part` by packed posting value, once,
/// for the first term with enough postings to amortise it.
fn table_for(table: &mut Vec<f32>, postings: usize, c1: f32, c2: f32) {
    if postings < TABLE_MIN_POSTINGS || !table.is_empty() {
        return;
    }
    table.extend((0..TABLE_LEN as u32).map(|p| match p & TF_MASK {
        0 => 0.0, // no such posting (tf >= 1)
        tf => tf_part(tf, p >> TF_BITS, c1, c2),
    }));
}

/// `tf_part` of posting `p` of document `d`: division-free through the
/// table for the common small (tf, dl), the same value either way.
#[inline]
fn posting_part(table: &[f32], p: u32, d: u32, doc_len: &[u32], c1: f32, c2: f32) -> f32 {
    match table.get(p as usize) {
        Some(&g) => g,
        None => {
            let (tf, dl) = unpack(p, d, doc_len);
            tf_part(tf, dl, c1, c2)
        }
    }
}

/// How many postings of a term one sequential pass reads in the time one
/// lookup of the term in a document's term list takes: after a cut, a term
/// with fewer postings than this many times the touched documents is looked
/// up in each of them, otherwise its postings are read once.
const LOOKUP_COST: usize = 128;

/// Top-k selection with a running threshold: candidates collect in a buffer,
/// and whenever it holds 2k (at least 64) it shrinks to the best k with
/// `select_nth_unstable_by`; callers skip docs below the k-th score without
/// calling the filter. Ties with the k-th score may still win on id, so the
/// test is `s >= threshold`.
struct TopK<'a> {
    k: usize,
    cap: usize,
    threshold: f32,
    cands: &'a mut Vec<(u32, f32)>,
}

impl<'a> TopK<'a> {
    fn new(k: usize, cands: &'a mut Vec<(u32, f32)>) -> Self {
        cands.clear();
        Self {
            k,
            cap: (2 * k).max(64),
            threshold: 0.0,
            cands,
        }
    }

    #[inline]
    fn offer(&mut self, d: u32, s: f32, accept: Option<&dyn Fn(NodeId) -> bool>) {
        if accept.is_some_and(|f| !f(NodeId::from(d))) {
            return;
        }
        self.cands.push((d, s));
        if self.cands.len() >= self.cap {
            self.shrink();
            self.threshold = self.cands[self.k - 1].1;
        }
    }

    fn shrink(&mut self) {
        if self.cands.len() > self.k {
            self.cands.select_nth_unstable_by(self.k - 1, rank_cmp);
            self.cands.truncate(self.k);
        }
    }

    fn finish(mut self) -> Vec<(NodeId, f32)> {
        self.shrink();
        self.cands.sort_unstable_by(rank_cmp);
        self.cands
            .iter()
            .map(|&(d, s)| (NodeId::from(d), s))
            .collect()
    }
}

/// The k-th best score among the accepted touched docs, if there are k of them.
fn kth_partial(
    scores: &[f32],
    touched: &[u32],
    k: usize,
    accept: Option<&dyn Fn(NodeId) -> bool>,
    cands: &mut Vec<(u32, f32)>,
) -> Option<f32> {
    if touched.len() < k {
        return None;
    }
    cands.clear();
    cands.extend(
        touched
            .iter()
            .filter(|&&d| accept.is_none_or(|f| f(NodeId::from(d))))
            .map(|&d| (d, scores[d as usize])),
    );
    let th = (cands.len() >= k).then(|| *cands.select_nth_unstable_by(k - 1, rank_cmp).1);
    cands.clear();
    th.map(|c| c.1)
}

impl Bm25Index {
    pub fn new(params: Bm25Params) -> Result<Self> {
        params.validate()?;
        Ok(Self {
            params,
            term_ids: HashMap::new(),
            term_text: Vec::new(),
            postings: Vec::new(),
            free_terms: Vec::new(),
            docs: Vec::new(),
            doc_len: Vec::new(),
            n_docs: 0,
            total_len: 0,
        })
    }

    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.n_docs
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, doc: NodeId) -> bool {
        usize::try_from(doc)
            .ok()
            .and_then(|i| self.docs.get(i))
            .is_some_and(Option::is_some)
    }

    /// Number of distinct terms in the indexed documents.
    pub fn vocabulary_len(&self) -> usize {
        self.term_ids.len()
    }

    /// Number of indexed documents containing `term`.
    pub fn doc_freq(&self, term: &str) -> usize {
        self.term_ids
            .get(term)
            .map_or(0, |&t| self.postings[t as usize].len())
    }

    /// Average document length in tokens (0 when empty).
    pub fn avg_doc_len(&self) -> f64 {
        if self.n_docs == 0 {
            0.0
        } else {
            self.total_len as f64 / self.n_docs as f64
        }
    }

    /// Index a document. Panics-free: re-adding an existing id replaces it.
    /// Ids above [`MAX_DOC_ID`] are not indexed; use [`Bm25Index::try_add`]
    /// to get an error for them instead.
    pub fn add(&mut self, doc: NodeId, tokens: &[String]) {
        let _ = self.try_add(doc, tokens);
    }

    /// Like [`Bm25Index::add`], but rejects ids above [`MAX_DOC_ID`]
    /// (nothing changes on error).
    pub fn try_add(&mut self, doc: NodeId, tokens: &[String]) -> Result<()> {
        self.try_add_each(doc, |push| tokens.iter().for_each(|t| push(t)))
    }

    /// [`Bm25Index::try_add`] with the tokens handed over one at a time:
    /// `tokens` calls its argument once per token, in order (a tokenizer
    /// feeds the index without building a token list).
    pub fn try_add_each(
        &mut self,
        doc: NodeId,
        tokens: impl FnOnce(&mut dyn FnMut(&str)),
    ) -> Result<()> {
        self.add_each(doc, tokens, false).map(drop)
    }

    /// [`Bm25Index::try_add_each`], and the term id of every token, in the
    /// order they came (what a caller needs to find its tokens in the
    /// document's term list without looking each up again).
    pub fn try_add_each_ids(
        &mut self,
        doc: NodeId,
        tokens: impl FnOnce(&mut dyn FnMut(&str)),
    ) -> Result<Vec<u32>> {
        self.add_each(doc, tokens, true)
    }

    /// `try_add_each`; the ids in token order when `keep_order` (else none).
    fn add_each(
        &mut self,
        doc: NodeId,
        tokens: impl FnOnce(&mut dyn FnMut(&str)),
        keep_order: bool,
    ) -> Result<Vec<u32>> {
        if doc > MAX_DOC_ID {
            return Err(Error::invalid(format!(
                "BM25 document id {doc} exceeds the maximum {MAX_DOC_ID}"
            )));
        }
        // first: a term only this document held is recycled, not reused
        self.remove(doc);
        let d = doc as u32;

        // Intern and count: sort the term ids, then run-length encode.
        let mut ids: Vec<u32> = Vec::new();
        tokens(&mut |tok| ids.push(self.intern(tok)));
        let n_tokens = ids.len();
        let in_order = if keep_order { ids.clone() } else { Vec::new() };
        ids.sort_unstable();
        let mut terms: Vec<Posting> = Vec::with_capacity(ids.len());
        for t in ids {
            match terms.last_mut() {
                Some((last, tf)) if *last == t => *tf += 1,
                _ => terms.push((t, 1)),
            }
        }
        self.add_counted(d, terms, u32::try_from(n_tokens).unwrap_or(u32::MAX));
        Ok(in_order)
    }

    /// Add document `d` (not indexed) from its (term id, count) pairs,
    /// ascending by id, and its length.
    fn add_counted(&mut self, d: u32, terms: Vec<Posting>, len: u32) {
        for &(t, tf) in &terms {
            let tf = pack(tf, len);
            let list = &mut self.postings[t as usize];
            // Ids are allocated in increasing order, so this is almost always a push.
            match list.last() {
                Some(&(last, _)) if last > d => {
                    let pos = list.partition_point(|&(x, _)| x < d);
                    list.insert(pos, (d, tf));
                }
                _ => list.push((d, tf)),
            }
        }

        let i = d as usize;
        if self.docs.len() <= i {
            self.docs.resize_with(i + 1, || None);
            self.doc_len.resize(i + 1, 0);
        }
        self.docs[i] = Some(Doc {
            len,
            terms: terms.into_boxed_slice(),
        });
        self.doc_len[i] = len;
        self.n_docs += 1;
        self.total_len += u64::from(len);
    }

    /// The documents' terms as a snapshot keeps them: the vocabulary in
    /// term-id order, and per document of `docs` (in that order) its
    /// (vocabulary position, count) pairs, ascending, and its length. An
    /// unindexed document reads as empty.
    pub fn lexical_snapshot(&self, docs: impl IntoIterator<Item = NodeId>) -> LexicalSnapshot {
        let mut position = vec![u32::MAX; self.term_text.len()];
        let mut vocabulary = Vec::new();
        for (t, text) in self.term_text.iter().enumerate() {
            if let Some(text) = text {
                position[t] = vocabulary.len() as u32;
                vocabulary.push(text.to_string());
            }
        }
        let docs = docs
            .into_iter()
            .map(|d| {
                match usize::try_from(d)
                    .ok()
                    .and_then(|i| self.docs.get(i))
                    .and_then(Option::as_ref)
                {
                    Some(doc) => LexicalDoc {
                        terms: doc
                            .terms
                            .iter()
                            .map(|&(t, tf)| (position[t as usize], tf))
                            .collect(),
                        len: doc.len,
                    },
                    None => LexicalDoc::default(),
                }
            })
            .collect();
        LexicalSnapshot { vocabulary, docs }
    }

    /// Index documents from a [`LexicalSnapshot`] (`ids`: the document of
    /// each entry) into an index that holds none yet, without tokenizing:
    /// the vocabulary is interned in its order, so term ids keep the order
    /// they had when the snapshot was taken (and sums over a query's terms
    /// their order). Checked first, nothing changed on error: distinct
    /// terms, one entry per id, positions in range and ascending, counts
    /// at least 1 summing to the length, every term used.
    pub fn restore_lexical(&mut self, ids: &[NodeId], snap: LexicalSnapshot) -> Result<()> {
        let bad = |why: String| Err(Error::invalid(format!("lexical index: {why}")));
        if self.n_docs != 0 || !self.term_text.is_empty() {
            return bad("restored into an index that is not empty".into());
        }
        if snap.docs.len() != ids.len() {
            return bad(format!(
                "{} documents for {} nodes",
                snap.docs.len(),
                ids.len()
            ));
        }
        let n_terms = snap.vocabulary.len();
        let mut used = vec![false; n_terms];
        for (k, (&id, doc)) in ids.iter().zip(&snap.docs).enumerate() {
            if id > MAX_DOC_ID || (k > 0 && id <= ids[k - 1]) {
                return bad(format!("document id {id} out of order or range"));
            }
            let mut total = 0u64;
            let mut previous: Option<u32> = None;
            for &(p, tf) in &doc.terms {
                if (p as usize) >= n_terms || previous.is_some_and(|q| p <= q) || tf == 0 {
                    return bad(format!("node {id}: term entries out of order or range"));
                }
                previous = Some(p);
                used[p as usize] = true;
                total += u64::from(tf);
            }
            if total != u64::from(doc.len) {
                return bad(format!(
                    "node {id}: counts sum to {total}, length {}",
                    doc.len
                ));
            }
        }
        if let Some(p) = used.iter().position(|u| !u) {
            return bad(format!("term {p} belongs to no document"));
        }
        let mut seen: HashSet<&str> = HashSet::with_capacity(n_terms);
        if !snap.vocabulary.iter().all(|t| seen.insert(t)) {
            return bad("a term is listed twice".into());
        }
        drop(seen);
        for text in snap.vocabulary {
            self.intern(&text);
        }
        for (&id, doc) in ids.iter().zip(snap.docs) {
            self.add_counted(id as u32, doc.terms, doc.len);
        }
        Ok(())
    }

    fn intern(&mut self, tok: &str) -> u32 {
        if let Some(&t) = self.term_ids.get(tok) {
            return t;
        }
        let text: Arc<str> = Arc::from(tok);
        let t = match self.free_terms.pop() {
            Some(t) => {
                self.term_text[t as usize] = Some(text.clone());
                t
            }
            None => {
                let t = u32::try_from(self.postings.len()).expect("more than 2^32 distinct terms");
                self.term_text.push(Some(text.clone()));
                self.postings.push(Vec::new());
                t
            }
        };
        self.term_ids.insert(text, t);
        t
    }

    /// Remove a document; false if it was not indexed.
    pub fn remove(&mut self, doc: NodeId) -> bool {
        let Some(slot) = usize::try_from(doc).ok().and_then(|i| self.docs.get_mut(i)) else {
            return false;
        };
        let Some(entry) = slot.take() else {
            return false;
        };
        let d = doc as u32;
        for &(t, _) in entry.terms.iter() {
            let list = &mut self.postings[t as usize];
            if let Ok(pos) = list.binary_search_by_key(&d, |&(x, _)| x) {
                list.remove(pos);
            }
            if list.is_empty() {
                // Recycle the term so vocabulary does not grow without bound under churn.
                *list = Vec::new();
                if let Some(text) = self.term_text[t as usize].take() {
                    self.term_ids.remove(&*text);
                }
                self.free_terms.push(t);
            }
        }
        self.doc_len[doc as usize] = 0;
        self.n_docs -= 1;
        self.total_len -= u64::from(entry.len);
        true
    }

    /// Distinct known query terms with their occurrence counts.
    pub(crate) fn query_terms(&self, query: &[String]) -> Vec<(u32, u32)> {
        let mut ids: Vec<u32> = query
            .iter()
            .filter_map(|q| self.term_ids.get(q.as_str()).copied())
            .collect();
        ids.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ids.len());
        for t in ids {
            match out.last_mut() {
                Some((last, c)) if *last == t => *c += 1,
                _ => out.push((t, 1)),
            }
        }
        out
    }

    /// `(k1 * (1 - b), k1 * b / avgdl)`: the length normaliser is `c1 + c2 * dl`.
    fn norm_consts(&self, stats: &CorpusStats) -> (f32, f32) {
        let Bm25Params { k1, b } = self.params;
        let avgdl = stats.avg_doc_len();
        let c2 = if avgdl > 0.0 {
            (f64::from(k1) * f64::from(b) / avgdl) as f32
        } else {
            0.0
        };
        (k1 * (1.0 - b), c2)
    }

    fn idf(stats: &CorpusStats, df: usize) -> f64 {
        let n = stats.n_docs as f64;
        let df = df as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Known query terms (with a document among the allowed ones), highest
    /// weight (rarest) first: see the pruning in `search_with`.
    fn weighted_terms(
        &self,
        query: &[(u32, u32)],
        allowed: Option<&Allowed>,
        stats: &CorpusStats,
    ) -> Vec<QueryTerm<'_>> {
        self.terms_weighted_by(
            query.iter().map(|&(id, count)| (id, f64::from(count))),
            allowed,
            stats,
        )
    }

    /// `weighted_terms` of terms with any positive multiplier (a query
    /// term's count, or a related term's weight).
    fn terms_weighted_by(
        &self,
        query: impl Iterator<Item = (u32, f64)>,
        allowed: Option<&Allowed>,
        stats: &CorpusStats,
    ) -> Vec<QueryTerm<'_>> {
        let k1p1 = f64::from(self.params.k1) + 1.0;
        let mut terms: Vec<QueryTerm<'_>> = query
            .filter_map(|(id, times)| {
                let postings = self.postings.get(id as usize)?.as_slice();
                let df = Self::df(postings, allowed);
                (df > 0 && times > 0.0).then(|| QueryTerm {
                    id,
                    postings,
                    weight: (times * Self::idf(stats, df) * k1p1) as f32,
                    min_doc: 0,
                })
            })
            .collect();
        terms.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.id.cmp(&b.id)));
        terms
    }

    /// [`Bm25Index::search_terms_scoped`] of terms that each weigh a real
    /// multiple (its count for a query term; a related term less than one):
    /// a term's part of a score is that multiple of its BM25 part.
    pub fn search_weighted_scoped(
        &self,
        query: &[(u32, f64)],
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Vec<(NodeId, f32)> {
        self.search_multiples(query.iter().copied(), k, allowed, None)
    }

    /// The top `k` of terms weighing the given multiples (see
    /// `terms_weighted_by`), among the documents `allowed` and `accept` let
    /// through.
    fn search_multiples(
        &self,
        query: impl Iterator<Item = (u32, f64)>,
        k: usize,
        allowed: Option<&Allowed>,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        if k == 0 || self.n_docs == 0 {
            return Vec::new();
        }
        let stats = self.stats(allowed);
        if stats.n_docs == 0 {
            return Vec::new();
        }
        // no more results than documents, whatever the caller asked for
        let k = k.min(stats.n_docs);
        let terms = self.terms_weighted_by(query, allowed, &stats);
        if terms.is_empty() {
            return Vec::new();
        }
        self.ranked(&terms, k, allowed, accept, &stats)
    }

    /// How many of the allowed documents hold term `id`.
    pub fn term_df_scoped(&self, id: u32, allowed: Option<&Allowed>) -> usize {
        self.postings
            .get(id as usize)
            .map_or(0, |p| Self::df(p, allowed))
    }

    /// How many documents are allowed (all indexed ones for None).
    pub fn n_docs_scoped(&self, allowed: Option<&Allowed>) -> usize {
        self.stats(allowed).n_docs
    }

    /// Top-k documents by BM25 score (> 0 only), best first, ties by smaller id.
    /// `accept` filters documents before ranking (e.g. "inserted before node n").
    pub fn search(
        &self,
        query: &[String],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        self.search_scoped(query, k, None, accept)
    }

    /// [`Bm25Index::search`] over the `allowed` documents only, as if they
    /// were the whole index: N, avgdl and every df are counted among them, so
    /// the scores equal those of an index holding just those documents and
    /// tell nothing about the others.
    pub fn search_scoped(
        &self,
        query: &[String],
        k: usize,
        allowed: Option<&Allowed>,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        if k == 0 || self.n_docs == 0 {
            return Vec::new();
        }
        self.search_terms_scoped(&self.query_terms(query), k, allowed, accept)
    }

    /// [`Bm25Index::search_scoped`] of a query given as distinct term ids
    /// with their counts, sorted by id (as [`Bm25Index::doc_terms`] lists a
    /// document's): no tokens to look up.
    pub fn search_terms_scoped(
        &self,
        query: &[(u32, u32)],
        k: usize,
        allowed: Option<&Allowed>,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        let counts = query.iter().map(|&(id, count)| (id, f64::from(count)));
        self.search_multiples(counts, k, allowed, accept)
    }

    /// The top `k` of weighted `terms` among the documents `allowed` and
    /// `accept` both let through (`search_with` on this thread's scratch).
    fn ranked(
        &self,
        terms: &[QueryTerm<'_>],
        k: usize,
        allowed: Option<&Allowed>,
        accept: Option<&dyn Fn(NodeId) -> bool>,
        stats: &CorpusStats,
    ) -> Vec<(NodeId, f32)> {
        let both = |d: NodeId| allowed.is_none_or(|a| a.contains(d)) && accept.is_none_or(|f| f(d));
        let accept: Option<&dyn Fn(NodeId) -> bool> = if allowed.is_some() {
            Some(&both)
        } else {
            accept
        };
        let norm = self.norm_consts(stats);
        with_scratch(|scratch| self.search_with(terms, k, accept, norm, scratch))
    }

    /// [`Bm25Index::search_terms_scoped`] among documents before `before`,
    /// with each term counted only for its `window` most recent carriers
    /// before it (of the allowed ones): what a new observation's lexical
    /// discovery asks. A term with more earlier carriers is a common one
    /// whose postings grow with the memory; reading only its recent window
    /// bounds a write's work however large the memory grows. Where no term
    /// has more than `window` earlier carriers (any memory that small), the
    /// answer is exactly `search_terms_scoped`'s with `accept` = before
    /// `before`. Weights (idf) still count every carrier.
    pub fn search_terms_recent(
        &self,
        query: &[(u32, u32)],
        k: usize,
        allowed: Option<&Allowed>,
        before: NodeId,
        window: usize,
    ) -> Vec<(NodeId, f32)> {
        if k == 0 || self.n_docs == 0 || window == 0 {
            return Vec::new();
        }
        let stats = self.stats(allowed);
        if stats.n_docs == 0 {
            return Vec::new();
        }
        let k = k.min(stats.n_docs);
        let mut terms = self.weighted_terms(query, allowed, &stats);
        for term in &mut terms {
            let all = term.postings;
            let end = all.partition_point(|&(d, _)| NodeId::from(d) < before);
            let start = match allowed {
                None => end.saturating_sub(window),
                Some(a) => {
                    // back from `end` until `window` allowed carriers are in
                    let mut seen = 0;
                    let mut start = end;
                    while start > 0 && seen < window {
                        start -= 1;
                        seen += usize::from(a.contains(NodeId::from(all[start].0)));
                    }
                    start
                }
            };
            term.postings = &all[start..end];
            term.min_doc = all.get(start).map_or(0, |&(d, _)| d);
        }
        terms.retain(|t| !t.postings.is_empty());
        if terms.is_empty() {
            return Vec::new();
        }
        self.ranked(&terms, k, allowed, None, &stats)
    }

    /// N and total length over the whole index, or over the allowed documents.
    fn stats(&self, allowed: Option<&Allowed>) -> CorpusStats {
        match allowed {
            None => CorpusStats {
                n_docs: self.n_docs,
                total_len: self.total_len,
            },
            Some(a) => {
                let mut stats = CorpusStats {
                    n_docs: 0,
                    total_len: 0,
                };
                for &id in a.ids() {
                    if self.contains(id) {
                        stats.n_docs += 1;
                        stats.total_len += u64::from(self.doc_len[id as usize]);
                    }
                }
                stats
            }
        }
    }

    /// Document frequency of a term's postings, among the allowed ones.
    fn df(postings: &[Posting], allowed: Option<&Allowed>) -> usize {
        match allowed {
            None => postings.len(),
            Some(a) => postings
                .iter()
                .filter(|&&(d, _)| a.contains(NodeId::from(d)))
                .count(),
        }
    }

    /// How many indexed documents (of the allowed ones) contain `term`, and
    /// how many indexed documents there are (of the allowed ones).
    pub fn doc_freq_scoped(&self, term: &str, allowed: Option<&Allowed>) -> (usize, usize) {
        let df = self
            .term_ids
            .get(term)
            .map_or(0, |&t| Self::df(&self.postings[t as usize], allowed));
        (df, self.stats(allowed).n_docs)
    }

    fn search_with(
        &self,
        terms: &[QueryTerm<'_>],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
        (c1, c2): (f32, f32),
        scratch: &mut Scratch,
    ) -> Vec<(NodeId, f32)> {
        let n_slots = self.doc_len.len();
        let Scratch {
            scores,
            touched,
            cands,
            table,
            ..
        } = scratch;
        table.clear();
        if scores.len() < n_slots {
            scores.resize(n_slots, 0.0);
        }
        let scores = &mut scores[..n_slots];
        let doc_len = &self.doc_len[..];

        // Term-at-a-time accumulation, rarest term first. Contributions are
        // strictly positive (idf > 0, tf >= 1), so a zero score means "not
        // touched yet". Once the touched docs cover a large share of the id
        // range we stop tracking them ("dense") and sweep the buffer instead.
        //
        // Pruning (MaxScore-like, exact): a term contributes at most its
        // weight (tf / (tf + norm) <= 1). Before terms whose postings
        // outnumber the touched docs, take the k-th best partial score among
        // accepted touched docs (a selection over the touched docs, cheaper
        // than reading those postings); partial scores only grow, so that is
        // a lower bound on the final k-th score. If the weights of all
        // remaining terms add up to less, no untouched doc can make the top
        // k, and the remaining terms only add to the touched docs (below).
        touched.clear();
        let mut dense = false;
        let mut done = terms.len();
        for (i, term) in terms.iter().enumerate() {
            let rest_postings: usize = terms[i..].iter().map(|t| t.postings.len()).sum();
            if !dense && i > 0 && touched.len() < rest_postings {
                let rest: f32 = terms[i..].iter().map(|t| t.weight).sum();
                // The margin covers f32 rounding in the sums.
                if kth_partial(scores, touched, k, accept, cands)
                    .is_some_and(|th| rest * (1.0 + 1e-4) < th)
                {
                    done = i;
                    #[cfg(test)]
                    PRUNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            }
            if !dense && touched.len() + term.postings.len() > n_slots / 8 {
                dense = true;
            }
            let w = term.weight;
            table_for(table, term.postings.len(), c1, c2);
            for &(d, p) in term.postings {
                let s = w * posting_part(table, p, d, doc_len, c1, c2);
                let slot = &mut scores[d as usize];
                // `s > 0` only fails for degenerate k1 (~1e38, overflow); such
                // a doc then simply stays untouched instead of being listed twice.
                if !dense && *slot == 0.0 && s > 0.0 {
                    touched.push(d);
                }
                *slot += s;
            }
        }
        // The terms left after a cut only add to the touched documents. Per
        // term, the cheaper of two ways: look the term up in each touched
        // document's sorted term list (a pointer chase and a binary search
        // each, cold in a large index), or one sequential pass over the
        // term's postings that adds to touched documents only (an untouched
        // one holds 0). Either way each document's sum runs in term order,
        // so the scores are the same bit for bit.
        for term in &terms[done..] {
            let w = term.weight;
            if touched.len() * LOOKUP_COST < term.postings.len() {
                #[cfg(test)]
                LOOKED_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for &d in touched.iter() {
                    if d < term.min_doc {
                        continue; // outside the term's window
                    }
                    let Some(doc) = &self.docs[d as usize] else {
                        continue;
                    };
                    if let Ok(pos) = doc.terms.binary_search_by_key(&term.id, |&(x, _)| x) {
                        scores[d as usize] += w * tf_part(doc.terms[pos].1, doc.len, c1, c2);
                    }
                }
            } else {
                table_for(table, term.postings.len(), c1, c2);
                #[cfg(test)]
                SCANNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for &(d, p) in term.postings {
                    let slot = &mut scores[d as usize];
                    if *slot > 0.0 {
                        *slot += w * posting_part(table, p, d, doc_len, c1, c2);
                    }
                }
            }
        }

        // Selection with a running threshold (see `TopK`).
        let mut top = TopK::new(k, cands);
        if dense {
            // Read-only sweep, then one memset. Chunks whose maximum (a
            // vectorisable reduction) is below the threshold are skipped whole.
            const CHUNK: usize = 16;
            for (c, chunk) in scores.chunks(CHUNK).enumerate() {
                let max = chunk.iter().fold(0.0f32, |m, &s| if s > m { s } else { m });
                if max > 0.0 && max >= top.threshold {
                    for (j, &s) in chunk.iter().enumerate() {
                        if s > 0.0 && s >= top.threshold {
                            top.offer((c * CHUNK + j) as u32, s, accept);
                        }
                    }
                }
            }
            scores.fill(0.0);
        } else {
            for &d in touched.iter() {
                let s = std::mem::take(&mut scores[d as usize]);
                if s > 0.0 && s >= top.threshold {
                    top.offer(d, s, accept);
                }
            }
        }
        top.finish()
    }

    /// BM25 score of each given document for the query (0 for unknown ids).
    pub fn score(&self, query: &[String], docs: &[NodeId]) -> Vec<f32> {
        self.score_scoped(query, docs, None)
    }

    /// [`Bm25Index::score`] with the statistics of the allowed documents
    /// (as `search_scoped` ranks them); 0 for a document outside them.
    pub fn score_scoped(
        &self,
        query: &[String],
        docs: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<f32> {
        self.score_terms_scoped(&self.query_terms(query), docs, allowed)
    }

    /// [`Bm25Index::score_scoped`] of a query given as distinct term ids
    /// with their counts, sorted by id. A short query against a long
    /// document binary-searches the document's sorted terms; otherwise each
    /// document term looks its query weight up in a per-thread table by term
    /// id (one pass over the document, no comparisons between the two
    /// lists: a write's long text is scored against hundreds of pooled
    /// nodes). The sum runs in term-id order either way.
    pub fn score_terms_scoped(
        &self,
        terms: &[(u32, u32)],
        docs: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<f32> {
        let weighted: Vec<(u32, f64)> = terms
            .iter()
            .map(|&(t, count)| (t, f64::from(count)))
            .collect();
        self.score_weighted_scoped(&weighted, docs, allowed)
    }

    /// [`Bm25Index::score_terms_scoped`] of terms that each weigh a real
    /// multiple (see [`Bm25Index::search_weighted_scoped`]), sorted by id.
    pub fn score_weighted_scoped(
        &self,
        terms: &[(u32, f64)],
        docs: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<f32> {
        debug_assert!(terms.windows(2).all(|w| w[0].0 < w[1].0));
        let stats = self.stats(allowed);
        if terms.is_empty() || stats.n_docs == 0 {
            return vec![0.0; docs.len()];
        }
        let k1p1 = f64::from(self.params.k1) + 1.0;
        let weights: Vec<(u32, f32)> = terms
            .iter()
            .map(|&(t, times)| {
                let df = Self::df(&self.postings[t as usize], allowed);
                (t, (times * Self::idf(&stats, df) * k1p1) as f32)
            })
            .collect();
        let (c1, c2) = self.norm_consts(&stats);
        let score_all = |weight_by_term: &mut Vec<f32>| {
            if weight_by_term.len() < self.postings.len() {
                weight_by_term.resize(self.postings.len(), f32::NAN);
            }
            for &(t, w) in &weights {
                weight_by_term[t as usize] = w;
            }
            let table = &weight_by_term[..];
            // the documents' entries lie far apart in a large index: ask
            // for every slot, then the start of every term list, before
            // the first is read, so their cache misses overlap
            let slot = |doc: NodeId| usize::try_from(doc).ok().and_then(|i| self.docs.get(i));
            for &doc in docs {
                if let Some(entry) = slot(doc) {
                    prefetch::value(entry);
                }
            }
            for &doc in docs {
                if let Some(Some(entry)) = slot(doc) {
                    prefetch::slice(&entry.terms[..entry.terms.len().min(PREFETCH_TERMS)]);
                }
            }
            let scores: Vec<f32> = docs
                .iter()
                .map(|&doc| {
                    if allowed.is_some_and(|a| !a.contains(doc)) {
                        return 0.0;
                    }
                    let Some(Some(entry)) = slot(doc) else {
                        return 0.0;
                    };
                    let part = |w: f32, tf: u32| w * tf_part(tf, entry.len, c1, c2);
                    if weights.len() * 8 < entry.terms.len() {
                        weights
                            .iter()
                            .filter_map(|&(t, w)| {
                                let pos = entry.terms.binary_search_by_key(&t, |&(x, _)| x).ok()?;
                                Some(part(w, entry.terms[pos].1))
                            })
                            .sum()
                    } else {
                        // from -0.0, as `Iterator::sum` starts
                        entry.terms.iter().fold(-0.0f32, |sum, &(t, tf)| {
                            let w = table[t as usize];
                            if w.is_nan() {
                                sum
                            } else {
                                sum + part(w, tf)
                            }
                        })
                    }
                })
                .collect();
            for &(t, _) in &weights {
                weight_by_term[t as usize] = f32::NAN;
            }
            scores
        };
        with_scratch(|scratch| score_all(&mut scratch.weight_by_term))
    }

    /// A document's distinct term ids with their counts, sorted by id (None
    /// when absent): the query [`Bm25Index::search_terms_scoped`] and
    /// [`Bm25Index::score_terms_scoped`] take, without tokenising its text again.
    pub fn doc_terms(&self, doc: NodeId) -> Option<&[(u32, u32)]> {
        let i = usize::try_from(doc).ok()?;
        self.docs.get(i)?.as_ref().map(|d| &d.terms[..])
    }

    /// The documents that hold `term`, in id order (empty when none does).
    pub fn term_docs(&self, term: &str) -> impl DoubleEndedIterator<Item = NodeId> + '_ {
        self.term_ids
            .get(term)
            .map_or(&[][..], |&t| &self.postings[t as usize][..])
            .iter()
            .map(|&(d, _)| NodeId::from(d))
    }

    /// The id of a term the index holds (None: no document has it).
    pub fn term_id(&self, term: &str) -> Option<u32> {
        self.term_ids.get(term).copied()
    }

    /// Document frequency and text of a live term id.
    pub fn term_stats(&self, term: u32) -> Option<(usize, &str)> {
        let text = self.term_text.get(term as usize)?.as_deref()?;
        Some((self.postings[term as usize].len(), text))
    }

    /// Approximate heap bytes (excluding the per-thread search scratch, which
    /// is one `f32` per document id slot per searching thread).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        // std's SwissTable: one control byte per bucket plus the entry; buckets ~ capacity * 8/7.
        let buckets = self.term_ids.capacity() * 8 / 7;
        let map = buckets * (size_of::<(Arc<str>, u32)>() + 1);
        // Each term string lives once, behind an Arc (two counters + bytes).
        let strings: usize = self
            .term_text
            .iter()
            .flatten()
            .map(|s| 2 * size_of::<usize>() + s.len())
            .sum();
        let term_text = self.term_text.capacity() * size_of::<Option<Arc<str>>>();
        let postings = self.postings.capacity() * size_of::<Vec<Posting>>()
            + self
                .postings
                .iter()
                .map(|p| p.capacity() * size_of::<Posting>())
                .sum::<usize>();
        let docs = self.docs.capacity() * size_of::<Option<Doc>>()
            + self
                .docs
                .iter()
                .flatten()
                .map(|d| d.terms.len() * size_of::<Posting>())
                .sum::<usize>();
        map + strings
            + term_text
            + postings
            + self.free_terms.capacity() * size_of::<u32>()
            + docs
            + self.doc_len.capacity() * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Allowed;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn s(words: &str) -> Vec<String> {
        words.split_whitespace().map(str::to_string).collect()
    }

    fn idx() -> Bm25Index {
        Bm25Index::new(Bm25Params::default()).unwrap()
    }

    /// Three documents, lengths 3, 2, 4 (avgdl 3), k1 = 1.2, b = 0.75.
    fn corpus() -> Bm25Index {
        let mut ix = idx();
        ix.add(0, &s("apple banana apple"));
        ix.add(1, &s("banana cherry"));
        ix.add(2, &s("cherry cherry cherry date"));
        ix
    }

    fn close(a: f32, b: f64) -> bool {
        (f64::from(a) - b).abs() <= 1e-5 * b.abs().max(1.0)
    }

    #[test]
    fn params_validation() {
        assert!(Bm25Params::default().validate().is_ok());
        assert!(Bm25Params { k1: 0.0, b: 0.0 }.validate().is_ok());
        assert!(Bm25Params { k1: 3.0, b: 1.0 }.validate().is_ok());
        for (k1, b) in [
            (-0.1, 0.5),
            (f32::NAN, 0.5),
            (f32::INFINITY, 0.5),
            (1.2, -0.01),
            (1.2, 1.01),
            (1.2, f32::NAN),
        ] {
            let p = Bm25Params { k1, b };
            assert!(
                matches!(p.validate(), Err(Error::InvalidConfig(_))),
                "{p:?}"
            );
            assert!(
                matches!(Bm25Index::new(p), Err(Error::InvalidConfig(_))),
                "{p:?}"
            );
        }
    }

    #[test]
    fn hand_computed_scores() {
        let ix = corpus();
        assert_eq!(ix.len(), 3);
        // idf(df=1) = ln(1 + 2.5/1.5) = ln(8/3); idf(df=2) = ln(1 + 1.5/2.5) = ln(1.6).
        let idf1 = (8.0f64 / 3.0).ln();
        let idf2 = 1.6f64.ln();
        // Length normaliser k1*(1 - b + b*dl/3): dl=3 -> 1.2, dl=2 -> 0.9, dl=4 -> 1.5.
        let apple0 = idf1 * 2.0 * 2.2 / (2.0 + 1.2);
        let banana0 = idf2 * 2.2 / (1.0 + 1.2);
        let banana1 = idf2 * 2.2 / (1.0 + 0.9);
        let cherry1 = idf2 * 2.2 / (1.0 + 0.9);
        let cherry2 = idf2 * 3.0 * 2.2 / (3.0 + 1.5);

        let r = ix.search(&s("apple"), 10, None);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 0);
        assert!(close(r[0].1, apple0));

        let r = ix.search(&s("banana"), 10, None);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 0]);
        assert!(close(r[0].1, banana1) && close(r[1].1, banana0));

        let r = ix.search(&s("cherry banana unknown"), 10, None);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2, 0]);
        assert!(close(r[0].1, banana1 + cherry1));
        assert!(close(r[1].1, cherry2));
        assert!(close(r[2].1, banana0));

        // A repeated query token counts once per occurrence.
        let r = ix.search(&s("apple apple"), 10, None);
        assert!(close(r[0].1, 2.0 * apple0));

        let sc = ix.score(&s("cherry banana"), &[0, 1, 2, 7, u64::MAX]);
        assert!(close(sc[0], banana0) && close(sc[1], banana1 + cherry1) && close(sc[2], cherry2));
        assert_eq!(&sc[3..], &[0.0, 0.0]);

        // k truncates; unknown-only and empty queries give nothing.
        assert_eq!(ix.search(&s("cherry banana"), 1, None).len(), 1);
        assert!(ix.search(&s("nothing here"), 10, None).is_empty());
        assert!(ix.search(&[], 10, None).is_empty());
        assert!(ix.search(&s("apple"), 0, None).is_empty());
    }

    #[test]
    fn filter_remove_readd() {
        let mut ix = corpus();
        let only_even = |d: NodeId| d.is_multiple_of(2);
        let r = ix.search(&s("banana cherry"), 10, Some(&only_even));
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 0]);

        assert!(ix.remove(1));
        assert!(!ix.remove(1));
        assert!(!ix.remove(99));
        assert!(!ix.contains(1) && ix.contains(0));
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.doc_freq("banana"), 1);
        assert_eq!(ix.doc_freq("cherry"), 1);
        assert!((ix.avg_doc_len() - 3.5).abs() < 1e-12);
        let r = ix.search(&s("banana cherry"), 10, None);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 0]);

        // Re-adding replaces: doc 0 no longer has apple.
        ix.add(0, &s("date"));
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.doc_freq("apple"), 0);
        assert_eq!(ix.vocabulary_len(), 2); // cherry, date
        assert!(ix.search(&s("apple"), 10, None).is_empty());
        // Recycled term slots work.
        ix.add(5, &s("apple fig"));
        assert_eq!(ix.search(&s("fig"), 10, None)[0].0, 5);
        assert_eq!(ix.vocabulary_len(), 4);
        assert!(ix.memory_bytes() > 0);
    }

    #[test]
    fn empty_docs_and_big_ids() {
        let mut ix = idx();
        ix.add(3, &[]);
        assert!(ix.contains(3) && ix.len() == 1);
        assert!(ix.search(&s("x"), 5, None).is_empty());
        assert!(ix.try_add(MAX_DOC_ID + 1, &s("x")).is_err());
        ix.add(u64::MAX, &s("x"));
        assert_eq!(ix.len(), 1);
        assert!(!ix.contains(u64::MAX));
        assert!(ix.remove(3));
        assert!(ix.is_empty());
    }

    #[test]
    fn k1_zero_and_b_zero() {
        // k1 = 0: each matching term scores idf regardless of tf and length.
        let mut ix = Bm25Index::new(Bm25Params { k1: 0.0, b: 0.75 }).unwrap();
        ix.add(0, &s("a a a b"));
        ix.add(1, &s("a c"));
        let r = ix.search(&s("a"), 10, None);
        let idf = (1.0f64 + 0.5 / 2.5).ln();
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1]);
        assert!(close(r[0].1, idf) && close(r[1].1, idf));
    }

    #[test]
    fn pruning_path_is_taken_and_exact() {
        let mut ix = idx();
        for d in 0..1000u64 {
            let mut toks = s("common filler");
            if d % 100 == 7 {
                toks.push("rare".into());
            }
            ix.add(d, &toks);
        }
        let before = PRUNED.load(std::sync::atomic::Ordering::Relaxed);
        let r = ix.search(&s("rare common"), 3, None);
        assert!(PRUNED.load(std::sync::atomic::Ordering::Relaxed) > before);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [7, 107, 207]);
        let full = ix.score(&s("rare common"), &[7, 107, 207]);
        for (got, want) in r.iter().zip(full) {
            assert!((got.1 - want).abs() <= 1e-5 * want);
        }
    }

    /// The top `k` by the sums `search` computes (the same weights, the same
    /// term order, the same `tf_part`), taken over every document with no
    /// pruning: a pruned search must return exactly this, bit for bit.
    fn exhaustive_top_k(
        ix: &Bm25Index,
        query: &[String],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        let stats = ix.stats(None);
        let terms = ix.weighted_terms(&ix.query_terms(query), None, &stats);
        let (c1, c2) = ix.norm_consts(&stats);
        let mut all: Vec<(u32, f32)> = Vec::new();
        for (d, doc) in ix.docs.iter().enumerate() {
            let Some(doc) = doc else { continue };
            if accept.is_some_and(|f| !f(d as NodeId)) {
                continue;
            }
            let mut score = 0.0f32;
            for t in &terms {
                if let Ok(pos) = doc.terms.binary_search_by_key(&t.id, |&(x, _)| x) {
                    score += t.weight * tf_part(doc.terms[pos].1, doc.len, c1, c2);
                }
            }
            if score > 0.0 {
                all.push((d as u32, score));
            }
        }
        all.sort_by(rank_cmp);
        all.truncate(k);
        all.into_iter().map(|(d, s)| (NodeId::from(d), s)).collect()
    }

    /// A corpus where a query's rare terms touch few documents and its
    /// common terms have many postings: `rare_docs` documents carry each
    /// rare term, every document carries "common", every third "mid".
    fn skewed(n: u64, rare_docs: u64, seed: u64) -> Bm25Index {
        let mut ix = idx();
        let mut x = seed | 1;
        for d in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut toks = vec!["common".to_string(); 1 + (x % 3) as usize];
            if d % 3 == 0 {
                toks.push("mid".into());
            }
            toks.extend((0..(x >> 8) % 9).map(|i| format!("f{}", (x >> (i + 12)) % 40)));
            for r in 0..4 {
                if (d + r * 7) % (n / rare_docs).max(1) == 0 {
                    toks.push(format!("rare{r}"));
                }
            }
            ix.add(d, &toks);
        }
        ix
    }

    #[test]
    fn a_cut_finishes_by_lookups_and_by_passes_exactly() {
        use std::sync::atomic::Ordering::Relaxed;
        let queries = [
            "rare0 common",
            "rare1 rare2 mid common",
            "rare3 f1 f2 common mid",
        ];
        // few touched documents: the common terms are looked up in them
        let ix = skewed(4000, 4, 3);
        let before = LOOKED_UP.load(Relaxed);
        for q in queries {
            assert_eq!(
                ix.search(&s(q), 3, None),
                exhaustive_top_k(&ix, &s(q), 3, None)
            );
        }
        assert!(LOOKED_UP.load(Relaxed) > before);
        // many: their postings are read once, adding to touched documents only
        let ix = skewed(4000, 200, 5);
        let before = SCANNED.load(Relaxed);
        for q in queries {
            assert_eq!(
                ix.search(&s(q), 3, None),
                exhaustive_top_k(&ix, &s(q), 3, None)
            );
        }
        assert!(SCANNED.load(Relaxed) > before);
    }

    #[test]
    fn pack_roundtrip() {
        let lens = [0u32, 5, 127, 128, (1 << 28) - 1, 1 << 28, u32::MAX];
        for tf in [1u32, 7, 8, 1000, ESCAPE - 1] {
            for &dl in &lens {
                let p = pack(tf, dl);
                assert_eq!(unpack(p, 0, &[dl]), (tf, dl), "tf {tf} dl {dl}");
                assert_eq!((p as usize) < TABLE_LEN, tf < 8 && dl < 128);
            }
        }
    }

    #[test]
    fn table_path_matches_direct_scoring() {
        // Enough postings for the per-query table, with tf and lengths on both
        // sides of its bounds.
        let mut ix = idx();
        for d in 0..5000u64 {
            let mut toks = vec!["common".to_string(); 1 + (d % 11) as usize];
            toks.extend((0..(d * 37 % 200)).map(|i| format!("x{}", i % 13)));
            ix.add(d, &toks);
        }
        let q = s("common x3");
        let r = ix.search(&q, 5000, None);
        assert_eq!(r.len(), 5000);
        let ids: Vec<NodeId> = r.iter().map(|x| x.0).collect();
        for ((_, got), want) in r.iter().zip(ix.score(&q, &ids)) {
            assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
        }
        for w in r.windows(2) {
            assert!(w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0));
        }
    }

    #[test]
    fn reentrant_search_from_filter() {
        let ix = corpus();
        let inner = |d: NodeId| !ix.search(&s("cherry"), 10, None).iter().any(|x| x.0 == d);
        let r = ix.search(&s("banana"), 10, Some(&inner));
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn concurrent_readers() {
        let ix = std::sync::RwLock::new(corpus());
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for _ in 0..200 {
                        let g = ix.read().unwrap();
                        let r = g.search(&s("cherry banana"), 2, None);
                        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
                    }
                });
            }
        });
    }

    // ---- reference implementation and property tests ----

    struct Reference {
        k1: f64,
        b: f64,
        docs: BTreeMap<u64, Vec<String>>,
    }

    impl Reference {
        /// Score of every live document, recomputed from scratch.
        fn scores(&self, query: &[String]) -> BTreeMap<u64, f64> {
            let n = self.docs.len() as f64;
            let total: usize = self.docs.values().map(Vec::len).sum();
            let avgdl = total as f64 / n;
            let mut out = BTreeMap::new();
            for (&id, toks) in &self.docs {
                let dl = toks.len() as f64;
                let mut score = 0.0;
                for q in query {
                    let tf = toks.iter().filter(|t| *t == q).count() as f64;
                    if tf == 0.0 {
                        continue;
                    }
                    let df = self.docs.values().filter(|d| d.contains(q)).count() as f64;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    score += idf * tf * (self.k1 + 1.0)
                        / (tf + self.k1 * (1.0 - self.b + self.b * dl / avgdl));
                }
                out.insert(id, score);
            }
            out
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u64, Vec<String>),
        Remove(u64),
    }

    fn word() -> impl Strategy<Value = String> {
        // Small vocabulary so terms collide across docs and queries.
        (0u8..8).prop_map(|i| format!("w{i}"))
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..24, proptest::collection::vec(word(), 0..8)).prop_map(|(d, t)| Op::Add(d, t)),
            1 => (0u64..24).prop_map(Op::Remove),
        ]
    }

    /// An index and its reference after `ops`, each removal's answer and
    /// the size after each step checked against the reference.
    fn indexed(params: Bm25Params, ops: &[Op]) -> Result<(Bm25Index, Reference), TestCaseError> {
        let mut ix = Bm25Index::new(params).unwrap();
        let mut reference = Reference {
            k1: f64::from(params.k1),
            b: f64::from(params.b),
            docs: BTreeMap::new(),
        };
        for op in ops {
            match op {
                Op::Add(d, toks) => {
                    ix.add(*d, toks);
                    reference.docs.insert(*d, toks.clone());
                }
                Op::Remove(d) => {
                    prop_assert_eq!(ix.remove(*d), reference.docs.remove(d).is_some());
                }
            }
            prop_assert_eq!(ix.len(), reference.docs.len());
        }
        Ok((ix, reference))
    }

    fn rel_close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1e-6)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn matches_reference(
            k1 in 0.0f32..3.0,
            b in 0.0f32..=1.0,
            ops in proptest::collection::vec(op(), 0..60),
            queries in proptest::collection::vec(
                (proptest::collection::vec(word(), 0..5), 1usize..12, 0u64..4), 1..6),
        ) {
            let (ix, reference) = indexed(Bm25Params { k1, b }, &ops)?;
            for d in 0..24 {
                prop_assert_eq!(ix.contains(d), reference.docs.contains_key(&d));
            }
            let live_terms: std::collections::BTreeSet<&String> = reference.docs.values().flatten().collect();
            prop_assert_eq!(ix.vocabulary_len(), live_terms.len());

            for (query, k, modulus) in &queries {
                // modulus 0: no filter; otherwise accept ids not divisible by it.
                let m = *modulus;
                let filter = move |d: NodeId| !d.is_multiple_of(m + 1);
                let accept: Option<&dyn Fn(NodeId) -> bool> = if m == 0 { None } else { Some(&filter) };
                let got = ix.search(query, *k, accept);

                let all = reference.scores(query);
                let mut expected: Vec<(u64, f64)> = all
                    .iter()
                    .filter(|(&d, &s)| s > 0.0 && accept.is_none_or(|f| f(d)))
                    .map(|(&d, &s)| (d, s))
                    .collect();
                expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                expected.truncate(*k);

                prop_assert_eq!(got.len(), expected.len(), "got {:?} expected {:?}", got, expected);
                let mut seen = std::collections::BTreeSet::new();
                for (i, (&(d, s), &(_, es))) in got.iter().zip(&expected).enumerate() {
                    prop_assert!(seen.insert(d), "duplicate id {}", d);
                    prop_assert!(reference.docs.contains_key(&d), "removed doc {} returned", d);
                    prop_assert!(accept.is_none_or(|f| f(d)), "filtered doc {} returned", d);
                    // Rank-wise scores agree, and the returned doc really has that score.
                    prop_assert!(rel_close(f64::from(s), es), "rank {}: {} vs {}", i, s, es);
                    prop_assert!(rel_close(f64::from(s), all[&d]), "doc {}: {} vs {}", d, s, all[&d]);
                    // Exact order where scores are clearly apart.
                    if i > 0 {
                        let (pd, ps) = got[i - 1];
                        prop_assert!(ps > s || (ps == s && pd < d) || rel_close(f64::from(ps), f64::from(s)));
                    }
                }
                // Nothing left out scores clearly above the last returned one.
                if let Some(&(_, last)) = got.last() {
                    let chosen: std::collections::BTreeSet<u64> = got.iter().map(|x| x.0).collect();
                    for (&d, &sc) in &all {
                        if sc > 0.0 && !chosen.contains(&d) && accept.is_none_or(|f| f(d)) {
                            prop_assert!(sc <= f64::from(last) || rel_close(sc, f64::from(last)),
                                "doc {} ({}) beats last returned ({})", d, sc, last);
                        }
                    }
                }

                let ids: Vec<u64> = (0..26).collect();
                let scored = ix.score(query, &ids);
                for (&d, &sc) in ids.iter().zip(&scored) {
                    let want = all.get(&d).copied().unwrap_or(0.0);
                    prop_assert!(rel_close(f64::from(sc), want), "score doc {}: {} vs {}", d, sc, want);
                }
            }
        }

        /// Terms weighing any real multiple score as that multiple of their
        /// BM25 parts, searched and scored; whole-number weights rank exactly
        /// as the same counts do.
        #[test]
        fn weighted_terms_score_as_their_weighted_parts(
            ops in proptest::collection::vec(op(), 1..60),
            terms in proptest::collection::vec((word(), 0.05f64..3.0), 1..5),
            k in 1usize..12,
        ) {
            let (ix, reference) = indexed(Bm25Params::default(), &ops)?;
            let mut weighted: Vec<(u32, f64)> = Vec::new();
            let mut all: BTreeMap<u64, f64> = BTreeMap::new();
            for (t, w) in &terms {
                let Some(id) = ix.term_id(t) else { continue };
                if weighted.iter().any(|&(x, _)| x == id) {
                    continue;
                }
                weighted.push((id, *w));
                for (d, sc) in reference.scores(std::slice::from_ref(t)) {
                    *all.entry(d).or_insert(0.0) += w * sc;
                }
            }
            weighted.sort_by_key(|&(id, _)| id);
            let got = ix.search_weighted_scoped(&weighted, k, None);
            let want = all.values().filter(|&&s| s > 0.0).count().min(k);
            prop_assert_eq!(got.len(), want);
            for &(d, s) in &got {
                prop_assert!(rel_close(f64::from(s), all[&d]), "doc {}: {} vs {}", d, s, all[&d]);
            }
            if let Some(&(_, last)) = got.last() {
                let chosen: std::collections::BTreeSet<u64> = got.iter().map(|x| x.0).collect();
                for (&d, &sc) in &all {
                    if !chosen.contains(&d) {
                        prop_assert!(sc <= f64::from(last) || rel_close(sc, f64::from(last)));
                    }
                }
            }
            let ids: Vec<u64> = (0..26).collect();
            for (&d, &sc) in ids.iter().zip(&ix.score_weighted_scoped(&weighted, &ids, None)) {
                let want = all.get(&d).copied().unwrap_or(0.0);
                prop_assert!(rel_close(f64::from(sc), want), "score doc {}: {} vs {}", d, sc, want);
            }
            let counted: Vec<(u32, u32)> = weighted.iter().map(|&(t, _)| (t, 2)).collect();
            let as_weights: Vec<(u32, f64)> = weighted.iter().map(|&(t, _)| (t, 2.0)).collect();
            prop_assert_eq!(
                ix.search_terms_scoped(&counted, k, None, None),
                ix.search_weighted_scoped(&as_weights, k, None)
            );
            prop_assert_eq!(
                ix.score_terms_scoped(&counted, &ids, None),
                ix.score_weighted_scoped(&as_weights, &ids, None)
            );
        }

        #[test]
        fn pruned_search_matches_reference(
            n in 100u64..500,
            k in 1usize..12,
            seed in any::<u64>(),
            modulus in 0u64..4,
            removals in proptest::collection::vec(0u64..500, 0..40),
        ) {
            // One term in every doc, a mid-frequency filler vocabulary and rare
            // terms in a few docs: rare-term queries with the common term
            // appended exercise the pruned path.
            let mut ix = idx();
            let mut reference = Reference { k1: 1.2, b: 0.75, docs: BTreeMap::new() };
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for d in 0..n {
                let mut toks = vec!["common".to_string(); 1 + (next() % 3) as usize];
                for _ in 0..(next() % 6) {
                    toks.push(format!("f{}", next() % 20));
                }
                if next() % 4 == 0 {
                    toks.push(format!("r{}", next() % 10));
                }
                ix.add(d, &toks);
                reference.docs.insert(d, toks);
            }
            for d in removals {
                prop_assert_eq!(ix.remove(d), reference.docs.remove(&d).is_some());
            }
            let filter = move |d: NodeId| !d.is_multiple_of(modulus + 1);
            let accept: Option<&dyn Fn(NodeId) -> bool> = if modulus == 0 { None } else { Some(&filter) };
            for q in ["r1 common", "r2 r3 common", "r4 f3 common common", "r5 r6 r7 f1 common"] {
                let q = s(q);
                let got = ix.search(&q, k, accept);
                let all = reference.scores(&q);
                let mut expected: Vec<(u64, f64)> = all
                    .iter()
                    .filter(|(&d, &s)| s > 0.0 && accept.is_none_or(|f| f(d)))
                    .map(|(&d, &s)| (d, s))
                    .collect();
                expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                expected.truncate(k);
                prop_assert_eq!(got.len(), expected.len());
                for (&(d, s), &(_, es)) in got.iter().zip(&expected) {
                    prop_assert!(accept.is_none_or(|f| f(d)));
                    prop_assert!(rel_close(f64::from(s), es), "{} vs {}", s, es);
                    prop_assert!(rel_close(f64::from(s), all[&d]), "{} vs {}", s, all[&d]);
                }
            }
        }

        /// Pruned searches (a cut, then lookups or passes over postings)
        /// return exactly what scoring every document in the same order does.
        #[test]
        fn pruned_search_is_exactly_the_exhaustive_top_k(
            n in 200u64..3000,
            rare_docs in 1u64..120,
            seed in any::<u64>(),
            k in 1usize..30,
            modulus in 0u64..4,
            removals in proptest::collection::vec(0u64..3000, 0..60),
        ) {
            let mut ix = skewed(n, rare_docs, seed);
            for d in removals {
                ix.remove(d);
            }
            let filter = move |d: NodeId| !d.is_multiple_of(modulus + 1);
            let accept: Option<&dyn Fn(NodeId) -> bool> = if modulus == 0 { None } else { Some(&filter) };
            for q in ["rare0 common", "rare1 rare2 mid common", "rare3 f1 f2 common mid", "f5 mid common"] {
                let q = s(q);
                prop_assert_eq!(ix.search(&q, k, accept), exhaustive_top_k(&ix, &q, k, accept));
            }
        }

        #[test]
        fn large_k_threshold_path(
            n in 50u64..300,
            k in 1usize..40,
            seed in any::<u64>(),
        ) {
            // Many docs with one shared term exercise the running-threshold selection.
            let mut ix = idx();
            let mut reference = Reference { k1: 1.2, b: 0.75, docs: BTreeMap::new() };
            let mut x = seed;
            for d in 0..n {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let len = 1 + (x >> 60) as usize;
                let mut toks = vec!["t".to_string(); 1 + (x >> 33) as usize % 3];
                toks.extend((0..len).map(|i| format!("f{}", (x >> (i * 3)) % 5)));
                ix.add(d, &toks);
                reference.docs.insert(d, toks);
            }
            let q = s("t f1");
            let got = ix.search(&q, k, None);
            let all = reference.scores(&q);
            let mut expected: Vec<(u64, f64)> = all.iter().filter(|x| *x.1 > 0.0).map(|(&d, &s)| (d, s)).collect();
            expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            expected.truncate(k);
            prop_assert_eq!(got.len(), expected.len());
            for (&(d, s), &(_, es)) in got.iter().zip(&expected) {
                prop_assert!(rel_close(f64::from(s), es));
                prop_assert!(rel_close(f64::from(s), all[&d]));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// A scoped search ranks exactly as an index holding only the allowed
        /// documents would (N, avgdl and df among them), and never returns
        /// another: the reference is rebuilt from the allowed documents alone.
        #[test]
        fn scoped_search_matches_an_index_of_the_allowed_docs(
            ops in proptest::collection::vec(op(), 0..60),
            mask in any::<u32>(),
            queries in proptest::collection::vec(
                (proptest::collection::vec(word(), 0..5), 1usize..12), 1..5),
        ) {
            let mut ix = idx();
            let mut docs: BTreeMap<u64, Vec<String>> = BTreeMap::new();
            for op in &ops {
                match op {
                    Op::Add(d, toks) => {
                        ix.add(*d, toks);
                        docs.insert(*d, toks.clone());
                    }
                    Op::Remove(d) => {
                        ix.remove(*d);
                        docs.remove(d);
                    }
                }
            }
            // ids 24..26 are never indexed: allowed but absent changes nothing
            let allowed_ids: Vec<u64> = (0..26u64).filter(|d| mask & (1 << d) != 0).collect();
            let allowed = Allowed::from_sorted(allowed_ids.clone());
            let reference = Reference {
                k1: 1.2,
                b: 0.75,
                docs: docs.iter().filter(|(d, _)| allowed.contains(**d)).map(|(&d, t)| (d, t.clone())).collect(),
            };
            for (query, k) in &queries {
                let got = ix.search_scoped(query, *k, Some(&allowed), None);
                let all = if reference.docs.is_empty() { BTreeMap::new() } else { reference.scores(query) };
                let mut expected: Vec<(u64, f64)> =
                    all.iter().filter(|x| *x.1 > 0.0).map(|(&d, &s)| (d, s)).collect();
                expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                expected.truncate(*k);
                prop_assert_eq!(got.len(), expected.len(), "got {:?} expected {:?}", got, expected);
                for (i, (&(d, s), &(_, es))) in got.iter().zip(&expected).enumerate() {
                    prop_assert!(allowed.contains(d), "disallowed doc {} returned", d);
                    prop_assert!(rel_close(f64::from(s), es), "rank {}: {} vs {}", i, s, es);
                    prop_assert!(rel_close(f64::from(s), all[&d]), "doc {}: {} vs {}", d, s, all[&d]);
                }
                if let Some(&(_, last)) = got.last() {
                    let chosen: std::collections::BTreeSet<u64> = got.iter().map(|x| x.0).collect();
                    for (&d, &sc) in &all {
                        if sc > 0.0 && !chosen.contains(&d) {
                            prop_assert!(sc <= f64::from(last) || rel_close(sc, f64::from(last)));
                        }
                    }
                }
                let ids: Vec<u64> = (0..26).collect();
                for (&d, &sc) in ids.iter().zip(&ix.score_scoped(query, &ids, Some(&allowed))) {
                    let want = all.get(&d).copied().unwrap_or(0.0);
                    prop_assert!(rel_close(f64::from(sc), want), "score doc {}: {} vs {}", d, sc, want);
                }
                for q in query {
                    let (df, n) = ix.doc_freq_scoped(q, Some(&allowed));
                    prop_assert_eq!(n, reference.docs.len());
                    prop_assert_eq!(df, reference.docs.values().filter(|t| t.contains(q)).count());
                }
                // no scope: the unscoped search, unchanged
                prop_assert_eq!(ix.search_scoped(query, *k, None, None), ix.search(query, *k, None));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The write path's discovery query: with a window as large as any
        /// term's postings it is `search_terms_scoped` before `before`; with
        /// any window it is the plain sum of each term over its `window`
        /// most recent carriers before `before` (of the allowed ones),
        /// ranked by score then id, bit for bit.
        #[test]
        fn recent_window_search_is_the_windowed_sum(
            docs in proptest::collection::vec(proptest::collection::vec(0u8..12, 1..30), 1..40),
            query in proptest::collection::vec(0u8..12, 1..10),
            before in 0u64..45,
            window in 1usize..8,
            k in 1usize..10,
            mask in proptest::option::of(any::<u64>()),
        ) {
            let word = |i: &u8| format!("w{i}");
            let mut ix = Bm25Index::new(Bm25Params::default()).unwrap();
            for (d, toks) in docs.iter().enumerate() {
                ix.add(d as NodeId, &toks.iter().map(word).collect::<Vec<_>>());
            }
            let allowed = mask.map(|m| {
                Allowed::from_sorted((0..64u64).filter(|d| (m >> d) & 1 == 1).collect())
            });
            let allowed = allowed.as_ref();
            let terms = ix.query_terms(&query.iter().map(word).collect::<Vec<_>>());
            let bits = |v: Vec<(NodeId, f32)>| -> Vec<(NodeId, u32)> {
                v.into_iter().map(|(d, s)| (d, s.to_bits())).collect()
            };

            let earlier = |d: NodeId| d < before;
            prop_assert_eq!(
                bits(ix.search_terms_recent(&terms, k, allowed, before, usize::MAX)),
                bits(ix.search_terms_scoped(&terms, k, allowed, Some(&earlier)))
            );

            let got = ix.search_terms_recent(&terms, k, allowed, before, window);
            let stats = ix.stats(allowed);
            let (c1, c2) = ix.norm_consts(&stats);
            let mut sums: BTreeMap<u64, f32> = BTreeMap::new();
            if stats.n_docs > 0 {
                for t in ix.weighted_terms(&terms, allowed, &stats) {
                    let carriers: Vec<&Posting> = t
                        .postings
                        .iter()
                        .filter(|&&(d, _)| {
                            u64::from(d) < before && allowed.is_none_or(|a| a.contains(u64::from(d)))
                        })
                        .collect();
                    for &&(d, p) in carriers.iter().rev().take(window) {
                        let (tf, dl) = unpack(p, d, &ix.doc_len);
                        *sums.entry(u64::from(d)).or_insert(0.0) += t.weight * tf_part(tf, dl, c1, c2);
                    }
                }
            }
            let mut want: Vec<(NodeId, f32)> = sums.into_iter().filter(|&(_, s)| s > 0.0).collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(k.min(stats.n_docs));
            prop_assert_eq!(bits(got), bits(want));
        }
    }

    proptest! {
        /// `score` reads a document's terms two ways (a short query's binary
        /// searches in a long document, or the per-thread weight table by
        /// term id); each gives exactly the sum, in term-id order, of the
        /// matching terms, and the table is left empty for the next call.
        #[test]
        fn scores_equal_the_plain_sum_bit_for_bit(
            docs in proptest::collection::vec(proptest::collection::vec(0u8..40, 0..90), 1..8),
            query in proptest::collection::vec(0u8..40, 0..90),
        ) {
            let word = |i: &u8| format!("v{i}");
            let mut ix = Bm25Index::new(Bm25Params::default()).unwrap();
            for (d, toks) in docs.iter().enumerate() {
                ix.add(d as NodeId, &toks.iter().map(word).collect::<Vec<_>>());
            }
            let query: Vec<String> = query.iter().map(word).collect();
            let ids: Vec<NodeId> = (0..docs.len() as NodeId + 1).collect();
            let got = ix.score(&query, &ids);
            let stats = ix.stats(None);
            let (c1, c2) = ix.norm_consts(&stats);
            let k1p1 = f64::from(ix.params.k1) + 1.0;
            for (&d, &g) in ids.iter().zip(&got) {
                let expected = match ix.doc_terms(d) {
                    // no known query term: plain zeros, not an empty sum
                    _ if ix.query_terms(&query).is_empty() => 0.0,
                    None => 0.0,
                    Some(terms) => ix
                        .query_terms(&query)
                        .iter()
                        .filter_map(|&(t, count)| {
                            let tf = terms.iter().find(|&&(u, _)| u == t)?.1;
                            let df = ix.postings[t as usize].len();
                            let w = (f64::from(count) * Bm25Index::idf(&stats, df) * k1p1) as f32;
                            Some(w * tf_part(tf, ix.doc_len[d as usize], c1, c2))
                        })
                        .sum::<f32>(),
                };
                prop_assert_eq!(g.to_bits(), expected.to_bits(), "doc {}", d);
            }
        }
    }
}
