//! `jevmem._core.Traversal`: the bounded beam traversal, stepped from Python.
//!
//! The Python layer asks the controller between steps; this object enforces
//! every hard limit itself. It holds its memory's lock handle, taking the read
//! lock only for the duration of a step.

use std::sync::Arc;
use std::time::Duration;

use jevmem_core::store::{MemoryStore as CoreStore, Restricted};
use jevmem_core::traversal::{
    Assessment, Candidate as CoreCandidate, CandidateScores, EvidenceItem, GraphAccess, Phase,
    Routing, Traversal as CoreTraversal, TraversalConfig as CoreConfig,
};
use jevmem_core::vector::VectorIndex;
use jevmem_core::{budget, fusion, Allowed, Error, NodeId, View};
use numpy::{AllowTypeChange, PyArrayLike1, PyArrayLike2};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{setting_arg, IntoPyResult};
use crate::store::Shared;

/// Every knob of the read path; the defaults are the paper's values.
#[pyclass(frozen, module = "jevmem._core")]
#[derive(Clone)]
pub struct TraversalConfig {
    pub(crate) inner: CoreConfig,
}

#[pymethods]
impl TraversalConfig {
    #[new]
    #[pyo3(signature = (
        *, total_budget = None, min_per_view = None, gamma = None, theta_act = None,
        depth_max = None, beam_width = None, max_visited = None, max_edges = None,
        max_controller_calls = None, max_wall_s = None, theta_suff = None, theta_missing = None,
        theta_contradiction = None, theta_useful = None, lambdas = None, recency_weight = None,
        min_admit_score = None
    ))]
    fn new(
        total_budget: Option<&Bound<'_, PyAny>>,
        min_per_view: Option<&Bound<'_, PyAny>>,
        gamma: Option<&Bound<'_, PyAny>>,
        theta_act: Option<&Bound<'_, PyAny>>,
        depth_max: Option<&Bound<'_, PyAny>>,
        beam_width: Option<&Bound<'_, PyAny>>,
        max_visited: Option<&Bound<'_, PyAny>>,
        max_edges: Option<&Bound<'_, PyAny>>,
        max_controller_calls: Option<&Bound<'_, PyAny>>,
        max_wall_s: Option<&Bound<'_, PyAny>>,
        theta_suff: Option<&Bound<'_, PyAny>>,
        theta_missing: Option<&Bound<'_, PyAny>>,
        theta_contradiction: Option<&Bound<'_, PyAny>>,
        theta_useful: Option<&Bound<'_, PyAny>>,
        lambdas: Option<&Bound<'_, PyAny>>,
        recency_weight: Option<&Bound<'_, PyAny>>,
        min_admit_score: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut c = CoreConfig::default();
        // each read as its field's type; a bad one is InvalidConfigError naming it
        macro_rules! set {
            ($($field:ident),*) => { $(
                if let Some(v) = setting_arg($field, stringify!($field))? {
                    c.$field = v;
                }
            )* };
        }
        let max_wall_s: Option<f64> = setting_arg(max_wall_s, "max_wall_s")?;
        set!(
            total_budget,
            min_per_view,
            gamma,
            theta_act,
            depth_max,
            beam_width,
            max_visited,
            max_edges,
            max_controller_calls,
            theta_suff,
            theta_missing,
            theta_contradiction,
            theta_useful,
            lambdas,
            recency_weight,
            min_admit_score
        );
        if let Some(s) = max_wall_s {
            c.max_wall = Duration::try_from_secs_f64(s)
                .map_err(|_| {
                    Error::InvalidConfig(format!(
                        "max_wall_s must be a non-negative number, got {s}"
                    ))
                })
                .py()?;
        }
        c.validate().py()?;
        Ok(Self { inner: c })
    }

    /// All settings as a dict (max_wall in seconds).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner;
        let d = PyDict::new(py);
        d.set_item("total_budget", c.total_budget)?;
        d.set_item("min_per_view", c.min_per_view)?;
        d.set_item("gamma", c.gamma)?;
        d.set_item("theta_act", c.theta_act)?;
        d.set_item("depth_max", c.depth_max)?;
        d.set_item("beam_width", c.beam_width)?;
        d.set_item("max_visited", c.max_visited)?;
        d.set_item("max_edges", c.max_edges)?;
        d.set_item("max_controller_calls", c.max_controller_calls)?;
        d.set_item("max_wall_s", c.max_wall.as_secs_f64())?;
        d.set_item("theta_suff", c.theta_suff)?;
        d.set_item("theta_missing", c.theta_missing)?;
        d.set_item("theta_contradiction", c.theta_contradiction)?;
        d.set_item("theta_useful", c.theta_useful)?;
        d.set_item("lambdas", c.lambdas.to_vec())?;
        d.set_item("recency_weight", c.recency_weight)?;
        d.set_item("min_admit_score", c.min_admit_score)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A node reached by expansion, waiting for the controller's scores.
