//! Micro-benchmark of one traversal round (expand + score, no controller) on
//! a synthetic memory: N nodes, ~8 incident edges per node per view, 384-d
//! unit embeddings, timestamps, beam 10, B = 80.
//!
//! Run: `cargo bench -p jevmem-core --bench traversal [-- N]` (default N = 50000).

use std::time::{Duration, Instant};

use jevmem_core::traversal::{
    Assessment, CandidateScores, EdgeRef, GraphAccess, Phase, Routing, Traversal, TraversalConfig,
};
use jevmem_core::{NodeId, Timestamp, View};

const DIM: usize = 384;
/// Out-edges per node per view; with the incoming ones, ~8 incident edges.
const OUT_DEGREE: usize = 4;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Compressed adjacency per view (both directions), embeddings in one flat array.
struct SynthGraph {
    n: usize,
    offsets: [Vec<usize>; 4],
    adjacency: [Vec<EdgeRef>; 4],
    embeddings: Vec<f32>,
    timestamps: Vec<Timestamp>,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent accumulators let the compiler vectorise the loop.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn unit_vector(rng: &mut Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| rng.unit() * 2.0 - 1.0).collect();
    let norm = dot(&v, &v).sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

impl SynthGraph {
    fn new(n: usize, rng: &mut Rng) -> SynthGraph {
        let mut offsets: [Vec<usize>; 4] = Default::default();
        let mut adjacency: [Vec<EdgeRef>; 4] = Default::default();
        for v in 0..4 {
            let mut lists: Vec<Vec<EdgeRef>> = vec![Vec::new(); n];
            for src in 0..n {
                for _ in 0..OUT_DEGREE {
                    let dst = (rng.next() % n as u64) as usize;
                    if dst == src {
                        continue;
                    }
                    let weight = rng.unit();
                    let (s, d) = (src as NodeId, dst as NodeId);
                    lists[src].push(EdgeRef {
                        neighbor: d,
                        weight,
                        src: s,
                        dst: d,
                    });
                    lists[dst].push(EdgeRef {
                        neighbor: s,
                        weight,
                        src: s,
                        dst: d,
                    });
                }
            }
            offsets[v].push(0);
            for list in lists {
                adjacency[v].extend(list);
                offsets[v].push(adjacency[v].len());
            }
        }
        let mut embeddings = Vec::with_capacity(n * DIM);
        for _ in 0..n {
            embeddings.extend(unit_vector(rng));
        }
        let timestamps = (0..n)
            .map(|_| 1_700_000_000 + (rng.next() % (365 * 86_400)) as i64)
            .collect();
        SynthGraph {
            n,
            offsets,
            adjacency,
            embeddings,
            timestamps,
        }
    }
}

impl GraphAccess for SynthGraph {
    fn contains(&self, node: NodeId) -> bool {
        (node as usize) < self.n
    }
    fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>) {
        let v = view.index();
        let i = node as usize;
        out.extend_from_slice(&self.adjacency[v][self.offsets[v][i]..self.offsets[v][i + 1]]);
    }
    fn similarity(&self, unit_query: &[f32], node: NodeId) -> Option<f32> {
        let i = node as usize;
        Some(dot(unit_query, &self.embeddings[i * DIM..(i + 1) * DIM]))
    }
    fn timestamp(&self, node: NodeId) -> Option<Timestamp> {
        self.timestamps.get(node as usize).copied()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50_000);
    let mut rng = Rng(42);
    let t0 = Instant::now();
    let graph = SynthGraph::new(n, &mut rng);
    eprintln!("built graph: {n} nodes in {:.1?}", t0.elapsed());

    let config = TraversalConfig::default();
    let routing = Routing {
        views: [0.9, 0.5, 0.3, 0.7],
        multi_hop: 1.0,
        recency: 0.5,
    };
    let go_on = Assessment {
        sufficiency: 0.0,
        usefulness: 1.0,
        missing: 1.0,
        contradiction: 0.0,
    };
    let all_scores = vec![
        CandidateScores {
            relevance: 0.8,
            relation_usefulness: 0.6,
            novelty: 0.5,
            support: 0.4,
        };
        1024
    ];
    for with_query in [true, false] {
        measure(
            &graph,
            &config,
            routing,
            go_on,
            &all_scores,
            with_query,
            &mut rng,
        );
    }
}

fn measure(
    graph: &SynthGraph,
    config: &TraversalConfig,
    routing: Routing,
    go_on: Assessment,
    all_scores: &[CandidateScores],
    with_query: bool,
    rng: &mut Rng,
) {
    let n = graph.n;
    let iterations = 20_000;
    let mut rounds = Vec::with_capacity(iterations);
    let mut starts = Vec::with_capacity(iterations);
    let mut candidates = 0usize;
    for _ in 0..iterations {
        let query = unit_vector(rng);
        let anchors: Vec<(NodeId, f32)> = {
            let mut a: Vec<(NodeId, f32)> = Vec::new();
            while a.len() < 10 {
                let id = rng.next() % n as u64;
                if a.iter().all(|x| x.0 != id) {
                    a.push((id, rng.unit()));
                }
            }
            a
        };
        let s0 = Instant::now();
        let mut t = Traversal::start(
            config.clone(),
            routing,
            with_query.then_some(query),
            Some(1_731_536_000),
            &anchors,
            1,
            Duration::ZERO,
            graph,
        )
        .expect("valid start");
        t.assess(go_on).expect("assess");
        starts.push(s0.elapsed());

        let r0 = Instant::now();
        let found = t.expand(graph).expect("expand").len();
        let phase = t.score(graph, &all_scores[..found]).expect("score");
        rounds.push(r0.elapsed());
        candidates += found;
        assert!(matches!(phase, Phase::Assess | Phase::Done(_)));
    }
    rounds.sort_unstable();
    starts.sort_unstable();
    println!(
        "traversal round (expand + score), query embedding {with_query}, N = {n}, dim {DIM}, ~{} edges/node/view, beam {}, B = {}: \
         p50 {:.1?}  p99 {:.1?}  max {:.1?}  (avg {:.1} candidates/round, {iterations} rounds)",
        2 * OUT_DEGREE,
        config.beam_width,
        config.total_budget,
        percentile(&rounds, 0.5),
        percentile(&rounds, 0.99),
        rounds[rounds.len() - 1],
        candidates as f64 / iterations as f64,
    );
    println!(
        "start + first assess: p50 {:.1?}  p99 {:.1?}",
        percentile(&starts, 0.5),
        percentile(&starts, 0.99),
    );
}
