//! The write path's text analysis: entity ids and grounded time references.
//! Every call converts its arguments to owned values first and runs detached,
//! so a batch of long observations never holds the GIL.

use jevmem_core::error::Error;
use jevmem_core::hashing::ShortKeySet;
use jevmem_core::validity::FactTime;
use jevmem_core::{cues, entities, grounding};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyFrozenSet;

use crate::errors::IntoPyResult;

/// A provenance mapping as (key, value) pairs, in the mapping's order.
type Provenance = Vec<(String, String)>;

/// The canonical id for a name: trimmed, casefolded, single-spaced, no possessive.
#[pyfunction]
pub fn normalise_entity(name: &str) -> String {
    entities::normalise(name)
}

/// Entity ids of one observation, deduplicated: the speaker, then names in
/// the text by position, then provenance ids, then `extra`.
#[pyfunction]
#[pyo3(signature = (text, *, speaker = None, provenance = Vec::new(), extra = Vec::new()))]
pub fn extract_entities(
    py: Python<'_>,
    text: String,
    speaker: Option<String>,
    provenance: Provenance,
    extra: Vec<String>,
) -> Vec<String> {
    py.detach(|| entities::extract_entities(&text, speaker.as_deref(), &provenance, &extra))
}

/// `extract_entities` over columns of equal length, in one detached call.
#[pyfunction]
pub fn extract_entities_batch(
    py: Python<'_>,
    texts: Vec<String>,
    speakers: Vec<Option<String>>,
    provenances: Vec<Provenance>,
    extras: Vec<Vec<String>>,
) -> PyResult<Vec<Vec<String>>> {
    let n = texts.len();
    if speakers.len() != n || provenances.len() != n || extras.len() != n {
        return Err(PyValueError::new_err(format!(
            "extract_entities_batch: {n} texts but {} speakers, {} provenances, {} extras",
            speakers.len(),
            provenances.len(),
            extras.len()
        )));
    }
    Ok(py.detach(|| {
        texts
            .iter()
            .zip(&speakers)
            .zip(&provenances)
            .zip(&extras)
            .map(|(((text, speaker), prov), extra)| {
                entities::extract_entities(text, speaker.as_deref(), prov, extra)
            })
            .collect()
    }))
}

/// The `known` ids that `query` mentions, in order of first mention.
#[pyfunction]
pub fn entity_mentions(py: Python<'_>, query: String, known: Vec<String>) -> Vec<String> {
    py.detach(|| entities::mentions(&query, &known))
}

/// One grounded time reference as Python receives it: (span start, span
/// end) in code points, [start, end) in Unix seconds, precision, relative,
/// anchor precision ("" unless the precision is "range").
type GroundedTuple = (usize, usize, i64, i64, &'static str, bool, &'static str);

fn grounded_tuple(r: &grounding::GroundedRef) -> GroundedTuple {
    (
        r.span.0,
        r.span.1,
        r.start,
        r.end,
        r.precision,
        r.relative,
        r.anchor_precision,
    )
}

fn grounded(text: &str, observed_at: i64) -> Result<Vec<GroundedTuple>, Error> {
    Ok(grounding::ground(text, observed_at)?
        .iter()
        .map(grounded_tuple)
        .collect())
}

/// `query_time_cues`' result: temporal, score, asks when, asks duration,
/// asks order, recency, the cues found, the grounded times, their hull.
pub(crate) type CuesTuple = (
    bool,
    f64,
    bool,
    bool,
    bool,
    bool,
    Vec<&'static str>,
    Vec<GroundedTuple>,
    Option<(i64, i64)>,
);

/// What `query` asks about time (see `jevmem.temporal.query_time_cues`):
/// the cues it carries and the times it names, grounded against `now`
/// (without it, absolute times only). An out-of-range `now` raises
/// InvalidInputError.
#[pyfunction]
#[pyo3(signature = (query, now = None))]
pub fn query_time_cues(py: Python<'_>, query: String, now: Option<i64>) -> PyResult<CuesTuple> {
    let c = py.detach(|| cues::query_time_cues(&query, now)).py()?;
    Ok(cues_tuple(c))
}

