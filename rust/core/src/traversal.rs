//! Bounded beam traversal of the multi-view graph, as a resumable state machine.
//!
//! The Python layer drives it one step at a time and asks the controller
//! between steps:
//!
//! ```text
//! start -> assess_0 -> expand_1 -> score_1 -> assess_1 -> expand_2 -> ... -> Done
//! ```
//!
//! Every hard limit (depth, visited nodes, examined edges, controller calls,
//! wall time, per-view budgets) is enforced here, whatever scores the caller
//! feeds in. Every fallible step validates before it mutates, so an `Err`
//! leaves the traversal exactly as it was and the driver may retry.
//!
//! Decisions the paper leaves open (all documented at the place they apply):
//! - A round is entered (Assess -> Expand) when at least one controller call
//!   is left for its scoring request; the assessment after it is asked only if
//!   a call is still left, otherwise the traversal ends with
//!   `ControllerCallLimit` keeping the round's admitted evidence.
//! - Visited, edge and budget limits end expansion as soon as they are
//!   *reached*; the round's candidates are still scored, then the traversal
//!   stops with that limit.
//! - `assess` and `score` record the controller answer they were given (the
//!   call is already paid for) and check the wall clock afterwards; `expand`
//!   checks it before doing any work.

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::budget::{depth_limit, view_budgets};
use crate::error::{check_unit, Error, Result};
use crate::graph::Graph;
use crate::types::{NodeId, Timestamp, View, SECONDS_PER_DAY};

/// One edge touching a node, seen from that node: `neighbor` is the other end.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeRef {
    pub neighbor: NodeId,
    pub weight: f32,
    pub src: NodeId,
    pub dst: NodeId,
}

/// What the traversal needs from a memory: structure, similarity and time.
pub trait GraphAccess {
    fn contains(&self, node: NodeId) -> bool;
    /// Push every edge touching `node` in `view`, both directions, into `out` (which the caller clears).
    fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>);
    /// Cosine similarity of a unit query with the node's embedding (None if the node has none).
    fn similarity(&self, unit_query: &[f32], node: NodeId) -> Option<f32>;
    /// `similarity` of each of `nodes`, in order, appended to `out`: the same
    /// values. A round's candidates sit far apart in a large memory, so a
    /// store reads their vectors together rather than one miss at a time.
    fn similarities(&self, unit_query: &[f32], nodes: &[NodeId], out: &mut Vec<Option<f32>>) {
        out.extend(nodes.iter().map(|&n| self.similarity(unit_query, n)));
    }
    fn timestamp(&self, node: NodeId) -> Option<Timestamp>;
    /// A hint that the edges of `nodes` in `views` are read next (nothing
    /// by default): a large graph can ask for them together.
    fn prefetch_edges(&self, _nodes: &[NodeId], _views: &[View]) {}
}

/// The bare graph: structure and timestamps, no embeddings (z = 0).
impl GraphAccess for Graph {
    fn contains(&self, node: NodeId) -> bool {
        Graph::contains(self, node)
    }

    fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>) {
        out.extend(
            self.out_edges(node, view)
                .iter()
                .map(|&(dst, weight)| EdgeRef {
                    neighbor: dst,
                    weight,
                    src: node,
                    dst,
                }),
        );
        out.extend(
            self.in_edges(node, view)
                .iter()
                .map(|&(src, weight)| EdgeRef {
                    neighbor: src,
                    weight,
                    src,
                    dst: node,
                }),
        );
    }

    fn similarity(&self, _unit_query: &[f32], _node: NodeId) -> Option<f32> {
        None
    }

    fn timestamp(&self, node: NodeId) -> Option<Timestamp> {
        self.get(node).and_then(|n| n.timestamp)
    }

    fn prefetch_edges(&self, nodes: &[NodeId], views: &[View]) {
        Graph::prefetch_edges(self, nodes, views);
    }
}

/// Monotonic time source, injectable so time limits can be tested without sleeping.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> Instant;
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Clone, Debug)]
pub struct ManualClock {
    base: Instant,
    offset_nanos: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            offset_nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}

/// Every knob of the read path. `Default` holds the paper's values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraversalConfig {
    /// B: expansion budget shared by the active views.
    pub total_budget: u32,
    /// m: minimum budget of an active view.
    pub min_per_view: u32,
    pub gamma: f32,
    pub theta_act: f32,
    pub depth_max: u32,
    /// W: beam width, also the most candidates admitted per round.
    pub beam_width: u32,
    pub max_visited: u32,
    pub max_edges: u32,
    /// Counts every controller call of the query, routing included.
    pub max_controller_calls: u32,
    pub max_wall: Duration,
    pub theta_suff: f32,
    pub theta_missing: f32,
    pub theta_contradiction: f32,
    pub theta_useful: f32,
    /// l1..l5: weights of z, a, p_g*l, n and (pi + c)/2.
    pub lambdas: [f32; 5],
    /// The paper's 0.1 in (s + 0.1 r rho) / (1 + 0.1 r).
    pub recency_weight: f32,
    /// Combined score a candidate needs to join the beam and the evidence.
    pub min_admit_score: f32,
}

impl Default for TraversalConfig {
    fn default() -> Self {
        Self {
            total_budget: 80,
            min_per_view: 1,
            gamma: 1.0,
            theta_act: 0.10,
            depth_max: 8,
            beam_width: 10,
            max_visited: 60,
            max_edges: 2400,
            max_controller_calls: 16,
            max_wall: Duration::from_secs(15),
            theta_suff: 0.95,
            theta_missing: 0.15,
            theta_contradiction: 0.15,
            theta_useful: 0.15,
            lambdas: [1.0; 5],
            recency_weight: 0.1,
            min_admit_score: 0.25,
        }
    }
}

fn unit_config(name: &str, v: f32) -> Result<()> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(Error::config(format!("{name} must be in [0, 1], got {v}")))
    }
}

impl TraversalConfig {
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("total_budget", self.total_budget),
            ("depth_max", self.depth_max),
            ("beam_width", self.beam_width),
            ("max_visited", self.max_visited),
            ("max_edges", self.max_edges),
            ("max_controller_calls", self.max_controller_calls),
        ] {
            if v == 0 {
                return Err(Error::config(format!("{name} must be >= 1")));
            }
        }
        if u64::from(self.total_budget) < 4 * u64::from(self.min_per_view) {
            return Err(Error::config(format!(
                "total_budget {} cannot give min_per_view {} to all four views",
                self.total_budget, self.min_per_view
            )));
        }
        if !(self.gamma.is_finite() && self.gamma > 0.0) {
            return Err(Error::config(format!(
                "gamma must be finite and > 0, got {}",
                self.gamma
            )));
        }
        for (name, v) in [
            ("theta_act", self.theta_act),
            ("theta_suff", self.theta_suff),
            ("theta_missing", self.theta_missing),
            ("theta_contradiction", self.theta_contradiction),
            ("theta_useful", self.theta_useful),
            ("min_admit_score", self.min_admit_score),
        ] {
            unit_config(name, v)?;
        }
        if self.lambdas.iter().any(|l| !l.is_finite() || *l < 0.0) {
            return Err(Error::config(format!(
                "lambdas must be finite and >= 0, got {:?}",
                self.lambdas
            )));
        }
        if self.lambda_sum() <= 0.0 {
            return Err(Error::config("lambdas must not all be zero"));
        }
        if !(self.recency_weight.is_finite() && self.recency_weight >= 0.0) {
            return Err(Error::config(format!(
                "recency_weight must be finite and >= 0, got {}",
                self.recency_weight
            )));
        }
        if self.max_wall.is_zero() {
            return Err(Error::config("max_wall must be > 0"));
        }
        Ok(())
    }

    fn lambda_sum(&self) -> f64 {
        self.lambdas.iter().map(|&l| f64::from(l)).sum()
    }
}

/// The routing request's answers for one query.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Routing {
    /// p_g(q), indexed by [`View::index`].
    pub views: [f32; View::COUNT],
    /// h(q)
    pub multi_hop: f32,
    /// r(q)
    pub recency: f32,
}

impl Routing {
    pub fn validate(&self) -> Result<()> {
        for (view, &p) in View::ALL.iter().zip(&self.views) {
            check_unit(format_args!("routing {}", view.name()), p)?;
        }
        check_unit("routing multi_hop", self.multi_hop)?;
        check_unit("routing recency", self.recency)
    }
}

/// The controller's per-candidate answers: a_v, l_v, n_v, c_v.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateScores {
    pub relevance: f32,
    pub relation_usefulness: f32,
    pub novelty: f32,
    pub support: f32,
}

impl CandidateScores {
    fn validate(&self, i: usize) -> Result<()> {
        for (name, value) in [
            ("relevance", self.relevance),
            ("relation_usefulness", self.relation_usefulness),
            ("novelty", self.novelty),
            ("support", self.support),
        ] {
            check_unit(format_args!("candidate {i} {name}"), value)?;
        }
        Ok(())
    }
}

/// The controller's assessment of the current evidence: s_d, u_d, m_d, c_d.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub sufficiency: f32,
    pub usefulness: f32,
    pub missing: f32,
    pub contradiction: f32,
}

impl Assessment {
    fn validate(&self) -> Result<()> {
        check_unit("assessment sufficiency", self.sufficiency)?;
        check_unit("assessment usefulness", self.usefulness)?;
        check_unit("assessment missing", self.missing)?;
        check_unit("assessment contradiction", self.contradiction)
    }
}