#[pyclass(frozen, module = "jevmem._core", get_all)]
#[derive(Clone)]
pub struct Candidate {
    pub node: NodeId,
    pub view: &'static str,
    pub edge_weight: f32,
    /// The edge's stored direction (for causal edges: cause -> effect).
    pub src: NodeId,
    pub dst: NodeId,
    /// The beam node it was reached from.
    pub from_node: NodeId,
}

#[pymethods]
impl Candidate {
    fn __repr__(&self) -> String {
        format!(
            "Candidate(node={}, view={:?}, edge={}->{}, weight={:.3})",
            self.node, self.view, self.src, self.dst, self.edge_weight
        )
    }
}

impl From<&CoreCandidate> for Candidate {
    fn from(c: &CoreCandidate) -> Self {
        Candidate {
            node: c.node,
            view: c.view.name(),
            edge_weight: c.edge_weight,
            src: c.src,
            dst: c.dst,
            from_node: c.from,
        }
    }
}

/// One evidence item: a node, its score, the round that admitted it and the edge it came by.
#[pyclass(frozen, module = "jevmem._core", get_all)]
pub struct Evidence {
    pub node: NodeId,
    pub score: f64,
    pub depth: u32,
    pub via: Option<Candidate>,
}

#[pymethods]
impl Evidence {
    fn __repr__(&self) -> String {
        format!(
            "Evidence(node={}, score={:.4}, depth={})",
            self.node, self.score, self.depth
        )
    }
}

impl From<&EvidenceItem> for Evidence {
    fn from(e: &EvidenceItem) -> Self {
        Evidence {
            node: e.node,
            score: e.score,
            depth: e.depth,
            via: e.via.as_ref().map(Candidate::from),
        }
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Assess => "assess",
        Phase::Expand => "expand",
        Phase::Score => "score",
        Phase::Done(_) => "done",
    }
}

/// A bounded, resumable beam traversal over one memory (see `MemoryStore.traverse`).
#[pyclass(frozen, module = "jevmem._core")]
pub struct Traversal {
    store: Shared,
    state: Mutex<CoreTraversal>,
    /// The nodes a scoped traversal may see (None: all).
    allowed: Option<Arc<Allowed>>,
}

impl Traversal {
    /// Every evidence item so far as (node, score), best first.
    pub(crate) fn found(&self) -> Vec<(NodeId, f64)> {
        let t = self.state.lock();
        t.result(usize::MAX)
            .iter()
            .map(|e| (e.node, e.score))
            .collect()
    }
}

/// Run `f` on the store as the traversal may see it.
fn with_view<R>(
    store: &CoreStore,
    allowed: &Option<Arc<Allowed>>,
    f: impl FnOnce(&dyn GraphAccess) -> R,
) -> R {
    match allowed {
        None => f(store),
        Some(a) => f(&Restricted { store, allowed: a }),
    }
}