pub(crate) fn cues_tuple(c: cues::TimeCues) -> CuesTuple {
    (
        c.temporal,
        c.score,
        c.asks_when,
        c.asks_duration,
        c.asks_order,
        c.recency,
        c.cues,
        c.refs.iter().map(grounded_tuple).collect(),
        c.constraint,
    )
}

/// The time a query wants facts to hold at, as (stance, at, until) (see
/// `jevmem.temporal.query_fact_time`); `constraint`: the hull of the times
/// it names.
#[pyfunction]
#[pyo3(signature = (query, constraint = None, now = None))]
pub fn query_fact_time(
    query: &str,
    constraint: Option<(i64, i64)>,
    now: Option<i64>,
) -> (&'static str, Option<i64>, Option<i64>) {
    match cues::query_fact_time(query, constraint, now) {
        FactTime::Window(lo, hi) => ("dated", Some(lo), Some(hi)),
        FactTime::Past => ("past", None, None),
        FactTime::Present(at) => ("present", at, None),
        FactTime::Neutral => ("neutral", None, None),
    }
}

/// The time expressions of `text` resolved against `observed_at` (Unix
/// seconds): non-overlapping, in text order.
#[pyfunction]
pub fn ground_times(
    py: Python<'_>,
    text: String,
    observed_at: i64,
) -> PyResult<Vec<GroundedTuple>> {
    py.detach(|| grounded(&text, observed_at)).py()
}

/// `ground_times` over a column of texts and their observation times in one
/// detached call; a text without a time gets no references.
#[pyfunction]
pub fn ground_times_batch(
    py: Python<'_>,
    texts: Vec<String>,
    observed_ats: Vec<Option<i64>>,
) -> PyResult<Vec<Vec<GroundedTuple>>> {
    if observed_ats.len() != texts.len() {
        return Err(PyValueError::new_err(format!(
            "ground_times_batch: {} texts but {} observation times",
            texts.len(),
            observed_ats.len()
        )));
    }
    py.detach(|| {
        texts
            .iter()
            .zip(&observed_ats)
            .map(|(text, at)| match at {
                Some(at) => grounded(text, *at),
                None => Ok(Vec::new()),
            })
            .collect::<Result<Vec<_>, Error>>()
    })
    .py()
}

/// Whether a text speaks in the first person anywhere ("I", "my", "we'll",
/// ... as whole words, case-insensitive): a query that does asks about the
/// one who talks to the memory.
#[pyfunction]
pub fn speaks_in_first_person(text: &str) -> bool {
    jevmem_core::coverage::speaks_in_first_person(text)
}

/// Whether the entity id `entity` names one of `people` (lower-cased
/// speaker names) as the alias rule reads names ("mel" names "melanie").
#[pyfunction]
pub fn names_a_speaker(entity: &str, mut people: Vec<String>) -> bool {
    people.sort();
    jevmem_core::query_plan::names_a_speaker(entity, &people)
}

/// The share of a text's sentences that are questions (0 without any).
#[pyfunction]
pub fn question_share(py: Python<'_>, text: String) -> f64 {
    py.detach(|| jevmem_core::coverage::question_share(&text))
}

/// Python `re` patterns (case-insensitive, the grounding subset) run in the
/// core: `count`, `found` and `find_all` answer as `len(re.findall(...))`,
/// `re.search(...) is not None` and `re.findall(...)` would. Built once per
/// lexicon; a pattern is named by its position.
#[pyclass(frozen, module = "jevmem._core")]
pub struct PatternCounter {
    patterns: Vec<jevmem_core::patterns::CuePattern>,
    /// The words `word_set` leaves out (lower-case).
    skip: ShortKeySet<String>,
}

impl PatternCounter {
    fn pattern(&self, i: usize) -> PyResult<&jevmem_core::patterns::CuePattern> {
        self.patterns
            .get(i)
            .ok_or_else(|| {
                Error::InvalidInput(format!("no pattern {i} of {}", self.patterns.len()))
            })
            .py()
    }
}

/// A text's distinct words (`PatternCounter.words`), kept in the core: a
/// long text has hundreds, and the controller only asks how many of a few
/// other words it holds, so none becomes a Python string.
#[pyclass(frozen, module = "jevmem._core")]
pub struct WordSet {
    words: ShortKeySet<String>,
}