/// A node reached by one traversed edge, waiting to be scored.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub node: NodeId,
    pub view: View,
    pub edge_weight: f32,
    pub src: NodeId,
    pub dst: NodeId,
    /// The frontier node it was reached from.
    pub from: NodeId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StopReason {
    Sufficient,
    NotUseful,
    DepthLimit,
    VisitedLimit,
    EdgeLimit,
    ControllerCallLimit,
    TimeLimit,
    BudgetExhausted,
    FrontierExhausted,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Sufficient => "sufficient",
            StopReason::NotUseful => "not_useful",
            StopReason::DepthLimit => "depth_limit",
            StopReason::VisitedLimit => "visited_limit",
            StopReason::EdgeLimit => "edge_limit",
            StopReason::ControllerCallLimit => "controller_call_limit",
            StopReason::TimeLimit => "time_limit",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::FrontierExhausted => "frontier_exhausted",
        }
    }
}

/// What the traversal waits for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Waiting for an assessment of the current evidence.
    Assess,
    /// Ready to expand the frontier (no controller needed).
    Expand,
    /// Waiting for scores of the candidates from the last expansion.
    Score,
    Done(StopReason),
}

/// One evidence node. Anchors have depth 0 and no `via`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceItem {
    pub node: NodeId,
    pub score: f64,
    pub depth: u32,
    pub via: Option<Candidate>,
}

/// Round d: the assessment of the evidence after d expansions, and what
/// expansion d produced (round 0: no candidates, the anchors as admitted).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundTrace {
    pub depth: u32,
    pub assessment: Option<Assessment>,
    pub candidates: usize,
    pub admitted: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub routing: Routing,
    pub active: [bool; View::COUNT],
    pub budgets: [u32; View::COUNT],
    pub spent: [u32; View::COUNT],
    pub fallback: bool,
    pub depth_limit: u32,
    pub rounds: Vec<RoundTrace>,
    pub stop: Option<StopReason>,
    pub visited: usize,
    pub edges_examined: u32,
    /// Including the calls made before the traversal started (routing).
    pub controller_calls: u32,
    pub elapsed: Duration,
}

/// Node ids are dense sequence numbers: a multiplicative hash spreads them
/// well enough and is much cheaper than SipHash on the expansion hot path.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdSet = HashSet<NodeId, BuildHasherDefault<IdHasher>>;

/// Edge weights come from the graph, not the controller; a broken weight
/// must not poison ordering or scores: it is clamped to [0, 1]
/// (NaN and -0.0 become +0.0, so ordering agrees with plain comparisons.)
fn sane_weight(w: f32) -> f32 {
    if w > 0.0 {
        w.min(1.0)
    } else {
        0.0
    }
}

/// Combined candidate score: the paper's weighted mean, then the recency blend.
/// Computed in f64 from the f32 inputs (the Python reference does the same).
#[allow(clippy::too_many_arguments)]
fn combined_score(
    config: &TraversalConfig,
    routing: &Routing,
    similarity: Option<f32>,
    p_view: f32,
    edge_weight: f32,
    scores: &CandidateScores,
    now: Option<Timestamp>,
    timestamp: Option<Timestamp>,
) -> f64 {
    let z = match similarity {
        Some(s) if s.is_finite() => f64::from(s).clamp(0.0, 1.0),
        _ => 0.0,
    };
    let [l1, l2, l3, l4, l5] = config.lambdas.map(f64::from);
    let s = (l1 * z
        + l2 * f64::from(scores.relevance)
        + l3 * f64::from(p_view) * f64::from(scores.relation_usefulness)
        + l4 * f64::from(scores.novelty)
        + l5 * (f64::from(edge_weight) + f64::from(scores.support)) / 2.0)
        / config.lambda_sum();
    match (now, timestamp) {
        (Some(now), Some(tau)) => {
            let age = now.saturating_sub(tau).max(0) as f64;
            let rho = 1.0 / (1.0 + age / SECONDS_PER_DAY);
            let wr = f64::from(config.recency_weight) * f64::from(routing.recency);
            (s + wr * rho) / (1.0 + wr)
        }
        _ => s,
    }
}

/// A query's traversal state. See the module docs for the step protocol.
#[derive(Debug)]
pub struct Traversal {
    config: TraversalConfig,
    routing: Routing,
    query: Option<Vec<f32>>,
    now: Option<Timestamp>,
    active: [bool; View::COUNT],
    budgets: [u32; View::COUNT],
    spent: [u32; View::COUNT],
    fallback: bool,
    /// Active views by routing probability desc, ties by view index.
    view_order: Vec<View>,
    depth_limit: u32,
    phase: Phase,
    visited: IdSet,
    frontier: Vec<NodeId>,
    candidates: Vec<Candidate>,
    evidence: Vec<EvidenceItem>,
    rounds: Vec<RoundTrace>,
    completed_rounds: u32,
    edges_examined: u32,
    controller_calls: u32,
    /// A limit reached during the last expansion; ends the traversal after scoring.
    pending_limit: Option<StopReason>,
    clock: Box<dyn Clock>,
    origin: Instant,
    elapsed_before: Duration,
    /// Elapsed time frozen when the traversal finished.
    finished_after: Option<Duration>,
    scratch: Vec<EdgeRef>,
}

