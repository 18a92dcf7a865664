//! `jevmem._core.ReadSession`: one query's reads of one memory (its signals,
//! its pool, the facts that change). The rules are `jevmem_core::read`'s.

use std::collections::HashMap;

use jevmem_core::context::{self, ContextConfig};
use jevmem_core::coverage::CoverageQuery;
use jevmem_core::hashing::ShortKeyMap;
use jevmem_core::query_plan::{one_speaker_named, PlanConfig as QueryPlanConfig};
use jevmem_core::read::{
    AssessQuery, PoolPlan, RankConfig, ReadSession as CoreSession, SessionQuery, SignalBlock,
};
use jevmem_core::store::MemoryStore as CoreStore;
use jevmem_core::style::StyleBasis;
use jevmem_core::validity::FactTime;
use jevmem_core::{Error, NodeId};
use numpy::ndarray::Array2;
use numpy::{AllowTypeChange, IntoPyArray, PyArray1, PyArray2, PyArrayLike1};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;
use crate::scope::Allowed;
use crate::store::{time_query, time_ref_tuple, FactChain, MemoryStore, TimeRefTuple};
use crate::text_analysis::{cues_tuple, CuesTuple};
use crate::traversal::Traversal;
use crate::validity::fact_time;

/// A block's arrays: signal rows (n, 16), fact rows (n, 4) or None, best passages.
type BlockArrays<'py> = (
    Bound<'py, PyArray2<f64>>,
    Option<Bound<'py, PyArray2<f64>>>,
    Bound<'py, PyArray1<u32>>,
);

/// An assessed item: (node, score, relevance, entity_ok, content coverage,
/// other coverage, dense_raw, text).
type AssessedItemTuple = (NodeId, f64, f64, f64, f64, f64, f64, String);
/// `assess`' result.
type AssessedTuple = (Vec<AssessedItemTuple>, f64, f64, f64, f64);

/// `evidence`'s row of one node.
type EvidenceRow = (
    String,
    Option<i64>,
    Vec<(String, String)>,
    Vec<TimeRefTuple>,
    Option<(u64, u64)>,
    Option<FactChain>,
);

/// `round`'s result: a block's arrays and the round columns.
type RoundArrays<'py> = (
    Bound<'py, PyArray2<f64>>,
    Option<Bound<'py, PyArray2<f64>>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray2<f64>>,
);

/// A fact time as `query_fact_time` gives it: (stance, at, until).
fn fact_time_tuple(t: &FactTime) -> (&'static str, Option<i64>, Option<i64>) {
    match *t {
        FactTime::Window(lo, hi) => ("dated", Some(lo), Some(hi)),
        FactTime::Past => ("past", None, None),
        FactTime::Present(at) => ("present", at, None),
        FactTime::Neutral => ("neutral", None, None),
    }
}

/// `plan`'s result (see `ReadSession.plan`).
type PlanTuple = (
    ReadSession,
    Vec<NodeId>,
    Vec<f64>,
    Vec<NodeId>,
    Vec<String>,
    Vec<String>,
    CuesTuple,
    bool,
    bool,
    bool,
    bool,
);

/// `pool`'s result: the ids, the block's arrays and where the nodes came from.
type PoolArrays<'py> = (
    Bound<'py, PyArray1<NodeId>>,
    Bound<'py, PyArray2<f64>>,
    Option<Bound<'py, PyArray2<f64>>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyDict>,
);

fn rows_array<'py, const W: usize>(
    py: Python<'py>,
    rows: &[[f64; W]],
) -> Bound<'py, PyArray2<f64>> {
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    Array2::from_shape_vec((rows.len(), W), flat)
        .expect("a full row per node")
        .into_pyarray(py)
}

