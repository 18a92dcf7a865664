//! Vector index benchmark (384-d, k = 10): `cargo bench --bench vector`.
//!
//! 1. Exact scan vs HNSW latency as the index grows, to place `exact_threshold`.
//! 2. Our `VectorIndex::search` vs raw `usearch::Index::search` on identical
//!    parameters and queries (p50/p99, overhead ratio), insert throughput and
//!    memory per vector, at 10k and 100k vectors (1M with `JEVMEM_BENCH_1M=1`).
//!
//! `JEVMEM_BENCH_QUANT=f16|i8` runs part 2 on a quantized index (both sides),
//! `JEVMEM_BENCH_SIZES=10000,...` picks its sizes, `JEVMEM_BENCH_SKIP_CROSSOVER=1`
//! skips part 1.
//!
//! Data: 384-d vectors with a low intrinsic dimension (a random linear map of
//! a 24-d latent plus small noise), closer to sentence embeddings than uniform
//! noise. On uniform random 384-d data HNSW degenerates (at 100k, ef=128 finds
//! only a fraction of the true top-10) and the exact scan wins up to >16k;
//! set `JEVMEM_BENCH_UNIFORM=1` to measure that worst case.

use std::time::{Duration, Instant};

use jevmem_core::vector::{Quantization, VectorConfig, VectorIndex};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

const DIM: usize = 384;
const K: usize = 10;

/// splitmix64: deterministic, dependency-free data.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

const LATENT: usize = 24;

/// Embedding-like generator: `x = A z + 0.05 e`, z uniform in [-1,1)^24.
struct Data {
    rng: Rng,
    map: Vec<f32>, // DIM x LATENT
    uniform: bool,
}