impl Traversal {
    /// Start a traversal on the wall clock. `calls_used` counts controller
    /// calls already made for this query (routing); `elapsed_before` the time
    /// already spent on it, both charged against the limits.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        config: TraversalConfig,
        routing: Routing,
        unit_query: Option<Vec<f32>>,
        now: Option<Timestamp>,
        anchors: &[(NodeId, f32)],
        calls_used: u32,
        elapsed_before: Duration,
        graph: &dyn GraphAccess,
    ) -> Result<Traversal> {
        Self::start_with_clock(
            config,
            routing,
            unit_query,
            now,
            anchors,
            calls_used,
            elapsed_before,
            graph,
            Box::new(SystemClock),
        )
    }

    /// [`Traversal::start`] with an injected clock (tests, replays).
    #[allow(clippy::too_many_arguments)]
    pub fn start_with_clock(
        config: TraversalConfig,
        routing: Routing,
        unit_query: Option<Vec<f32>>,
        now: Option<Timestamp>,
        anchors: &[(NodeId, f32)],
        calls_used: u32,
        elapsed_before: Duration,
        graph: &dyn GraphAccess,
        clock: Box<dyn Clock>,
    ) -> Result<Traversal> {
        config.validate()?;
        routing.validate()?;
        // -0.0 passes validation; make it +0.0 so total_cmp orderings treat it as 0.
        let routing = Routing {
            views: routing.views.map(|p| p + 0.0),
            ..routing
        };
        if let Some(q) = &unit_query {
            if q.is_empty() || q.iter().any(|x| !x.is_finite()) {
                return Err(Error::invalid(
                    "query embedding must be non-empty and finite",
                ));
            }
        }
        if calls_used > config.max_controller_calls {
            return Err(Error::invalid(format!(
                "{calls_used} controller calls already used, more than the limit {}",
                config.max_controller_calls
            )));
        }
        let mut seen = IdSet::default();
        for (i, &(node, score)) in anchors.iter().enumerate() {
            check_unit(format_args!("anchor {i} score"), score)?;
            if !graph.contains(node) {
                return Err(Error::NodeNotFound(node));
            }
            if !seen.insert(node) {
                return Err(Error::invalid(format!("anchor {node} given twice")));
            }
        }
        let vb = view_budgets(
            routing.views,
            config.theta_act,
            config.total_budget,
            config.min_per_view,
            config.gamma,
        )?;
        let mut view_order: Vec<View> = View::ALL
            .into_iter()
            .filter(|v| vb.active[v.index()])
            .collect();
        view_order.sort_by(|a, b| {
            routing.views[b.index()]
                .total_cmp(&routing.views[a.index()])
                .then(a.cmp(b))
        });

        // Anchors beyond max_visited are dropped in the given order: the
        // caller ranks them (RRF), so the first ones are the best.
        let seeded = &anchors[..anchors.len().min(config.max_visited as usize)];
        // room for every node the traversal may visit: no rehash while it expands
        let mut visited = IdSet::with_capacity_and_hasher(
            (config.max_visited as usize).min(1 << 16),
            Default::default(),
        );
        visited.extend(seeded.iter().map(|a| a.0));
        let evidence: Vec<EvidenceItem> = seeded
            .iter()
            .map(|&(node, score)| EvidenceItem {
                node,
                score: f64::from(score) + 0.0,
                depth: 0,
                via: None,
            })
            .collect();
        let mut beam: Vec<(NodeId, f32)> = seeded.iter().map(|&(n, s)| (n, s + 0.0)).collect();
        beam.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let frontier: Vec<NodeId> = beam
            .iter()
            .take(config.beam_width as usize)
            .map(|a| a.0)
            .collect();

        let origin = clock.now();
        let mut t = Traversal {
            depth_limit: depth_limit(routing.multi_hop, config.depth_max),
            config,
            routing,
            query: unit_query,
            now,
            active: vb.active,
            budgets: vb.budgets,
            spent: [0; View::COUNT],
            fallback: vb.fallback,
            view_order,
            phase: Phase::Assess,
            visited,
            frontier,
            candidates: Vec::new(),
            rounds: vec![RoundTrace {
                depth: 0,
                assessment: None,
                candidates: 0,
                admitted: evidence.len(),
            }],
            evidence,
            completed_rounds: 0,
            edges_examined: 0,
            controller_calls: calls_used,
            pending_limit: None,
            clock,
            origin,
            elapsed_before,
            finished_after: None,
            scratch: Vec::new(),
        };
        if t.over_time() {
            t.finish(StopReason::TimeLimit);
        } else if t.frontier.is_empty() {
            t.finish(StopReason::FrontierExhausted);
        } else if t.calls_left() == 0 {
            t.finish(StopReason::ControllerCallLimit);
        }
        Ok(t)
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn config(&self) -> &TraversalConfig {
        &self.config
    }

    /// Candidates of the last expansion (cleared by the next one).
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// All evidence, in admission order.
    pub fn evidence(&self) -> &[EvidenceItem] {
        &self.evidence
    }

    /// The top `k` evidence items by score desc, ties by smaller id.
    pub fn result(&self, k: usize) -> Vec<EvidenceItem> {
        let mut items = self.evidence.clone();
        items.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.node.cmp(&b.node)));
        items.truncate(k);
        items
    }

    /// The current frontier (beam), best first.
    pub fn frontier(&self) -> &[NodeId] {
        &self.frontier
    }

    pub fn calls_left(&self) -> u32 {
        self.config
            .max_controller_calls
            .saturating_sub(self.controller_calls)
    }

    /// Time charged to this query so far (frozen once the traversal is done).
    pub fn elapsed(&self) -> Duration {
        self.finished_after.unwrap_or_else(|| {
            self.elapsed_before + self.clock.now().saturating_duration_since(self.origin)
        })
    }

    pub fn remaining_time(&self) -> Duration {
        self.config.max_wall.saturating_sub(self.elapsed())
    }

    /// Move to Done(TimeLimit) if the wall-time limit is reached; the driver
    /// can call this before a slow controller request.
    pub fn check_time(&mut self) -> Phase {
        if !matches!(self.phase, Phase::Done(_)) && self.over_time() {
            self.finish(StopReason::TimeLimit);
        }
        self.phase
    }

    pub fn trace(&self) -> Trace {
        Trace {
            routing: self.routing,
            active: self.active,
            budgets: self.budgets,
            spent: self.spent,
            fallback: self.fallback,
            depth_limit: self.depth_limit,
            rounds: self.rounds.clone(),
            stop: match self.phase {
                Phase::Done(r) => Some(r),
                _ => None,
            },
            visited: self.visited.len(),
            edges_examined: self.edges_examined,
            controller_calls: self.controller_calls,
            elapsed: self.elapsed(),
        }
    }

    fn over_time(&self) -> bool {
        self.elapsed() >= self.config.max_wall
    }

    fn finish(&mut self, reason: StopReason) {
        self.finished_after = Some(self.elapsed());
        self.phase = Phase::Done(reason);
    }

    fn expect_phase(&self, want: Phase, step: &str) -> Result<()> {
        if self.phase == want {
            Ok(())
        } else {
            Err(Error::InvalidState(format!(
                "{step} called in phase {:?}, expected {want:?}",
                self.phase
            )))
        }
    }

    /// Record the controller's assessment of the current evidence (one call)
    /// and decide whether to stop. Order: Sufficient, NotUseful, DepthLimit,
    /// ControllerCallLimit (no call left for the next scoring request),
    /// TimeLimit; otherwise Expand.
    pub fn assess(&mut self, assessment: Assessment) -> Result<Phase> {
        self.expect_phase(Phase::Assess, "assess")?;
        assessment.validate()?;
        self.controller_calls += 1;
        self.rounds
            .last_mut()
            .expect("round 0 exists from the start")
            .assessment = Some(assessment);
        let c = &self.config;
        if assessment.sufficiency >= c.theta_suff
            && assessment.missing < c.theta_missing
            && assessment.contradiction < c.theta_contradiction
        {
            self.finish(StopReason::Sufficient);
        } else if assessment.usefulness < c.theta_useful {
            self.finish(StopReason::NotUseful);
        } else if self.completed_rounds >= self.depth_limit {
            self.finish(StopReason::DepthLimit);
        } else if self.calls_left() == 0 {
            self.finish(StopReason::ControllerCallLimit);
        } else if self.over_time() {
            self.finish(StopReason::TimeLimit);
        } else {
            self.phase = Phase::Expand;
        }
        Ok(self.phase)
    }

    /// Expand the frontier: frontier nodes in beam order, each node's active
    /// views by routing probability, each view's edges by weight desc then
    /// neighbour id asc. Returns the new candidates (empty when the
    /// traversal stopped instead; see `phase()`).
    pub fn expand(&mut self, graph: &dyn GraphAccess) -> Result<&[Candidate]> {
        self.expect_phase(Phase::Expand, "expand")?;
        self.candidates.clear();
        if self.over_time() {
            self.finish(StopReason::TimeLimit);
            return Ok(&self.candidates);
        }
        let max_visited = self.config.max_visited as usize;
        let mut limit = self.limit_reached(max_visited);
        graph.prefetch_edges(&self.frontier, &self.view_order);
        let mut scratch = std::mem::take(&mut self.scratch);
        'frontier: for fi in 0..self.frontier.len() {
            if limit.is_some() {
                break;
            }
            let from = self.frontier[fi];
            for vi in 0..self.view_order.len() {
                let view = self.view_order[vi];
                let g = view.index();
                if self.spent[g] >= self.budgets[g] {
                    continue;
                }
                scratch.clear();
                graph.edges(from, view, &mut scratch);
                for e in scratch.iter_mut() {
                    e.weight = sane_weight(e.weight);
                }
                scratch.sort_unstable_by(|a, b| {
                    b.weight
                        .total_cmp(&a.weight)
                        .then(a.neighbor.cmp(&b.neighbor))
                        .then(a.src.cmp(&b.src))
                        .then(a.dst.cmp(&b.dst))
                });
                for e in &scratch {
                    self.edges_examined += 1;
                    if !self.visited.contains(&e.neighbor) && graph.contains(e.neighbor) {
                        self.visited.insert(e.neighbor);
                        self.spent[g] += 1;
                        self.candidates.push(Candidate {
                            node: e.neighbor,
                            view,
                            edge_weight: e.weight,
                            src: e.src,
                            dst: e.dst,
                            from,
                        });
                    }
                    limit = self.limit_reached(max_visited);
                    if limit.is_some() {
                        break 'frontier;
                    }
                    if self.spent[g] >= self.budgets[g] {
                        break; // this view's budget is spent: next view
                    }
                }
            }
        }
        self.scratch = scratch;
        if self.candidates.is_empty() {
            self.finish(limit.unwrap_or(StopReason::FrontierExhausted));
        } else {
            self.pending_limit = limit;
            self.rounds.push(RoundTrace {
                depth: self.completed_rounds + 1,
                assessment: None,
                candidates: self.candidates.len(),
                admitted: 0,
            });
            self.phase = Phase::Score;
        }
        Ok(&self.candidates)
    }

    /// The hard expansion limit that is reached, if any (edges, then visited, then budgets).
    fn limit_reached(&self, max_visited: usize) -> Option<StopReason> {
        if self.edges_examined >= self.config.max_edges {
            Some(StopReason::EdgeLimit)
        } else if self.visited.len() >= max_visited {
            Some(StopReason::VisitedLimit)
        } else if self
            .view_order
            .iter()
            .all(|v| self.spent[v.index()] >= self.budgets[v.index()])
        {
            Some(StopReason::BudgetExhausted)
        } else {
            None
        }
    }

    /// Score the last expansion's candidates (one call): the top `beam_width`
    /// with combined score >= min_admit_score become the next frontier and
    /// join the evidence. Then stop on a limit reached during expansion, an
    /// empty beam, no call left for the next assessment, or the wall clock.
    pub fn score(&mut self, graph: &dyn GraphAccess, scores: &[CandidateScores]) -> Result<Phase> {
        self.expect_phase(Phase::Score, "score")?;
        if scores.len() != self.candidates.len() {
            return Err(Error::invalid(format!(
                "got {} candidate scores for {} candidates",
                scores.len(),
                self.candidates.len()
            )));
        }
        for (i, s) in scores.iter().enumerate() {
            s.validate(i)?;
        }
        self.controller_calls += 1;
        let mut sims: Vec<Option<f32>> = Vec::with_capacity(self.candidates.len());
        match self.query.as_deref() {
            Some(q) => {
                let nodes: Vec<NodeId> = self.candidates.iter().map(|c| c.node).collect();
                graph.similarities(q, &nodes, &mut sims);
            }
            None => sims.resize(self.candidates.len(), None),
        }
        let mut ranked: Vec<(f64, usize)> = self
            .candidates
            .iter()
            .zip(scores)
            .zip(sims)
            .enumerate()
            .map(|(i, ((cand, sc), sim))| {
                let s = combined_score(
                    &self.config,
                    &self.routing,
                    sim,
                    self.routing.views[cand.view.index()],
                    cand.edge_weight,
                    sc,
                    self.now,
                    graph.timestamp(cand.node),
                );
                (s, i)
            })
            .collect();
        let cands = &self.candidates;
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(cands[a.1].node.cmp(&cands[b.1].node))
        });
        let depth = self.completed_rounds + 1;
        let min_admit = f64::from(self.config.min_admit_score);
        self.frontier.clear();
        for &(s, i) in ranked
            .iter()
            .take(self.config.beam_width as usize)
            .take_while(|(s, _)| *s >= min_admit)
        {
            let cand = self.candidates[i];
            self.frontier.push(cand.node);
            self.evidence.push(EvidenceItem {
                node: cand.node,
                score: s,
                depth,
                via: Some(cand),
            });
        }
        self.completed_rounds = depth;
        self.rounds
            .last_mut()
            .expect("expand pushed this round")
            .admitted = self.frontier.len();
        if let Some(limit) = self.pending_limit.take() {
            self.finish(limit);
        } else if self.frontier.is_empty() {
            self.finish(StopReason::FrontierExhausted);
        } else if self.calls_left() == 0 {
            self.finish(StopReason::ControllerCallLimit);
        } else if self.over_time() {
            self.finish(StopReason::TimeLimit);
        } else {
            self.phase = Phase::Assess;
        }
        Ok(self.phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet, HashMap};

    // ---------- deterministic randomness ----------

    fn mix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = mix(self.0);
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
        fn chance(&mut self, p: f32) -> bool {
            self.unit() < p
        }
    }

    // ---------- a test graph ----------

    const DIM: usize = 8;

    #[derive(Debug, Default)]
    struct TestGraph {
        nodes: BTreeSet<NodeId>,
        /// (src, dst, view, weight); at most one per (src, dst, view), no self-loops.
        edge_list: Vec<(NodeId, NodeId, View, f32)>,
        adjacency: HashMap<(NodeId, View), Vec<EdgeRef>>,
        embeddings: HashMap<NodeId, Vec<f32>>,
        timestamps: HashMap<NodeId, Timestamp>,
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut s = 0.0f32;
        for (x, y) in a.iter().zip(b) {
            s += x * y;
        }
        s
    }

    fn unit_vector(rng: &mut Rng) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM).map(|_| rng.unit() * 2.0 - 1.0).collect();
        let norm = dot(&v, &v).sqrt().max(1e-6);
        v.into_iter().map(|x| x / norm).collect()
    }

    impl TestGraph {
        fn random(rng: &mut Rng) -> TestGraph {
            let n = 1 + rng.below(80);
            // Sparse ids, as after removals.
            let ids: Vec<NodeId> = (0..n).map(|i| i * 2 + rng.below(2)).collect();
            let mut g = TestGraph {
                nodes: ids.iter().copied().collect(),
                ..Default::default()
            };
            let mut edges: BTreeMap<(NodeId, NodeId, View), f32> = BTreeMap::new();
            for _ in 0..rng.below(n * 10 + 1) {
                let src = ids[rng.below(n) as usize];
                // A few dangling edges: the traversal must skip unknown nodes.
                let dst = if rng.chance(0.03) {
                    10_000 + rng.below(5)
                } else {
                    ids[rng.below(n) as usize]
                };
                if src == dst {
                    continue;
                }
                let view = View::ALL[rng.below(4) as usize];
                // Coarse weights make ties common, which exercises the tie rules.
                let weight = if rng.chance(0.5) {
                    rng.below(11) as f32 / 10.0
                } else {
                    rng.unit()
                };
                let w = edges.entry((src, dst, view)).or_insert(weight);
                *w = w.max(weight);
            }
            for (&(src, dst, view), &weight) in &edges {
                g.edge_list.push((src, dst, view, weight));
                g.adjacency.entry((src, view)).or_default().push(EdgeRef {
                    neighbor: dst,
                    weight,
                    src,
                    dst,
                });
                g.adjacency.entry((dst, view)).or_default().push(EdgeRef {
                    neighbor: src,
                    weight,
                    src,
                    dst,
                });
            }
            for &id in &ids {
                if rng.chance(0.7) {
                    g.embeddings.insert(id, unit_vector(rng));
                }
                if rng.chance(0.7) {
                    g.timestamps
                        .insert(id, 1_700_000_000 + rng.below(100 * 86_400) as i64);
                }
            }
            g
        }

        fn has_edge(&self, src: NodeId, dst: NodeId, view: View, weight: f32) -> bool {
            self.edge_list
                .iter()
                .any(|&(s, d, v, w)| s == src && d == dst && v == view && w == weight)
        }
    }

    impl GraphAccess for TestGraph {
        fn contains(&self, node: NodeId) -> bool {
            self.nodes.contains(&node)
        }
        fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>) {
            if let Some(list) = self.adjacency.get(&(node, view)) {
                out.extend_from_slice(list);
            }
        }
        fn similarity(&self, unit_query: &[f32], node: NodeId) -> Option<f32> {
            self.embeddings.get(&node).map(|e| dot(unit_query, e))
        }
        fn timestamp(&self, node: NodeId) -> Option<Timestamp> {
            self.timestamps.get(&node).copied()
        }
    }

    // ---------- random inputs ----------

    fn random_config(rng: &mut Rng) -> TraversalConfig {
        let min_per_view = rng.below(3) as u32;
        let pick = |rng: &mut Rng, small: u64, big: u64| {
            if rng.chance(0.5) {
                1 + rng.below(small) as u32
            } else {
                1 + rng.below(big) as u32
            }
        };
        let mut lambdas = [0.0f32; 5];
        for l in &mut lambdas {
            *l = if rng.chance(0.2) {
                0.0
            } else {
                rng.unit() * 2.0
            };
        }
        if lambdas.iter().all(|&l| l == 0.0) {
            lambdas[1] = 1.0;
        }
        let cfg = TraversalConfig {
            total_budget: 4 * min_per_view + pick(rng, 6, 120),
            min_per_view,
            gamma: [0.5, 1.0, 2.0][rng.below(3) as usize],
            theta_act: rng.unit() * 0.5,
            depth_max: pick(rng, 3, 10),
            beam_width: pick(rng, 3, 12),
            max_visited: pick(rng, 8, 80),
            max_edges: pick(rng, 30, 3000),
            max_controller_calls: pick(rng, 4, 20),
            max_wall: Duration::from_secs(3600),
            theta_suff: rng.unit(),
            theta_missing: rng.unit(),
            theta_contradiction: rng.unit(),
            theta_useful: rng.unit() * 0.3,
            lambdas,
            recency_weight: rng.unit() * 0.5,
            min_admit_score: rng.unit() * 0.6,
        };
        cfg.validate().expect("generated config is valid");
        cfg
    }

    fn random_routing(rng: &mut Rng) -> Routing {
        let mut views = [0.0f32; 4];
        for p in &mut views {
            *p = if rng.chance(0.2) { 0.0 } else { rng.unit() };
        }
        Routing {
            views,
            multi_hop: rng.unit(),
            recency: rng.unit(),
        }
    }

    fn random_anchors(rng: &mut Rng, g: &TestGraph) -> Vec<(NodeId, f32)> {
        let ids: Vec<NodeId> = g.nodes.iter().copied().collect();
        let mut out: Vec<(NodeId, f32)> = Vec::new();
        for _ in 0..rng.below(15) {
            let id = ids[rng.below(ids.len() as u64) as usize];
            if out.iter().all(|a| a.0 != id) {
                let score = if rng.chance(0.3) { 0.5 } else { rng.unit() };
                out.push((id, score));
            }
        }
        out
    }

    // ---------- score oracles ----------

    #[derive(Clone, Copy, Debug)]
    enum Mode {
        Ones,
        Zeros,
        Random,
        /// Assessments that always ask to continue, random candidate scores.
        Continue,
    }

    #[derive(Clone, Copy, Debug)]
    struct Oracle {
        mode: Mode,
        seed: u64,
    }

    impl Oracle {
        fn draw(&self, round: u32, node: NodeId, k: u64) -> f32 {
            let h = mix(self.seed ^ mix(u64::from(round) ^ mix(node ^ mix(k))));
            (h >> 40) as f32 / (1u64 << 24) as f32
        }

        fn assessment(&self, round: u32) -> Assessment {
            match self.mode {
                Mode::Ones => Assessment {
                    sufficiency: 1.0,
                    usefulness: 1.0,
                    missing: 1.0,
                    contradiction: 1.0,
                },
                Mode::Zeros => Assessment {
                    sufficiency: 0.0,
                    usefulness: 0.0,
                    missing: 0.0,
                    contradiction: 0.0,
                },
                Mode::Random => Assessment {
                    sufficiency: self.draw(round, u64::MAX, 1),
                    usefulness: self.draw(round, u64::MAX, 2),
                    missing: self.draw(round, u64::MAX, 3),
                    contradiction: self.draw(round, u64::MAX, 4),
                },
                Mode::Continue => Assessment {
                    sufficiency: 0.0,
                    usefulness: 1.0,
                    missing: 1.0,
                    contradiction: 0.0,
                },
            }
        }

        fn scores(&self, round: u32, node: NodeId) -> CandidateScores {
            match self.mode {
                Mode::Ones => CandidateScores {
                    relevance: 1.0,
                    relation_usefulness: 1.0,
                    novelty: 1.0,
                    support: 1.0,
                },
                Mode::Zeros => CandidateScores {
                    relevance: 0.0,
                    relation_usefulness: 0.0,
                    novelty: 0.0,
                    support: 0.0,
                },
                Mode::Random | Mode::Continue => CandidateScores {
                    relevance: self.draw(round, node, 5),
                    relation_usefulness: self.draw(round, node, 6),
                    novelty: self.draw(round, node, 7),
                    support: self.draw(round, node, 8),
                },
            }
        }
    }

    // ---------- one query, end to end ----------

    struct Query {
        config: TraversalConfig,
        routing: Routing,
        query: Option<Vec<f32>>,
        now: Option<Timestamp>,
        anchors: Vec<(NodeId, f32)>,
        calls_used: u32,
    }

    fn random_query(rng: &mut Rng) -> Query {
        let config = random_config(rng);
        let calls_used = rng.below(u64::from(config.max_controller_calls.min(2)) + 1) as u32;
        Query {
            routing: random_routing(rng),
            query: rng.chance(0.7).then(|| unit_vector(rng)),
            now: rng
                .chance(0.7)
                .then(|| 1_700_000_000 + rng.below(120 * 86_400) as i64),
            anchors: Vec::new(),
            calls_used,
            config,
        }
    }

    fn start(q: &Query, g: &TestGraph) -> Traversal {
        Traversal::start_with_clock(
            q.config.clone(),
            q.routing,
            q.query.clone(),
            q.now,
            &q.anchors,
            q.calls_used,
            Duration::ZERO,
            g,
            Box::new(ManualClock::new()),
        )
        .expect("valid start")
    }

    fn invalid_assessment(rng: &mut Rng) -> Assessment {
        let bad = [f32::NAN, -0.1, 1.5, f32::INFINITY][rng.below(4) as usize];
        let mut a = Assessment {
            sufficiency: 0.5,
            usefulness: 0.5,
            missing: 0.5,
            contradiction: 0.5,
        };
        match rng.below(4) {
            0 => a.sufficiency = bad,
            1 => a.usefulness = bad,
            2 => a.missing = bad,
            _ => a.contradiction = bad,
        }
        a
    }

    /// Drive a traversal to the end with the oracle, injecting invalid calls
    /// when `adversarial`, and check every invariant on the way.
    fn drive(
        t: &mut Traversal,
        g: &TestGraph,
        q: &Query,
        oracle: Oracle,
        adversarial: bool,
        rng: &mut Rng,
    ) {
        let cfg = &q.config;
        let seeded = q.anchors.len().min(cfg.max_visited as usize);
        let mut seen: BTreeSet<NodeId> = q.anchors[..seeded].iter().map(|a| a.0).collect();
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 1000, "driver loop does not terminate");
            let before = (t.phase(), t.trace(), t.evidence().to_vec());
            let unchanged = |t: &Traversal| {
                assert_eq!(t.phase(), before.0);
                assert_eq!(t.trace(), before.1);
                assert_eq!(t.evidence(), &before.2[..]);
            };
            let round = t.trace().rounds.len() as u32 - 1;
            match t.phase() {
                Phase::Assess => {
                    if adversarial {
                        let err = t.assess(invalid_assessment(rng)).unwrap_err();
                        assert!(matches!(err, Error::InvalidScore { .. }), "{err}");
                        assert!(matches!(t.expand(g), Err(Error::InvalidState(_))));
                        assert!(matches!(t.score(g, &[]), Err(Error::InvalidState(_))));
                        unchanged(t);
                    }
                    t.assess(oracle.assessment(round)).unwrap();
                }
                Phase::Expand => {
                    if adversarial {
                        assert!(matches!(
                            t.assess(oracle.assessment(round)),
                            Err(Error::InvalidState(_))
                        ));
                        unchanged(t);
                    }
                    let cands = t.expand(g).unwrap().to_vec();
                    for c in &cands {
                        assert!(
                            seen.insert(c.node),
                            "candidate {} was already visited",
                            c.node
                        );
                        assert!(g.contains(c.node));
                        assert!(g.has_edge(c.src, c.dst, c.view, c.edge_weight));
                        assert!(c.node == c.src || c.node == c.dst);
                        assert!(c.from == c.src || c.from == c.dst);
                        assert_ne!(c.from, c.node);
                        assert!(t.trace().active[c.view.index()]);
                    }
                }
                Phase::Score => {
                    let cands = t.candidates().to_vec();
                    let good: Vec<CandidateScores> =
                        cands.iter().map(|c| oracle.scores(round, c.node)).collect();
                    if adversarial {
                        let mut bad = good.clone();
                        let i = rng.below(bad.len() as u64) as usize;
                        let v = [f32::NAN, -1e-3, 1.0001, f32::NEG_INFINITY][rng.below(4) as usize];
                        match rng.below(4) {
                            0 => bad[i].relevance = v,
                            1 => bad[i].relation_usefulness = v,
                            2 => bad[i].novelty = v,
                            _ => bad[i].support = v,
                        }
                        assert!(matches!(t.score(g, &bad), Err(Error::InvalidScore { .. })));
                        assert!(matches!(
                            t.score(g, &good[1..]),
                            Err(Error::InvalidInput(_))
                        ));
                        unchanged(t);
                    }
                    t.score(g, &good).unwrap();
                }
                Phase::Done(_) => {
                    assert!(matches!(
                        t.assess(oracle.assessment(0)),
                        Err(Error::InvalidState(_))
                    ));
                    break;
                }
            }
            check_invariants(t, q);
        }
    }

    fn check_invariants(t: &Traversal, q: &Query) {
        let cfg = &q.config;
        let tr = t.trace();
        assert!(tr.visited <= cfg.max_visited as usize);
        assert!(tr.edges_examined <= cfg.max_edges);
        assert!(tr.controller_calls <= cfg.max_controller_calls);
        assert!(tr.depth_limit >= 1 && tr.depth_limit <= cfg.depth_max);
        let completed = tr.rounds.iter().filter(|r| r.depth > 0).count() as u32;
        assert!(completed <= tr.depth_limit);
        assert_eq!(tr.budgets.iter().sum::<u32>(), cfg.total_budget);
        for g in 0..4 {
            assert!(tr.spent[g] <= tr.budgets[g]);
            if !tr.active[g] {
                assert_eq!(tr.budgets[g], 0);
            }
        }
        let seeded = q.anchors.len().min(cfg.max_visited as usize);
        assert!(t.evidence().len() <= seeded + (cfg.beam_width * completed) as usize);
        assert!(t.frontier().len() <= cfg.beam_width as usize);
        for k in [0, 1, 3, 100] {
            let r = t.result(k);
            assert!(r.len() <= k);
            assert!(r
                .windows(2)
                .all(|w| w[0].score > w[1].score
                    || (w[0].score == w[1].score && w[0].node < w[1].node)));
        }
        assert_eq!(tr.stop.is_some(), matches!(t.phase(), Phase::Done(_)));
    }

    // ---------- the plainly-coded reference ----------

    #[derive(Debug, PartialEq)]
    struct Outcome {
        evidence: Vec<(NodeId, f64, u32)>,
        stop: StopReason,
        visited: usize,
        edges_examined: u32,
        controller_calls: u32,
        rounds: u32,
        spent: [u32; 4],
    }

    /// The whole query in one function over the raw edge list: no state
    /// machine, no hash sets, no adjacency lists.
    fn reference(g: &TestGraph, q: &Query, oracle: Oracle) -> Outcome {
        let cfg = &q.config;
        let vb = view_budgets(
            q.routing.views,
            cfg.theta_act,
            cfg.total_budget,
            cfg.min_per_view,
            cfg.gamma,
        )
        .unwrap();
        let depth_lim = depth_limit(q.routing.multi_hop, cfg.depth_max);
        let seeded: Vec<(NodeId, f32)> = q
            .anchors
            .iter()
            .take(cfg.max_visited as usize)
            .copied()
            .collect();
        let mut visited: BTreeSet<NodeId> = seeded.iter().map(|a| a.0).collect();
        let mut evidence: Vec<(NodeId, f64, u32)> =
            seeded.iter().map(|&(n, s)| (n, s as f64, 0)).collect();
        let mut sorted = seeded.clone();
        sorted.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        let mut frontier: Vec<NodeId> = sorted
            .iter()
            .take(cfg.beam_width as usize)
            .map(|a| a.0)
            .collect();
        let mut calls = q.calls_used;
        let mut edges = 0u32;
        let mut spent = [0u32; 4];
        let mut rounds = 0u32;
        let mut views: Vec<usize> = (0..4).filter(|&i| vb.active[i]).collect();
        views.sort_by(|&a, &b| {
            q.routing.views[b]
                .partial_cmp(&q.routing.views[a])
                .unwrap()
                .then(a.cmp(&b))
        });
        let lsum: f64 = cfg.lambdas.iter().map(|&l| l as f64).sum();

        let stop = 'run: {
            if frontier.is_empty() {
                break 'run StopReason::FrontierExhausted;
            }
            if calls >= cfg.max_controller_calls {
                break 'run StopReason::ControllerCallLimit;
            }
            loop {
                // assess
                let a = oracle.assessment(rounds);
                calls += 1;
                if a.sufficiency >= cfg.theta_suff
                    && a.missing < cfg.theta_missing
                    && a.contradiction < cfg.theta_contradiction
                {
                    break 'run StopReason::Sufficient;
                }
                if a.usefulness < cfg.theta_useful {
                    break 'run StopReason::NotUseful;
                }
                if rounds >= depth_lim {
                    break 'run StopReason::DepthLimit;
                }
                if calls >= cfg.max_controller_calls {
                    break 'run StopReason::ControllerCallLimit;
                }
                // expand
                let mut cands: Vec<(NodeId, usize, f32)> = Vec::new();
                let mut limit = None;
                let all_spent = |spent: &[u32; 4]| views.iter().all(|&v| spent[v] >= vb.budgets[v]);
                if visited.len() >= cfg.max_visited as usize {
                    limit = Some(StopReason::VisitedLimit);
                }
                'expand: for &f in &frontier {
                    if limit.is_some() {
                        break;
                    }
                    for &v in &views {
                        if spent[v] >= vb.budgets[v] {
                            continue;
                        }
                        let mut es: Vec<(NodeId, f32, NodeId, NodeId)> = Vec::new();
                        for &(s, d, view, w) in &g.edge_list {
                            if view.index() == v && s == f {
                                es.push((d, w, s, d));
                            }
                            if view.index() == v && d == f {
                                es.push((s, w, s, d));
                            }
                        }
                        es.sort_by(|a, b| {
                            b.1.partial_cmp(&a.1)
                                .unwrap()
                                .then(a.0.cmp(&b.0))
                                .then(a.2.cmp(&b.2))
                                .then(a.3.cmp(&b.3))
                        });
                        for (nb, w, _, _) in es {
                            edges += 1;
                            if !visited.contains(&nb) && g.nodes.contains(&nb) {
                                visited.insert(nb);
                                spent[v] += 1;
                                cands.push((nb, v, w));
                            }
                            if edges >= cfg.max_edges {
                                limit = Some(StopReason::EdgeLimit);
                                break 'expand;
                            }
                            if visited.len() >= cfg.max_visited as usize {
                                limit = Some(StopReason::VisitedLimit);
                                break 'expand;
                            }
                            if all_spent(&spent) {
                                limit = Some(StopReason::BudgetExhausted);
                                break 'expand;
                            }
                            if spent[v] >= vb.budgets[v] {
                                break;
                            }
                        }
                    }
                }
                if cands.is_empty() {
                    break 'run limit.unwrap_or(StopReason::FrontierExhausted);
                }
                // score
                calls += 1;
                rounds += 1;
                let mut scored: Vec<(NodeId, f64)> = Vec::new();
                for &(node, v, w) in &cands {
                    let sc = oracle.scores(rounds, node);
                    let mut z = 0.0f64;
                    if let (Some(qv), Some(e)) = (&q.query, g.embeddings.get(&node)) {
                        z = (dot(qv, e) as f64).clamp(0.0, 1.0);
                    }
                    let l = cfg.lambdas.map(|x| x as f64);
                    let mut s = (l[0] * z
                        + l[1] * sc.relevance as f64
                        + l[2] * q.routing.views[v] as f64 * sc.relation_usefulness as f64
                        + l[3] * sc.novelty as f64
                        + l[4] * (w as f64 + sc.support as f64) / 2.0)
                        / lsum;
                    if let (Some(now), Some(&tau)) = (q.now, g.timestamps.get(&node)) {
                        let age = if now > tau { (now - tau) as f64 } else { 0.0 };
                        let rho = 1.0 / (1.0 + age / 86_400.0);
                        let wr = cfg.recency_weight as f64 * q.routing.recency as f64;
                        s = (s + wr * rho) / (1.0 + wr);
                    }
                    scored.push((node, s));
                }
                scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
                frontier.clear();
                for &(node, s) in scored.iter().take(cfg.beam_width as usize) {
                    if s < cfg.min_admit_score as f64 {
                        break;
                    }
                    frontier.push(node);
                    evidence.push((node, s, rounds));
                }
                if let Some(l) = limit {
                    break 'run l;
                }
                if frontier.is_empty() {
                    break 'run StopReason::FrontierExhausted;
                }
                if calls >= cfg.max_controller_calls {
                    break 'run StopReason::ControllerCallLimit;
                }
            }
        };
        Outcome {
            evidence,
            stop,
            visited: visited.len(),
            edges_examined: edges,
            controller_calls: calls,
            rounds,
            spent,
        }
    }

    fn outcome_of(t: &Traversal) -> Outcome {
        let tr = t.trace();
        Outcome {
            evidence: t
                .evidence()
                .iter()
                .map(|e| (e.node, e.score, e.depth))
                .collect(),
            stop: tr.stop.expect("finished"),
            visited: tr.visited,
            edges_examined: tr.edges_examined,
            controller_calls: tr.controller_calls,
            rounds: tr.rounds.iter().filter(|r| r.depth > 0).count() as u32,
            spent: tr.spent,
        }
    }

    fn random_case(seed: u64) -> (TestGraph, Query, Oracle, Rng) {
        let mut rng = Rng(seed);
        let g = TestGraph::random(&mut rng);
        let mut q = random_query(&mut rng);
        q.anchors = random_anchors(&mut rng, &g);
        let mode = [
            Mode::Ones,
            Mode::Zeros,
            Mode::Random,
            Mode::Continue,
            Mode::Continue,
        ][rng.below(5) as usize];
        let oracle = Oracle {
            mode,
            seed: rng.next(),
        };
        (g, q, oracle, rng)
    }

    // ---------- hand-built cases ----------

    /// A small hand-built graph: 1 -semantic- 2 -semantic- 3, 1 -temporal- 4.
    fn line_graph() -> TestGraph {
        let mut g = TestGraph::default();
        for id in 1..=4 {
            g.nodes.insert(id);
        }
        for (s, d, v, w) in [
            (1, 2, View::Semantic, 0.0),
            (2, 3, View::Semantic, 0.5),
            (4, 1, View::Temporal, 1.0),
        ] {
            g.edge_list.push((s, d, v, w));
            let e = |neighbor| EdgeRef {
                neighbor,
                weight: w,
                src: s,
                dst: d,
            };
            g.adjacency.entry((s, v)).or_default().push(e(d));
            g.adjacency.entry((d, v)).or_default().push(e(s));
        }
        g
    }

    fn semantic_only() -> Routing {
        Routing {
            views: [1.0, 0.0, 0.0, 0.0],
            multi_hop: 1.0,
            recency: 0.0,
        }
    }

    const GO_ON: Assessment = Assessment {
        sufficiency: 0.0,
        usefulness: 1.0,
        missing: 1.0,
        contradiction: 0.0,
    };

    fn scores(relevance: f32, rest: f32) -> CandidateScores {
        CandidateScores {
            relevance,
            relation_usefulness: rest,
            novelty: rest,
            support: rest,
        }
    }

    fn begin(
        config: TraversalConfig,
        routing: Routing,
        now: Option<Timestamp>,
        g: &TestGraph,
    ) -> Traversal {
        Traversal::start_with_clock(
            config,
            routing,
            None,
            now,
            &[(1, 0.9)],
            1,
            Duration::ZERO,
            g,
            Box::new(ManualClock::new()),
        )
        .unwrap()
    }

    #[test]
    fn relevance_alone_never_admits() {
        let g = line_graph();
        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        assert_eq!(t.assess(GO_ON).unwrap(), Phase::Expand);
        let cands = t.expand(&g).unwrap().to_vec();
        assert_eq!(cands.len(), 1);
        assert_eq!(
            (cands[0].node, cands[0].from, cands[0].view),
            (2, 1, View::Semantic)
        );
        // s = (0 + 1 + 0 + 0 + (0 + 0)/2) / 5 = 0.2 < 0.25
        assert_eq!(
            t.score(&g, &[scores(1.0, 0.0)]).unwrap(),
            Phase::Done(StopReason::FrontierExhausted)
        );
        assert_eq!(t.evidence().len(), 1);
        assert_eq!(t.trace().rounds[1].admitted, 0);

        // The same candidate with relation usefulness as well gets in: (1 + 1) / 5.
        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        t.assess(GO_ON).unwrap();
        t.expand(&g).unwrap();
        let cs = CandidateScores {
            relevance: 1.0,
            relation_usefulness: 1.0,
            novelty: 0.0,
            support: 0.0,
        };
        assert_eq!(t.score(&g, &[cs]).unwrap(), Phase::Assess);
        let ev = t.evidence()[1];
        assert_eq!((ev.node, ev.depth), (2, 1));
        assert!((ev.score - 0.4).abs() < 1e-12);
        assert_eq!(ev.via.unwrap().node, 2);
        assert_eq!(t.frontier(), &[2]);
    }

    #[test]
    fn recency_blend_matches_the_formula() {
        let g = {
            let mut g = line_graph();
            g.timestamps.insert(2, 1_000_000);
            g
        };
        let config = TraversalConfig {
            min_admit_score: 0.0,
            ..Default::default()
        };
        let routing = Routing {
            recency: 1.0,
            ..semantic_only()
        };
        for (now, rho) in [
            (1_000_000 + 86_400, 0.5),
            (1_000_000 + 3 * 86_400, 0.25),
            (999_000, 1.0),
        ] {
            let mut t = begin(config.clone(), routing, Some(now), &g);
            t.assess(GO_ON).unwrap();
            t.expand(&g).unwrap();
            t.score(&g, &[scores(0.0, 0.0)]).unwrap();
            // s = 0, so s~ = 0.1 * rho / 1.1
            let want = 0.1 * rho / 1.1;
            // f32 config values widen to f64 with ~1e-9 error.
            assert!((t.evidence()[1].score - want).abs() < 1e-7, "now {now}");
        }
        // Without `now`, or with r = 0, recency plays no part.
        let mut t = begin(config.clone(), semantic_only(), Some(1_000_000), &g);
        t.assess(GO_ON).unwrap();
        t.expand(&g).unwrap();
        t.score(&g, &[scores(0.0, 0.0)]).unwrap();
        assert_eq!(t.evidence()[1].score, 0.0);
    }

    #[test]
    fn stop_rules() {
        let g = line_graph();
        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        let enough = Assessment {
            sufficiency: 0.95,
            usefulness: 1.0,
            missing: 0.1,
            contradiction: 0.1,
        };
        assert_eq!(
            t.assess(enough).unwrap(),
            Phase::Done(StopReason::Sufficient)
        );
        assert_eq!(t.trace().rounds[0].assessment, Some(enough));
        assert_eq!(t.trace().controller_calls, 2);

        // Missing evidence at the threshold blocks "sufficient".
        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        let missing = Assessment {
            missing: 0.15,
            ..enough
        };
        assert_eq!(t.assess(missing).unwrap(), Phase::Expand);

        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        let useless = Assessment {
            usefulness: 0.1,
            ..GO_ON
        };
        assert_eq!(
            t.assess(useless).unwrap(),
            Phase::Done(StopReason::NotUseful)
        );

        // h = 0 gives depth 1: after one round the next assessment stops.
        let mut t = begin(
            TraversalConfig::default(),
            Routing {
                multi_hop: 0.0,
                ..semantic_only()
            },
            None,
            &g,
        );
        assert_eq!(t.trace().depth_limit, 1);
        t.assess(GO_ON).unwrap();
        t.expand(&g).unwrap();
        assert_eq!(t.score(&g, &[scores(1.0, 1.0)]).unwrap(), Phase::Assess);
        assert_eq!(
            t.assess(GO_ON).unwrap(),
            Phase::Done(StopReason::DepthLimit)
        );
        // The anchor's 0.9 beats the candidate's (1 + 1 + 1 + 0.5) / 5 = 0.7.
        assert_eq!(
            t.result(10).iter().map(|e| e.node).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(t.result(1).len(), 1);
    }

    #[test]
    fn phase_errors_change_nothing() {
        let g = line_graph();
        let mut t = begin(TraversalConfig::default(), semantic_only(), None, &g);
        let before = t.trace();
        assert!(matches!(t.score(&g, &[]), Err(Error::InvalidState(_))));
        assert!(matches!(t.expand(&g), Err(Error::InvalidState(_))));
        let nan = Assessment {
            sufficiency: f32::NAN,
            ..GO_ON
        };
        assert!(matches!(t.assess(nan), Err(Error::InvalidScore { .. })));
        assert_eq!(t.trace(), before);
        assert_eq!(t.phase(), Phase::Assess);
        t.assess(GO_ON).unwrap();
        assert!(matches!(t.assess(GO_ON), Err(Error::InvalidState(_))));
        t.expand(&g).unwrap();
        assert!(matches!(t.score(&g, &[]), Err(Error::InvalidInput(_))));
        assert!(matches!(
            t.score(&g, &[scores(2.0, 0.0)]),
            Err(Error::InvalidScore { .. })
        ));
        assert_eq!(t.phase(), Phase::Score);
        t.score(&g, &[scores(1.0, 1.0)]).unwrap();
        assert_eq!(t.phase(), Phase::Assess);
    }

    #[test]
    fn start_validation() {
        let g = line_graph();
        let go = |anchors: &[(NodeId, f32)], calls: u32, config: TraversalConfig| {
            Traversal::start(
                config,
                semantic_only(),
                None,
                None,
                anchors,
                calls,
                Duration::ZERO,
                &g,
            )
        };
        let d = TraversalConfig::default;
        assert!(matches!(
            go(&[(9, 0.5)], 1, d()),
            Err(Error::NodeNotFound(9))
        ));
        assert!(matches!(
            go(&[(1, 0.5), (1, 0.4)], 1, d()),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            go(&[(1, 1.5)], 1, d()),
            Err(Error::InvalidScore { .. })
        ));
        assert!(matches!(
            go(&[(1, 0.5)], 17, d()),
            Err(Error::InvalidInput(_))
        ));
        let bad = TraversalConfig {
            beam_width: 0,
            ..d()
        };
        assert!(matches!(
            go(&[(1, 0.5)], 1, bad),
            Err(Error::InvalidConfig(_))
        ));
        let bad_q = Traversal::start(
            d(),
            semantic_only(),
            Some(vec![f32::NAN]),
            None,
            &[],
            1,
            Duration::ZERO,
            &g,
        );
        assert!(matches!(bad_q, Err(Error::InvalidInput(_))));
        let bad_r = Routing {
            multi_hop: -0.5,
            ..semantic_only()
        };
        assert!(Traversal::start(d(), bad_r, None, None, &[], 1, Duration::ZERO, &g).is_err());

        assert_eq!(
            go(&[], 1, d()).unwrap().phase(),
            Phase::Done(StopReason::FrontierExhausted)
        );
        assert_eq!(
            go(&[(1, 0.5)], 16, d()).unwrap().phase(),
            Phase::Done(StopReason::ControllerCallLimit)
        );
        // Anchors beyond max_visited are dropped; the beam takes the best of the rest.
        let small = TraversalConfig {
            max_visited: 2,
            beam_width: 1,
            ..d()
        };
        let t = go(&[(3, 0.1), (2, 0.7), (1, 0.9)], 1, small).unwrap();
        assert_eq!(t.evidence().len(), 2);
        assert_eq!(t.frontier(), &[2]);
    }

    #[test]
    fn config_validation_and_serde() {
        let d = TraversalConfig::default();
        d.validate().unwrap();
        let bytes = postcard::to_stdvec(&d).unwrap();
        assert_eq!(postcard::from_bytes::<TraversalConfig>(&bytes).unwrap(), d);
        let bad = [
            TraversalConfig {
                depth_max: 0,
                ..d.clone()
            },
            TraversalConfig {
                max_edges: 0,
                ..d.clone()
            },
            TraversalConfig {
                total_budget: 3,
                ..d.clone()
            },
            TraversalConfig {
                gamma: 0.0,
                ..d.clone()
            },
            TraversalConfig {
                theta_suff: 1.5,
                ..d.clone()
            },
            TraversalConfig {
                theta_act: f32::NAN,
                ..d.clone()
            },
            TraversalConfig {
                lambdas: [0.0; 5],
                ..d.clone()
            },
            TraversalConfig {
                lambdas: [1.0, -1.0, 1.0, 1.0, 1.0],
                ..d.clone()
            },
            TraversalConfig {
                recency_weight: f32::INFINITY,
                ..d.clone()
            },
            TraversalConfig {
                max_wall: Duration::ZERO,
                ..d.clone()
            },
            TraversalConfig {
                min_admit_score: -0.1,
                ..d.clone()
            },
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(Error::InvalidConfig(_))),
                "{c:?}"
            );
        }
        assert_eq!(
            StopReason::ControllerCallLimit.name(),
            "controller_call_limit"
        );
    }

    #[test]
    fn time_limit_with_a_fake_clock() {
        let g = line_graph();
        let config = TraversalConfig {
            max_wall: Duration::from_secs(1),
            ..Default::default()
        };
        let start_at = |clock: &ManualClock, before: Duration| {
            Traversal::start_with_clock(
                config.clone(),
                semantic_only(),
                None,
                None,
                &[(1, 0.9)],
                1,
                before,
                &g,
                Box::new(clock.clone()),
            )
            .unwrap()
        };
        // Time spent before the traversal counts.
        let clock = ManualClock::new();
        assert_eq!(
            start_at(&clock, Duration::from_secs(1)).phase(),
            Phase::Done(StopReason::TimeLimit)
        );

        // Over time when the assessment arrives.
        let mut t = start_at(&clock, Duration::from_millis(400));
        clock.advance(Duration::from_millis(700));
        assert_eq!(t.assess(GO_ON).unwrap(), Phase::Done(StopReason::TimeLimit));
        // The elapsed time is frozen once done.
        clock.advance(Duration::from_secs(5));
        assert_eq!(t.trace().elapsed, Duration::from_millis(1100));

        // Over time before an expansion: it does no work.
        let clock = ManualClock::new();
        let mut t = start_at(&clock, Duration::ZERO);
        t.assess(GO_ON).unwrap();
        assert_eq!(t.remaining_time(), Duration::from_secs(1));
        clock.advance(Duration::from_secs(2));
        assert!(t.expand(&g).unwrap().is_empty());
        assert_eq!(t.phase(), Phase::Done(StopReason::TimeLimit));
        assert_eq!(t.trace().edges_examined, 0);

        // Over time after scoring: the admitted evidence is kept.
        let clock = ManualClock::new();
        let mut t = start_at(&clock, Duration::ZERO);
        t.assess(GO_ON).unwrap();
        t.expand(&g).unwrap();
        clock.advance(Duration::from_secs(2));
        assert_eq!(
            t.score(&g, &[scores(1.0, 1.0)]).unwrap(),
            Phase::Done(StopReason::TimeLimit)
        );
        assert_eq!(t.evidence().len(), 2);

        // check_time lets the driver stop before a slow controller call.
        let clock = ManualClock::new();
        let mut t = start_at(&clock, Duration::ZERO);
        assert_eq!(t.check_time(), Phase::Assess);
        clock.advance(Duration::from_secs(1));
        assert_eq!(t.check_time(), Phase::Done(StopReason::TimeLimit));
    }

    #[test]
    fn controller_call_limit() {
        let g = line_graph();
        // Routing used 1 of 2: the assessment is the last call.
        let two = TraversalConfig {
            max_controller_calls: 2,
            ..Default::default()
        };
        let mut t = begin(two, semantic_only(), None, &g);
        assert_eq!(
            t.assess(GO_ON).unwrap(),
            Phase::Done(StopReason::ControllerCallLimit)
        );
        // 1 of 3: one scoring call is left, so the round runs and keeps its evidence.
        let three = TraversalConfig {
            max_controller_calls: 3,
            ..Default::default()
        };
        let mut t = begin(three, semantic_only(), None, &g);
        assert_eq!(t.assess(GO_ON).unwrap(), Phase::Expand);
        t.expand(&g).unwrap();
        assert_eq!(
            t.score(&g, &[scores(1.0, 1.0)]).unwrap(),
            Phase::Done(StopReason::ControllerCallLimit)
        );
        assert_eq!(t.trace().controller_calls, 3);
        assert_eq!(t.evidence().len(), 2);
    }

    #[test]
    fn expansion_order_budgets_and_limits() {
        // Hub 0 with neighbours 1..=6 in two views; ties broken by neighbour id.
        let mut g = TestGraph::default();
        for id in 0..=6 {
            g.nodes.insert(id);
        }
        let mut add = |s: NodeId, d: NodeId, v: View, w: f32| {
            g.edge_list.push((s, d, v, w));
            let e = |neighbor| EdgeRef {
                neighbor,
                weight: w,
                src: s,
                dst: d,
            };
            g.adjacency.entry((s, v)).or_default().push(e(d));
            g.adjacency.entry((d, v)).or_default().push(e(s));
        };
        add(0, 3, View::Semantic, 0.5);
        add(2, 0, View::Semantic, 0.5);
        add(0, 1, View::Semantic, 0.9);
        add(0, 4, View::Entity, 1.0);
        add(5, 0, View::Entity, 0.2);
        add(0, 6, View::Entity, 0.2);
        add(0, 1, View::Entity, 0.3);
        // Entity ranks above semantic; budget 4 -> entity 2 (+ min 1 each) and semantic 2.
        let routing = Routing {
            views: [0.5, 0.0, 0.0, 0.5],
            multi_hop: 1.0,
            recency: 0.0,
        };
        let config = TraversalConfig {
            total_budget: 4,
            ..Default::default()
        };
        let run = |config: TraversalConfig, routing: Routing| {
            let mut t = Traversal::start_with_clock(
                config,
                routing,
                None,
                None,
                &[(0, 1.0)],
                1,
                Duration::ZERO,
                &g,
                Box::new(ManualClock::new()),
            )
            .unwrap();
            t.assess(GO_ON).unwrap();
            let nodes: Vec<NodeId> = t.expand(&g).unwrap().iter().map(|c| c.node).collect();
            (t, nodes)
        };
        let (t, nodes) = run(config.clone(), routing);
        assert_eq!(t.trace().budgets, [2, 0, 0, 2]);
        // Semantic (index 0) wins the tie with entity at equal p: 1, then 2 before 3; entity: 4, then 1 is visited (free), 5 before 6.
        assert_eq!(nodes, [1, 2, 4, 5]);
        assert_eq!(t.trace().spent, [2, 0, 0, 2]);
        assert_eq!(t.trace().edges_examined, 5);
        assert_eq!(t.phase(), Phase::Score);
        let mut t = t;
        assert_eq!(
            t.score(&g, &[scores(1.0, 1.0); 4]).unwrap(),
            Phase::Done(StopReason::BudgetExhausted)
        );

        // Entity first when it scores higher.
        let (_, nodes) = run(
            config.clone(),
            Routing {
                views: [0.4, 0.0, 0.0, 0.6],
                ..routing
            },
        );
        // Budgets 2/2: entity takes 4 and 1, then semantic 2 and 3 (1 is visited by now).
        assert_eq!(nodes, [4, 1, 2, 3]);

        // The edge limit cuts expansion exactly at the limit.
        let (t, nodes) = run(
            TraversalConfig {
                max_edges: 3,
                ..config.clone()
            },
            routing,
        );
        assert_eq!(nodes, [1, 2, 4]);
        assert_eq!(t.trace().edges_examined, 3);
        let mut t = t;
        assert_eq!(
            t.score(&g, &[scores(1.0, 1.0); 3]).unwrap(),
            Phase::Done(StopReason::EdgeLimit)
        );

        // The visited limit too (the anchor counts).
        let (mut t, nodes) = run(
            TraversalConfig {
                max_visited: 3,
                ..config.clone()
            },
            routing,
        );
        assert_eq!(nodes, [1, 2]);
        assert_eq!(
            t.score(&g, &[scores(1.0, 1.0); 2]).unwrap(),
            Phase::Done(StopReason::VisitedLimit)
        );
    }

    #[test]
    fn works_on_the_core_graph() {
        use crate::types::{Edge, EdgeOrigin, Node, TypeScores};
        let mut g = Graph::new();
        for id in 0..3 {
            g.push_node(Node {
                id,
                content: format!("n{id}"),
                timestamp: Some(1_000_000 + id as i64),
                provenance: vec![],
                entities: vec![],
                types: TypeScores::default(),
                scope: vec![],
                metadata: vec![],
                key: None,
            })
            .unwrap();
        }
        for (s, d) in [(0, 1), (2, 1)] {
            g.upsert_edge(&Edge {
                src: s,
                dst: d,
                view: View::Semantic,
                weight: 0.8,
                origin: EdgeOrigin::Rule,
                temporal: None,
            })
            .unwrap();
        }
        let mut t = Traversal::start(
            TraversalConfig::default(),
            semantic_only(),
            Some(vec![1.0]),
            Some(1_000_010),
            &[(1, 0.5)],
            1,
            Duration::ZERO,
            &g,
        )
        .unwrap();
        t.assess(GO_ON).unwrap();
        let cands = t.expand(&g).unwrap().to_vec();
        assert_eq!(
            cands
                .iter()
                .map(|c| (c.node, c.src, c.dst))
                .collect::<Vec<_>>(),
            [(0, 0, 1), (2, 2, 1)]
        );
        t.score(&g, &[scores(1.0, 1.0); 2]).unwrap();
        assert_eq!(t.evidence().len(), 3);
        // Nothing new is reachable.
        t.assess(GO_ON).unwrap();
        assert!(t.expand(&g).unwrap().is_empty());
        assert_eq!(t.phase(), Phase::Done(StopReason::FrontierExhausted));
    }

    /// The random cases must reach every stop reason the random inputs can
    /// produce (the time limit has its own test), or the proptests prove little.
    #[test]
    fn random_cases_cover_every_stop_reason() {
        let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut max_rounds = 0;
        for seed in 0..3000u64 {
            let (g, q, oracle, mut rng) = random_case(mix(seed));
            let mut t = start(&q, &g);
            drive(&mut t, &g, &q, oracle, false, &mut rng);
            let tr = t.trace();
            *seen.entry(tr.stop.unwrap().name()).or_default() += 1;
            max_rounds = max_rounds.max(tr.rounds.len() - 1);
        }
        eprintln!("stop reasons: {seen:?}, max rounds {max_rounds}");
        for reason in [
            StopReason::Sufficient,
            StopReason::NotUseful,
            StopReason::DepthLimit,
            StopReason::VisitedLimit,
            StopReason::EdgeLimit,
            StopReason::ControllerCallLimit,
            StopReason::BudgetExhausted,
            StopReason::FrontierExhausted,
        ] {
            assert!(
                seen.contains_key(reason.name()),
                "{} never reached",
                reason.name()
            );
        }
        assert!(max_rounds >= 4);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn invariants_hold_under_adversarial_drivers(seed in any::<u64>(), adversarial in any::<bool>()) {
            let (g, q, oracle, mut rng) = random_case(seed);
            let mut t = start(&q, &g);
            check_invariants(&t, &q);
            drive(&mut t, &g, &q, oracle, adversarial, &mut rng);
        }

        #[test]
        fn equals_the_reference(seed in any::<u64>()) {
            let (g, q, oracle, mut rng) = random_case(seed);
            let mut t = start(&q, &g);
            drive(&mut t, &g, &q, oracle, false, &mut rng);
            let got = outcome_of(&t);
            let want = reference(&g, &q, oracle);
            prop_assert_eq!(got.stop, want.stop);
            prop_assert_eq!(got.visited, want.visited);
            prop_assert_eq!(got.edges_examined, want.edges_examined);
            prop_assert_eq!(got.controller_calls, want.controller_calls);
            prop_assert_eq!(got.rounds, want.rounds);
            prop_assert_eq!(got.spent, want.spent);
            prop_assert_eq!(got.evidence.len(), want.evidence.len());
            for (a, b) in got.evidence.iter().zip(&want.evidence) {
                prop_assert_eq!(a.0, b.0);
                prop_assert_eq!(a.2, b.2);
                prop_assert!((a.1 - b.1).abs() < 1e-6);
            }
        }
    }

    /// Writes random cases and their Rust outcomes as JSON lines for
    /// `bench/check_traversal_reference.py`:
    /// `JEVMEM_TRAVERSAL_CASES=/tmp/cases.jsonl cargo test -p jevmem-core dump_cases -- --ignored`
    #[test]
    #[ignore]
    fn dump_cases_for_the_python_reference() {
        use std::fmt::Write as _;
        let path = std::env::var("JEVMEM_TRAVERSAL_CASES").expect("set JEVMEM_TRAVERSAL_CASES");
        let list = |xs: &mut dyn Iterator<Item = String>| {
            format!("[{}]", xs.collect::<Vec<_>>().join(","))
        };
        let mut out = String::new();
        for seed in 0..500u64 {
            let (g, q, oracle, mut rng) = random_case(mix(seed ^ 0xC0FFEE));
            let mut t = start(&q, &g);
            drive(&mut t, &g, &q, oracle, false, &mut rng);
            let o = outcome_of(&t);
            let c = &q.config;
            let mode = match oracle.mode {
                Mode::Ones => "ones",
                Mode::Zeros => "zeros",
                Mode::Random => "random",
                Mode::Continue => "continue",
            };
            let opt = |x: Option<i64>| x.map_or("null".to_string(), |v| v.to_string());
            write!(
                out,
                "{{\"nodes\":{},\"edges\":{},\"embeddings\":{},\"timestamps\":{},",
                list(&mut g.nodes.iter().map(|n| n.to_string())),
                list(
                    &mut g
                        .edge_list
                        .iter()
                        .map(|(s, d, v, w)| format!("[{s},{d},{},{w:?}]", v.index()))
                ),
                list(&mut g.embeddings.iter().map(|(n, e)| format!(
                    "[{n},{}]",
                    list(&mut e.iter().map(|x| format!("{x:?}")))
                ))),
                list(&mut g.timestamps.iter().map(|(n, ts)| format!("[{n},{ts}]"))),
            )
            .unwrap();
            write!(
                out,
                "\"config\":{{\"total_budget\":{},\"min_per_view\":{},\"gamma\":{:?},\"theta_act\":{:?},\"depth_max\":{},\"beam_width\":{},\"max_visited\":{},\"max_edges\":{},\"max_controller_calls\":{},\"max_wall\":{:?},\"theta_suff\":{:?},\"theta_missing\":{:?},\"theta_contradiction\":{:?},\"theta_useful\":{:?},\"lambdas\":{},\"recency_weight\":{:?},\"min_admit_score\":{:?}}},",
                c.total_budget, c.min_per_view, c.gamma, c.theta_act, c.depth_max, c.beam_width, c.max_visited,
                c.max_edges, c.max_controller_calls, c.max_wall.as_secs_f64(), c.theta_suff, c.theta_missing,
                c.theta_contradiction, c.theta_useful,
                list(&mut c.lambdas.iter().map(|x| format!("{x:?}"))), c.recency_weight, c.min_admit_score,
            )
            .unwrap();
            write!(
                out,
                "\"routing\":{{\"views\":{},\"multi_hop\":{:?},\"recency\":{:?}}},\"query\":{},\"now\":{},\"anchors\":{},\"calls_used\":{},\"mode\":\"{mode}\",\"seed\":{},",
                list(&mut q.routing.views.iter().map(|x| format!("{x:?}"))), q.routing.multi_hop, q.routing.recency,
                q.query.as_ref().map_or("null".to_string(), |v| list(&mut v.iter().map(|x| format!("{x:?}")))),
                opt(q.now),
                list(&mut q.anchors.iter().map(|(n, s)| format!("[{n},{s:?}]"))),
                q.calls_used, oracle.seed,
            )
            .unwrap();
            writeln!(
                out,
                "\"outcome\":{{\"evidence\":{},\"stop\":\"{}\",\"visited\":{},\"edges_examined\":{},\"controller_calls\":{},\"rounds\":{},\"spent\":{}}}}}",
                list(&mut o.evidence.iter().map(|(n, s, d)| format!("[{n},{s:?},{d}]"))),
                o.stop.name(), o.visited, o.edges_examined, o.controller_calls, o.rounds,
                list(&mut o.spent.iter().map(|x| x.to_string())),
            )
            .unwrap();
        }
        std::fs::write(path, out).unwrap();
    }
}