fn block_arrays(py: Python<'_>, b: SignalBlock) -> BlockArrays<'_> {
    (
        rows_array(py, &b.rows),
        b.facts.map(|f| rows_array(py, &f)),
        b.best_passage.into_pyarray(py),
    )
}

/// One query's reads of one memory: what the query fixes (its text, vector,
/// rankings, names and times), the facts it has measured, the pool's
/// feedback-moved vector. Reads take the store's lock, then the session's.
#[pyclass(frozen, module = "jevmem._core")]
pub struct ReadSession {
    store: Py<MemoryStore>,
    allowed: Option<Py<Allowed>>,
    /// what an assessment reads of the query (fixed)
    assess_query: AssessQuery,
    state: Mutex<CoreSession>,
}

impl ReadSession {
    /// Run `f` on the store (read lock) and the session, detached; on an
    /// error the core leaves the session as it was.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreStore, &mut CoreSession, Option<(&jevmem_core::Allowed, &StyleBasis)>) -> R
            + Send,
    ) -> R {
        let allowed = self.allowed.as_ref().map(|a| a.get());
        self.store.get().read(py, |s| {
            let scope = allowed.map(|a| (&*a.inner, a.basis(s)));
            f(s, &mut self.state.lock(), scope)
        })
    }
}

#[pymethods]
impl ReadSession {
    /// A session of the query `text` with its vector over `store`:
    /// `lexical_ranked` / `vector_ranked`, the lists its anchors came from;
    /// `best_*`, the scales of the share signals; `named`, the entities it
    /// names; `window` / `asks_when`, the time it asks about; `fact_stance`,
    /// `fact_at`, `fact_until`: the time facts should hold at (see
    /// `jevmem.temporal.FactTime`); `allowed`: the scope it reads. A vector
    /// of the wrong size or a bad fact time raises InvalidInputError.
    #[new]
    #[pyo3(signature = (
        store, text, vector, *, lexical_ranked, vector_ranked, best_lexical, best_dense,
        best_passage, named, window = None, asks_when = false, fact_stance = "neutral",
        fact_at = None, fact_until = None, query_tokens = None,
        content_tokens = None, asked = None, people = None, allowed = None
    ))]
    fn new(
        py: Python<'_>,
        store: Py<MemoryStore>,
        text: String,
        vector: PyArrayLike1<'_, f32, AllowTypeChange>,
        lexical_ranked: Vec<NodeId>,
        vector_ranked: Vec<NodeId>,
        best_lexical: f64,
        best_dense: f64,
        best_passage: f64,
        named: Vec<String>,
        window: Option<(i64, i64)>,
        asks_when: bool,
        fact_stance: &str,
        fact_at: Option<i64>,
        fact_until: Option<i64>,
        query_tokens: Option<Vec<String>>,
        content_tokens: Option<Vec<String>>,
        asked: Option<Vec<String>>,
        people: Option<Vec<String>>,
        allowed: Option<Py<Allowed>>,
    ) -> PyResult<Self> {
        let vector = vector.as_array().to_vec();
        store
            .get()
            .read(py, |s| s.vectors().validate(&vector))
            .py()?;
        let mut people: Vec<String> = people.unwrap_or_default();
        people.sort();
        people.dedup();
        let asked = asked.unwrap_or_default();
        let query = SessionQuery {
            text,
            related: Vec::new(),
            vector,
            lexical_ranked,
            vector_ranked,
            best_lexical,
            best_dense,
            best_passage,
            named,
            speaker_asked: one_speaker_named(&asked, &people),
            people: people.clone(),
            time: time_query(window, asks_when),
            fact_time: fact_time(fact_stance, fact_at, fact_until).py()?,
        };
        let mut tokens = query_tokens.unwrap_or_default();
        tokens.sort();
        tokens.dedup();
        let assess_query = AssessQuery {
            tokens,
            coverage: CoverageQuery {
                content_tokens: content_tokens.into_iter().flatten().collect(),
                asked,
                people: people.into_iter().collect(),
            },
        };
        Ok(Self {
            store,
            allowed,
            assess_query,
            state: Mutex::new(CoreSession::new(query)),
        })
    }

    /// A session of the query `text` with its `vector` over `store`, planned
    /// in the core (`jevmem_core::query_plan`): its anchors, names, times,
    /// tokens. `depth`: how many nodes each ranking reads; `pool`: how many
    /// fused anchors are kept; `kappa`: the fusion constant; `now`: the time
    /// relative expressions are read against; `people`: the speakers the
    /// memory knows (lower-cased); `allowed`: the scope; `related_words`:
    /// the anchors' lexical ranking also reads the rare query words' related
    /// words (`jevmem_core::related`). Returns (session,
    /// fused ids, fused scores, passage hits, named entities, the people
    /// among them, `query_time_cues`' tuple, first person, asks for help,
    /// asks for a summary, asks what the answerer said).
    /// A vector of the wrong size or a bad `now` raises InvalidInputError.
    #[staticmethod]
    #[pyo3(signature = (store, text, vector, *, depth, pool, kappa, now = None, people = None, allowed = None, related_words = true))]
    fn plan(
        py: Python<'_>,
        store: Py<MemoryStore>,
        text: String,
        vector: PyArrayLike1<'_, f32, AllowTypeChange>,
        depth: usize,
        pool: usize,
        kappa: f64,
        now: Option<i64>,
        people: Option<Vec<String>>,
        allowed: Option<Py<Allowed>>,
        related_words: bool,
    ) -> PyResult<PlanTuple> {
        let vector = vector.as_array().to_vec();
        let mut people = people.unwrap_or_default();
        people.sort();
        people.dedup();
        let cfg = QueryPlanConfig {
            depth,
            pool,
            kappa,
            expand: jevmem_core::related::ExpandConfig {
                enabled: related_words,
                ..Default::default()
            },
        };
        let scope = allowed.as_ref().map(|a| a.get().inner.clone());
        let plan = store
            .get()
            .read(py, |s| {
                s.plan_query(&text, &vector, &cfg, now, scope.as_deref(), &people)
            })
            .py()?;
        let (fused_ids, fused_scores): (Vec<NodeId>, Vec<f64>) = plan.fused.into_iter().unzip();
        let named = plan.session.named.clone();
        let assess_query = AssessQuery {
            tokens: plan.tokens,
            coverage: CoverageQuery {
                content_tokens: plan.content_tokens.into_iter().collect(),
                asked: plan.asked.clone(),
                people: people.into_iter().collect(),
            },
        };
        let session = ReadSession {
            store,
            allowed,
            assess_query,
            state: Mutex::new(CoreSession::new(plan.session)),
        };
        Ok((
            session,
            fused_ids,
            fused_scores,
            plan.passage_hits,
            named,
            plan.asked,
            cues_tuple(plan.cues),
            plan.first_person,
            plan.asks_for_help,
            plan.asks_for_summary,
            plan.asks_what_answerer_said,
        ))
    }

    /// The signals of `ids`: an (n, len(SIGNAL_COLUMNS)) float64 array, the
    /// (n, len(FACT_COLUMNS)) validity columns (NaN outside a chain) or None
    /// when the query asks about no time or no node is in a chain, and each
    /// node's best passage. Records which facts held. An unknown id raises
    /// NodeNotFoundError and records nothing.
    fn signals<'py>(&self, py: Python<'py>, ids: Vec<NodeId>) -> PyResult<BlockArrays<'py>> {
        let got = self
            .with(py, |s, st, scope| {
                st.signals(s, &ids, scope.map(|a| a.0), scope.map(|a| a.1))
            })
            .py()?;
        Ok(block_arrays(py, got))
    }

    /// The pool the controller ranks before seeding (see
    /// `jevmem_core::read`): (ids, signal rows, fact rows or None, best
    /// passages, {source: count}). Moves the session's vector by the
    /// feedback; on an error nothing changes.
    #[pyo3(signature = (
        fused, passage_hits, *, time_window_nodes, window_scan, feedback_weight,
        feedback_nodes, context_seeds, second_step_decay, reply_link
    ))]
    fn pool<'py>(
        &self,
        py: Python<'py>,
        fused: Vec<NodeId>,
        passage_hits: Vec<NodeId>,
        time_window_nodes: usize,
        window_scan: usize,
        feedback_weight: f64,
        feedback_nodes: usize,
        context_seeds: usize,
        second_step_decay: f64,
        reply_link: f64,
    ) -> PyResult<PoolArrays<'py>> {
        if !(feedback_weight.is_finite() && feedback_weight >= 0.0) {
            return Err(Error::InvalidInput(format!(
                "feedback_weight must be a non-negative number, got {feedback_weight}"
            )))
            .py();
        }
        let plan = PoolPlan {
            time_window_nodes,
            window_scan,
            feedback_weight,
            feedback_nodes,
            context_seeds,
            context: ContextConfig {
                second_step_decay,
                reply_link,
            },
        };
        let pool = self
            .with(py, |s, st, scope| {
                st.pool(
                    s,
                    &fused,
                    &passage_hits,
                    &plan,
                    scope.map(|a| a.0),
                    scope.map(|a| a.1),
                )
            })
            .py()?;
        let sources = PyDict::new(py);
        let src = pool.sources;
        for (name, n) in [
            ("fused", src.fused),
            ("time_window", src.time_window),
            ("passages", src.passages),
            ("context", src.context),
            ("supersedes", src.supersedes),
        ] {
            sources.set_item(name, n)?;
        }
        let (rows, facts, best) = block_arrays(py, pool.signals);
        Ok((pool.ids.into_pyarray(py), rows, facts, best, sources))
    }

    /// The support of the latest pool's nodes, an (n, 4) float64 array:
    /// support, previous match, next match, episode support (see
    /// `jevmem_core::read::ReadSession::anchor_context`). The pool's topical
    /// matches become the session's.
    #[pyo3(signature = (*, second_step_decay, reply_link))]
    fn anchor_context<'py>(
        &self,
        py: Python<'py>,
        second_step_decay: f64,
        reply_link: f64,
    ) -> Bound<'py, PyArray2<f64>> {
        let cfg = ContextConfig {
            second_step_decay,
            reply_link,
        };
        let rows = self.with(py, |s, st, scope| {
            st.anchor_context(s, &cfg, scope.map(|a| a.0))
        });
        rows_array(py, &rows)
    }

    /// An expansion round's candidates `ids`, reached from `from_nodes`, with
    /// `evidence` found so far: (signal rows, validity rows or None, best
    /// passages, an (n, len(ROUND_COLUMNS)) array). An unknown id raises
    /// NodeNotFoundError and changes nothing.
    #[pyo3(signature = (ids, from_nodes, evidence, *, second_step_decay, reply_link))]
    fn round<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        from_nodes: Vec<NodeId>,
        evidence: Vec<NodeId>,
        second_step_decay: f64,
        reply_link: f64,
    ) -> PyResult<RoundArrays<'py>> {
        let cfg = ContextConfig {
            second_step_decay,
            reply_link,
        };
        let (block, extra) = self
            .with(py, |s, st, scope| {
                // the core's round is all or nothing
                st.round(
                    s,
                    &ids,
                    &from_nodes,
                    &evidence,
                    &cfg,
                    scope.map(|a| a.0),
                    scope.map(|a| a.1),
                )
            })
            .py()?;
        let (rows, facts, best) = block_arrays(py, block);
        Ok((rows, facts, best, rows_array(py, &extra)))
    }

    /// What each node's time-order context says about the query, an (n, 3)
    /// array (support, previous match, next match), from the session's
    /// topical matches; ``own``: the nodes' own matches, entered in order,
    /// each before its node is measured.
    #[pyo3(signature = (ids, own = None, *, second_step_decay, reply_link))]
    fn context_matches<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        own: Option<Vec<f64>>,
        second_step_decay: f64,
        reply_link: f64,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        if own.as_ref().is_some_and(|o| o.len() != ids.len()) {
            return Err(Error::InvalidInput(format!(
                "{} ids but {} own matches",
                ids.len(),
                own.map_or(0, |o| o.len())
            )))
            .py();
        }
        let cfg = ContextConfig {
            second_step_decay,
            reply_link,
        };
        let rows = self.with(py, |s, st, scope| {
            context::context_matches(
                s,
                &ids,
                &mut st.topical,
                own.as_deref(),
                scope.map(|a| a.0),
                &cfg,
            )
        });
        Ok(rows_array(py, &rows))
    }

    /// Each measured node's topical match, as its neighbours read it.
    #[getter]
    fn topical(&self) -> ShortKeyMap<NodeId, f64> {
        self.state.lock().topical.clone()
    }

    /// Replace the topical matches (what `anchor_context` sets from the pool).
    fn set_topical(&self, topical: HashMap<NodeId, f64>) {
        self.state.lock().topical = topical.into_iter().collect();
    }

    /// Record the controller's relevance of `ids` and, for an expansion's
    /// candidates, their evidence scores (`evidence`).
    #[pyo3(signature = (ids, relevance, evidence = None))]
    fn record(
        &self,
        ids: Vec<NodeId>,
        relevance: PyArrayLike1<'_, f64, AllowTypeChange>,
        evidence: Option<PyArrayLike1<'_, f64, AllowTypeChange>>,
    ) -> PyResult<()> {
        let relevance = relevance.as_array().to_vec();
        let evidence = evidence.map(|e| e.as_array().to_vec());
        self.state
            .lock()
            .record(&ids, &relevance, evidence.as_deref())
            .py()
    }

    /// Everything `traversal` gathered, best first, as (node, score): an
    /// expansion candidate by its evidence score, a seed by the traversal's;
    /// the best gathered fact of a chain that held at the query's time in
    /// the place of a better ranked one that did not, which follows right
    /// below it (times `replaced_below`).
    #[pyo3(signature = (traversal, *, replaced_below, other_speaker_share = 1.0))]
    fn rank(
        &self,
        py: Python<'_>,
        traversal: PyRef<'_, Traversal>,
        replaced_below: f64,
        other_speaker_share: f64,
    ) -> PyResult<Vec<(NodeId, f64)>> {
        for (name, v) in [
            ("replaced_below", replaced_below),
            ("other_speaker_share", other_speaker_share),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::InvalidInput(format!(
                    "{name} must be in [0, 1], got {v}"
                )))
                .py();
            }
        }
        let found = traversal.found();
        let cfg = RankConfig {
            replaced_below,
            other_speaker_share,
        };
        Ok(self.with(py, |s, st, _| st.rank(s, &found, &cfg)))
    }

    /// An assessment's reading of `top` ((node, score), ranked) with the
    /// traversal's `frontier`: ([(node, score, relevance, entity_ok,
    /// content_coverage, other_coverage, dense_raw, text)], coverage,
    /// known_terms, covered_terms, frontier_best). An unknown id raises
    /// NodeNotFoundError.
    fn assess(
        &self,
        py: Python<'_>,
        top: Vec<(NodeId, f64)>,
        frontier: Vec<NodeId>,
    ) -> PyResult<AssessedTuple> {
        let q = &self.assess_query;
        let (got, texts) = self
            .with(py, |s, st, scope| {
                let got = st.assess(s, q, &top, &frontier, scope.map(|a| a.0))?;
                let ids: Vec<NodeId> = top.iter().map(|&(n, _)| n).collect();
                let texts: Vec<String> = s.texts(&ids)?.into_iter().map(String::from).collect();
                Ok::<_, Error>((got, texts))
            })
            .py()?;
        let items = got
            .items
            .into_iter()
            .zip(texts)
            .map(|(i, text)| {
                (
                    i.node,
                    i.score,
                    i.relevance,
                    i.entity_ok,
                    i.content_coverage,
                    i.other_coverage,
                    i.dense_raw,
                    text,
                )
            })
            .collect();
        Ok((
            items,
            got.coverage,
            got.known_terms,
            got.covered_terms,
            got.frontier_best,
        ))
    }

    /// Each node's content coverage as an (n, 2) array (about whom the query
    /// asks, about other known people); read once per node per query.
    fn coverages<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let q = &self.assess_query;
        let rows = self
            .with(py, |s, st, scope| {
                st.coverages(s, q, &ids, scope.map(|a| a.0))
            })
            .py()?;
        let rows: Vec<[f64; 2]> = rows.into_iter().map(|(a, b)| [a, b]).collect();
        Ok(rows_array(py, &rows))
    }

    /// What the result says of each of `ids`: (text, observation time,
    /// provenance, grounded time references, the best passage's span or None
    /// for a text of one passage, the supersedes chain (valid from, valid
    /// to, replaced, replaced by) or None); chains only when `chains`.
    /// An unknown id raises NodeNotFoundError.
    #[pyo3(signature = (ids, *, chains = true))]
    fn evidence(
        &self,
        py: Python<'_>,
        ids: Vec<NodeId>,
        chains: bool,
    ) -> PyResult<Vec<EvidenceRow>> {
        let rows = self
            .with(py, |s, st, scope| {
                st.evidence(s, &ids, chains, scope.map(|a| a.0))
            })
            .py()?;
        Ok(rows
            .into_iter()
            .map(|e| {
                (
                    e.text,
                    e.timestamp,
                    e.provenance,
                    e.time_refs.iter().map(time_ref_tuple).collect(),
                    e.passage,
                    e.chain
                        .map(|c| (c.valid_from, c.valid_to, c.supersedes, c.superseded_by)),
                )
            })
            .collect())
    }

    /// The query vector as the reads use it (moved by the pool's feedback).
    #[getter]
    fn vector<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        self.state.lock().query.vector.clone().into_pyarray(py)
    }

    /// What the session started from (its plan, for tests and debugging):
    /// the lexical and vector rankings, the share scales, the entities the
    /// query names, the time facts should hold at as (stance, at, until),
    /// the query's tokens and content tokens (sorted), the people it asks
    /// about, the one speaker it asks about (or None) and the people the
    /// memory knows.
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        {
            let st = self.state.lock();
            let q = &st.query;
            out.set_item("lexical_ranked", q.lexical_ranked.clone())?;
            out.set_item("vector_ranked", q.vector_ranked.clone())?;
            out.set_item("best_lexical", q.best_lexical)?;
            out.set_item("best_dense", q.best_dense)?;
            out.set_item("best_passage", q.best_passage)?;
            out.set_item("named", q.named.clone())?;
            out.set_item("speaker_asked", q.speaker_asked.clone())?;
            out.set_item("fact_time", fact_time_tuple(&q.fact_time))?;
        }
        let a = &self.assess_query;
        let mut content: Vec<&String> = a.coverage.content_tokens.iter().collect();
        content.sort();
        let mut people: Vec<&String> = a.coverage.people.iter().collect();
        people.sort();
        out.set_item("tokens", a.tokens.clone())?;
        out.set_item("content_tokens", content)?;
        out.set_item("asked", a.coverage.asked.clone())?;
        out.set_item("people", people)?;
        Ok(out)
    }

    /// The one speaker the query asks about (lower-cased), whose words the
    /// answer's ranking keeps ahead of the others' (`rank`); None when the
    /// query names nobody who speaks here, or several.
    #[getter]
    fn speaker_asked(&self) -> Option<String> {
        self.state.lock().query.speaker_asked.clone()
    }

    /// The scales of the dense shares (the pool's best after its feedback).
    #[getter]
    fn best_dense(&self) -> f64 {
        self.state.lock().query.best_dense
    }

    #[getter]
    fn best_passage(&self) -> f64 {
        self.state.lock().query.best_passage
    }

    /// The facts measured so far that did not hold at the query's time, each
    /// with the facts of its chain that did, ascending.
    fn replaced(&self) -> Vec<(NodeId, Vec<NodeId>)> {
        self.state.lock().facts.replaced()
    }
}