#[pymethods]
impl WordSet {
    fn __len__(&self) -> usize {
        self.words.len()
    }

    fn __contains__(&self, word: &str) -> bool {
        self.words.contains(word)
    }

    /// How many words the two sets share (``len(a & b)`` of `as_frozenset`).
    fn shared(&self, other: &Bound<'_, WordSet>) -> usize {
        let other = &other.get().words;
        let (small, large) = if self.words.len() <= other.len() {
            (&self.words, other)
        } else {
            (other, &self.words)
        };
        small.iter().filter(|w| large.contains(*w)).count()
    }

    /// The words as Python strings.
    fn as_frozenset<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        PyFrozenSet::new(py, self.words.iter())
    }

    fn __repr__(&self) -> String {
        format!("WordSet({} words)", self.words.len())
    }
}

/// A text shorter than this is matched holding the GIL: releasing and
/// retaking it would cost about what the match does.
const DETACH_BYTES: usize = 2048;

fn run<T: Send>(py: Python<'_>, text: &str, f: impl FnOnce() -> T + Send) -> T {
    if text.len() < DETACH_BYTES {
        f()
    } else {
        py.detach(f)
    }
}

#[pymethods]
impl PatternCounter {
    #[new]
    #[pyo3(signature = (patterns, *, skip = Vec::new()))]
    fn new(py: Python<'_>, patterns: Vec<String>, skip: Vec<String>) -> PyResult<Self> {
        let patterns = py
            .detach(|| {
                patterns
                    .iter()
                    .map(|p| jevmem_core::patterns::CuePattern::new(p))
                    .collect::<Result<Vec<_>, _>>()
            })
            .py()?;
        Ok(Self {
            patterns,
            skip: skip.into_iter().collect(),
        })
    }

    fn __len__(&self) -> usize {
        self.patterns.len()
    }

    /// How many non-overlapping matches of pattern `i` the text holds.
    fn count(&self, py: Python<'_>, i: usize, text: &str) -> PyResult<usize> {
        let p = self.pattern(i)?;
        Ok(run(py, text, || p.count(text)))
    }

    /// Whether the text holds a match of pattern `i`.
    fn found(&self, py: Python<'_>, i: usize, text: &str) -> PyResult<bool> {
        let p = self.pattern(i)?;
        Ok(run(py, text, || p.found(text)))
    }

    /// The distinct matches of pattern `i` lower-cased (as `str.lower`),
    /// without the `skip` words, a final "s" dropped from those longer than
    /// `plural_over` characters.
    fn word_set<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        text: &str,
        plural_over: usize,
    ) -> PyResult<Bound<'py, PyFrozenSet>> {
        let p = self.pattern(i)?;
        let words = run(py, text, || p.word_set(text, &self.skip, plural_over));
        PyFrozenSet::new(py, words.iter())
    }

    /// `word_set` kept in the core (a `WordSet`).
    fn words(&self, py: Python<'_>, i: usize, text: &str, plural_over: usize) -> PyResult<WordSet> {
        let p = self.pattern(i)?;
        let words = run(py, text, || p.word_set(text, &self.skip, plural_over));
        Ok(WordSet { words })
    }

    /// The text's first `max_sentences` sentences (as Python's
    /// `re.split(r"(?<=[.!?])\s+|\n+", text, maxsplit=max_sentences)` cuts
    /// them) that hold a match of pattern `i`, in order: only those become
    /// Python strings.
    fn sentences_with(
        &self,
        py: Python<'_>,
        i: usize,
        text: &str,
        max_sentences: usize,
    ) -> PyResult<Vec<String>> {
        let p = self.pattern(i)?;
        Ok(run(py, text, || {
            jevmem_core::patterns::sentences(text, max_sentences)
                .into_iter()
                .filter(|s| p.found(s))
                .map(str::to_owned)
                .collect()
        }))
    }

    /// The matches of pattern `i`, in order.
    fn find_all(&self, py: Python<'_>, i: usize, text: &str) -> PyResult<Vec<String>> {
        let p = self.pattern(i)?;
        Ok(run(py, text, || {
            p.find_all(text).into_iter().map(str::to_owned).collect()
        }))
    }
}