#[pymethods]
impl Traversal {
    /// "assess", "expand", "score" or "done".
    #[getter]
    fn phase(&self) -> &'static str {
        phase_name(self.state.lock().phase())
    }

    /// Why the traversal ended, or None while it runs.
    #[getter]
    fn stop_reason(&self) -> Option<&'static str> {
        match self.state.lock().phase() {
            Phase::Done(r) => Some(r.name()),
            _ => None,
        }
    }

    #[getter]
    fn calls_left(&self) -> u32 {
        self.state.lock().calls_left()
    }

    #[getter]
    fn elapsed_s(&self) -> f64 {
        self.state.lock().elapsed().as_secs_f64()
    }

    #[getter]
    fn remaining_s(&self) -> f64 {
        self.state.lock().remaining_time().as_secs_f64()
    }

    /// Stop now if the wall-time limit has passed; returns the phase.
    fn check_time(&self) -> &'static str {
        phase_name(self.state.lock().check_time())
    }

    /// Feed the round's assessment (one controller call); returns the next phase.
    fn assess(
        &self,
        sufficiency: f32,
        usefulness: f32,
        missing: f32,
        contradiction: f32,
    ) -> PyResult<&'static str> {
        let a = Assessment {
            sufficiency,
            usefulness,
            missing,
            contradiction,
        };
        self.state.lock().assess(a).map(phase_name).py()
    }

    /// Expand the beam along the active views within their budgets; returns the
    /// candidates the controller must score (empty when the traversal ended).
    fn expand(&self, py: Python<'_>) -> PyResult<Vec<Candidate>> {
        let (store, state, allowed) = (&self.store, &self.state, &self.allowed);
        py.detach(|| {
            let g = store.read();
            let mut t = state.lock();
            with_view(&g, allowed, |v| t.expand(v))
                .map(|cs| cs.iter().map(Candidate::from).collect())
        })
        .py()
    }

    /// Feed one row (relevance, relation_usefulness, novelty, support) per
    /// candidate, in `expand` order (one controller call); returns the next phase.
    fn score(&self, py: Python<'_>, scores: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        if !matches!(self.state.lock().phase(), Phase::Score) {
            // Let the core report the phase error, whatever the array looks like.
            let (store, state, allowed) = (&self.store, &self.state, &self.allowed);
            return py
                .detach(|| {
                    let g = store.read();
                    with_view(&g, allowed, |v| state.lock().score(v, &[]).map(phase_name))
                })
                .py();
        }
        let scores: PyArrayLike2<'_, f32, AllowTypeChange> = scores
            .extract()
            .map_err(|_| {
                Error::InvalidInput(
                    "scores must be a 2-D array of numbers: one row (relevance, \
                     relation_usefulness, novelty, support) per candidate"
                        .into(),
                )
            })
            .py()?;
        let arr = scores.as_array();
        if arr.ncols() != 4 && arr.nrows() > 0 {
            return Err(Error::InvalidInput(format!(
                "scores must have 4 columns (relevance, relation_usefulness, novelty, support), got {}",
                arr.ncols()
            )))
            .py();
        }
        let rows: Vec<CandidateScores> = arr
            .rows()
            .into_iter()
            .map(|r| CandidateScores {
                relevance: r[0],
                relation_usefulness: r[1],
                novelty: r[2],
                support: r[3],
            })
            .collect();
        let (store, state, allowed) = (&self.store, &self.state, &self.allowed);
        py.detach(|| {
            let g = store.read();
            let mut t = state.lock();
            with_view(&g, allowed, |v| t.score(v, &rows).map(phase_name))
        })
        .py()
    }

    /// The candidates of the current round (what `score` expects rows for).
    fn candidates(&self) -> Vec<Candidate> {
        self.state
            .lock()
            .candidates()
            .iter()
            .map(Candidate::from)
            .collect()
    }

    /// Ids of the current beam.
    fn frontier(&self) -> Vec<NodeId> {
        self.state.lock().frontier().to_vec()
    }

    /// The best `k` evidence items so far (all of them when k is None), best first.
    #[pyo3(signature = (k = None))]
    fn result(&self, k: Option<usize>) -> Vec<Evidence> {
        let t = self.state.lock();
        t.result(k.unwrap_or(usize::MAX))
            .iter()
            .map(Evidence::from)
            .collect()
    }

    /// Routing, budgets, per-round assessments, stop reason and counters.
    fn trace<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let tr = self.state.lock().trace();
        let d = PyDict::new(py);
        let routing = PyDict::new(py);
        for v in View::ALL {
            routing.set_item(v.name(), tr.routing.views[v.index()])?;
        }
        routing.set_item("multi_hop", tr.routing.multi_hop)?;
        routing.set_item("recency", tr.routing.recency)?;
        d.set_item("routing", routing)?;
        let active: Vec<&str> = View::ALL
            .iter()
            .filter(|v| tr.active[v.index()])
            .map(|v| v.name())
            .collect();
        d.set_item("active_views", active)?;
        // in view order, as `routing` (a HashMap's order changed from one process to the next)
        let by_view = |xs: [u32; View::COUNT]| -> PyResult<Bound<'_, PyDict>> {
            let out = PyDict::new(py);
            for v in View::ALL {
                out.set_item(v.name(), xs[v.index()])?;
            }
            Ok(out)
        };
        d.set_item("budgets", by_view(tr.budgets)?)?;
        d.set_item("spent", by_view(tr.spent)?)?;
        d.set_item("activation_fallback", tr.fallback)?;
        d.set_item("depth_limit", tr.depth_limit)?;
        let rounds = PyList::empty(py);
        for r in &tr.rounds {
            let rd = PyDict::new(py);
            rd.set_item("depth", r.depth)?;
            rd.set_item("candidates", r.candidates)?;
            rd.set_item("admitted", r.admitted)?;
            match &r.assessment {
                Some(a) => {
                    let ad = PyDict::new(py);
                    ad.set_item("sufficiency", a.sufficiency)?;
                    ad.set_item("usefulness", a.usefulness)?;
                    ad.set_item("missing", a.missing)?;
                    ad.set_item("contradiction", a.contradiction)?;
                    rd.set_item("assessment", ad)?;
                }
                None => rd.set_item("assessment", py.None())?,
            }
            rounds.append(rd)?;
        }
        d.set_item("rounds", rounds)?;
        d.set_item("stop_reason", tr.stop.map(|s| s.name()))?;
        d.set_item("visited", tr.visited)?;
        d.set_item("edges_examined", tr.edges_examined)?;
        d.set_item("controller_calls", tr.controller_calls)?;
        d.set_item("elapsed_s", tr.elapsed.as_secs_f64())?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let t = self.state.lock();
        format!(
            "Traversal(phase={:?}, evidence={})",
            phase_name(t.phase()),
            t.evidence().len()
        )
    }
}