impl Data {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let map = (0..DIM * LATENT).map(|_| rng.uniform()).collect();
        let uniform = std::env::var_os("JEVMEM_BENCH_UNIFORM").is_some();
        Self { rng, map, uniform }
    }
    fn vector(&mut self) -> Vec<f32> {
        if self.uniform {
            return (0..DIM).map(|_| self.rng.uniform()).collect();
        }
        let z: Vec<f32> = (0..LATENT).map(|_| self.rng.uniform()).collect();
        (0..DIM)
            .map(|i| {
                let row = &self.map[i * LATENT..(i + 1) * LATENT];
                row.iter().zip(&z).map(|(a, b)| a * b).sum::<f32>() + 0.05 * self.rng.uniform()
            })
            .collect()
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// (p50, p99, mean) in microseconds.
fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| micros(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    let mean = micros(samples.iter().sum::<Duration>()) / samples.len() as f64;
    (at(0.5), at(0.99), mean)
}

fn crossover() {
    println!("== 1. exact scan vs HNSW (384-d, k={K}, F32, M=16, ef_add=128, ef_search=128) ==");
    println!(
        "{:>7} {:>12} {:>12} {:>12} {:>12} {:>7} {:>7}",
        "N", "exact p50", "exact mean", "hnsw p50", "hnsw mean", "faster", "recall"
    );
    let mut rng = Data::new(1);
    let mut index = VectorIndex::new(VectorConfig::new(DIM)).unwrap();
    let queries: Vec<Vec<f32>> = (0..300).map(|_| rng.vector()).collect();
    for n in [256usize, 512, 1024, 2048, 4096, 8192, 16384] {
        while index.len() < n {
            index.add(index.len() as u64, &rng.vector()).unwrap();
        }
        let mut exact = Vec::new();
        let mut hnsw = Vec::new();
        let mut hits = 0usize;
        for q in &queries {
            index.set_exact_threshold(usize::MAX).unwrap();
            let truth = index.search(q, K, None).unwrap();
            index.set_exact_threshold(0).unwrap();
            let got = index.search(q, K, None).unwrap();
            hits += got
                .iter()
                .filter(|x| truth.iter().any(|t| t.0 == x.0))
                .count();
        }
        let recall = hits as f64 / (queries.len() * K) as f64;
        for _round in 0..3 {
            index.set_exact_threshold(usize::MAX).unwrap();
            for q in &queries {
                let t = Instant::now();
                std::hint::black_box(index.search(q, K, None).unwrap());
                exact.push(t.elapsed());
            }
            index.set_exact_threshold(0).unwrap();
            for q in &queries {
                let t = Instant::now();
                std::hint::black_box(index.search(q, K, None).unwrap());
                hnsw.push(t.elapsed());
            }
        }
        let (ep50, _, emean) = stats(exact);
        let (hp50, _, hmean) = stats(hnsw);
        let faster = if emean < hmean { "exact" } else { "hnsw" };
        println!(
            "{n:>7} {ep50:>10.1}us {emean:>10.1}us {hp50:>10.1}us {hmean:>10.1}us {faster:>7} {recall:>7.3}"
        );
    }
}

/// Part 2's quantization, from `JEVMEM_BENCH_QUANT` (default f32).
fn quantization() -> (Quantization, ScalarKind, &'static str) {
    match std::env::var("JEVMEM_BENCH_QUANT").as_deref() {
        Ok("f16") => (Quantization::F16, ScalarKind::F16, "F16"),
        Ok("i8") => (Quantization::I8, ScalarKind::I8, "I8"),
        _ => (Quantization::F32, ScalarKind::F32, "F32"),
    }
}

fn ours_vs_raw(n: usize) {
    let (quantization, scalar, name) = quantization();
    println!("\n== 2. N = {n}: ours vs raw usearch (384-d, k={K}, {name}, M=16, ef_add=128, ef_search=128) ==");
    let cfg = VectorConfig {
        quantization,
        ..VectorConfig::new(DIM)
    };
    let mut rng = Data::new(n as u64);
    let data: Vec<Vec<f32>> = (0..n).map(|_| rng.vector()).collect();
    let queries: Vec<Vec<f32>> = (0..1000).map(|_| rng.vector()).collect();

    let mut ours = VectorIndex::new(cfg).unwrap();
    let t = Instant::now();
    for (id, v) in data.iter().enumerate() {
        ours.add(id as u64, v).unwrap();
    }
    let ours_insert = t.elapsed();

    let raw = Index::new(&IndexOptions {
        dimensions: DIM,
        metric: MetricKind::Cos,
        quantization: scalar,
        connectivity: cfg.connectivity,
        expansion_add: cfg.expansion_add,
        expansion_search: cfg.expansion_search.at(n),
        multi: false,
    })
    .unwrap();
    let t = Instant::now();
    raw.reserve(n).unwrap(); // raw gets the ideal single up-front reservation
    for (id, v) in data.iter().enumerate() {
        raw.add(id as u64, v).unwrap();
    }
    let raw_insert = t.elapsed();
    drop(data);

    // Interleave per query so both see the same cache and clock conditions.
    let mut ours_t = Vec::new();
    let mut raw_t = Vec::new();
    let mut agree = 0usize;
    for _round in 0..2 {
        for q in &queries {
            let t = Instant::now();
            let a = std::hint::black_box(ours.search(q, K, None).unwrap());
            ours_t.push(t.elapsed());
            let t = Instant::now();
            let b = std::hint::black_box(raw.search(q, K).unwrap());
            raw_t.push(t.elapsed());
            agree += a.iter().filter(|(id, _)| b.keys.contains(id)).count();
        }
    }
    let (op50, op99, omean) = stats(ours_t);
    let (rp50, rp99, rmean) = stats(raw_t);
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>14} {:>10}",
        "", "p50", "p99", "mean", "insert/s", "bytes/vec"
    );
    println!(
        "{:>6} {op50:>8.1}us {op99:>8.1}us {omean:>8.1}us {:>14.0} {:>10.0}",
        "ours",
        n as f64 / ours_insert.as_secs_f64(),
        ours.memory_bytes() as f64 / n as f64
    );
    println!(
        "{:>6} {rp50:>8.1}us {rp99:>8.1}us {rmean:>8.1}us {:>14.0} {:>10.0}",
        "raw",
        n as f64 / raw_insert.as_secs_f64(),
        raw.memory_usage() as f64 / n as f64
    );
    println!(
        " ratio p50 {:.3}x  p99 {:.3}x  mean {:.3}x   (same top-{K} ids: {:.1}%)",
        op50 / rp50,
        op99 / rp99,
        omean / rmean,
        100.0 * agree as f64 / (2 * queries.len() * K) as f64
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a test run (`cargo test --benches`) does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    if std::env::var_os("JEVMEM_BENCH_SKIP_CROSSOVER").is_none() {
        crossover();
    }
    let mut sizes: Vec<usize> = match std::env::var("JEVMEM_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("JEVMEM_BENCH_SIZES: comma-separated sizes")
            })
            .collect(),
        Err(_) => vec![10_000, 100_000],
    };
    if std::env::var_os("JEVMEM_BENCH_1M").is_some() {
        sizes.push(1_000_000);
    }
    for n in sizes {
        ours_vs_raw(n);
    }
}