/// Start a traversal on a memory (the body of `MemoryStore.traverse`).
pub(crate) fn start_traversal(
    py: Python<'_>,
    inner: &Shared,
    routing: (f32, f32, f32, f32),
    anchors: Vec<(NodeId, f32)>,
    multi_hop: f32,
    recency: f32,
    query_vector: Option<PyArrayLike1<'_, f32, AllowTypeChange>>,
    now: Option<i64>,
    config: Option<Bound<'_, TraversalConfig>>,
    calls_used: u32,
    elapsed_s: f64,
    allowed: Option<Arc<Allowed>>,
) -> PyResult<Traversal> {
    let routing = Routing {
        views: [routing.0, routing.1, routing.2, routing.3],
        multi_hop,
        recency,
    };
    let query: Option<Vec<f32>> = query_vector.map(|q| q.as_array().iter().copied().collect());
    let config = config.map_or_else(CoreConfig::default, |c| c.get().inner.clone());
    let elapsed_before = Duration::try_from_secs_f64(elapsed_s)
        .map_err(|_| {
            Error::InvalidInput(format!(
                "elapsed_s must be a non-negative number, got {elapsed_s}"
            ))
        })
        .py()?;
    let state = py
        .detach(|| {
            let g = inner.read();
            let unit = match query {
                Some(q) => {
                    g.vectors().validate(&q)?;
                    Some(VectorIndex::normalize(&q))
                }
                None => None,
            };
            with_view(&g, &allowed, |v| {
                CoreTraversal::start(
                    config,
                    routing,
                    unit,
                    now,
                    &anchors,
                    calls_used,
                    elapsed_before,
                    v,
                )
            })
        })
        .py()?;
    Ok(Traversal {
        store: inner.clone(),
        state: Mutex::new(state),
        allowed,
    })
}

/// Reciprocal rank fusion of ranked id lists: [(id, score)], best first.
#[pyfunction]
#[pyo3(signature = (lists, kappa = fusion::DEFAULT_KAPPA))]
pub fn rrf(lists: Vec<Vec<NodeId>>, kappa: f64) -> PyResult<Vec<(NodeId, f64)>> {
    let refs: Vec<&[NodeId]> = lists.iter().map(Vec::as_slice).collect();
    fusion::rrf(&refs, kappa).py()
}

/// Split `total` by `weights`: everyone gets `minimum`, the rest is floored
/// proportionally and the leftover units go to the largest remainders.
#[pyfunction]
pub fn largest_remainder(weights: Vec<f64>, total: u32, minimum: u32) -> PyResult<Vec<u32>> {
    budget::largest_remainder(&weights, total, minimum).py()
}

/// Per-view expansion budgets: (active flags, budgets, fallback used).
#[pyfunction]
#[pyo3(signature = (probs, theta_act = 0.1, total = 80, minimum = 1, gamma = 1.0))]
pub fn view_budgets(
    probs: (f32, f32, f32, f32),
    theta_act: f32,
    total: u32,
    minimum: u32,
    gamma: f32,
) -> PyResult<(Vec<bool>, Vec<u32>, bool)> {
    let b = budget::view_budgets(
        [probs.0, probs.1, probs.2, probs.3],
        theta_act,
        total,
        minimum,
        gamma,
    )
    .py()?;
    Ok((b.active.to_vec(), b.budgets.to_vec(), b.fallback))
}

/// D(q) = min(depth_max, max(1, ceil(depth_max * multi_hop))).
#[pyfunction]
#[pyo3(signature = (multi_hop, depth_max = 8))]
pub fn depth_limit(multi_hop: f32, depth_max: u32) -> PyResult<u32> {
    jevmem_core::error::check_unit("multi_hop", multi_hop).py()?;
    Ok(budget::depth_limit(multi_hop, depth_max))
}
