//! BM25 micro-benchmark on a synthetic Zipf corpus.
//!
//! `cargo bench --bench bm25` (optionally `-- 10000 100000` to pick sizes).
//! Prints index build throughput and p50/p99 latency of 3-5 term top-10
//! queries for three query mixes: terms drawn from the corpus distribution
//! (heavy: the head terms have huge posting lists), "content" terms drawn
//! from outside the 100 most frequent words, and a worst case of only the 30
//! most frequent words (nothing to prune).
//!
//! `cargo bench --bench bm25 -- --texts T --queries Q 100000 1000000` runs
//! on real text instead: the lines of `T` (one document each, repeated until
//! the size is reached) and the questions of `Q`, top 10 and top 100 (the
//! query plan's depth), each query's best of 5 runs.
//! `python bench/dev_texts.py OUT` writes both from the development sets.

use std::time::{Duration, Instant};

use jevmem_core::bm25::{Bm25Index, Bm25Params};
use jevmem_core::text::Tokenizer;

const VOCAB: usize = 100_000;
const ZIPF_S: f64 = 1.0;
const QUERIES: usize = 1000;
const K: usize = 10;

/// splitmix64: small, deterministic, good enough for synthetic data.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Zipf sampler over ranks 0..n via the cumulative distribution.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn run(n_docs: usize, words: &[String], zipf: &Zipf) {
    let mut rng = Rng(0x5EED ^ n_docs as u64);
    let mut ix = Bm25Index::new(Bm25Params::default()).unwrap();
    let mut build = Duration::ZERO;
    let mut tokens_total = 0usize;
    let mut doc: Vec<String> = Vec::with_capacity(32);
    for d in 0..n_docs {
        doc.clear();
        let len = 12 + rng.below(17); // 12..=28, mean 20
        doc.extend((0..len).map(|_| words[zipf.sample(&mut rng)].clone()));
        tokens_total += len;
        let t = Instant::now();
        ix.add(d as u64, &doc);
        build += t.elapsed();
    }
    let secs = build.as_secs_f64();
    println!(
        "n={n_docs:>8}: build {:.2}s, {:.0} docs/s, {:.1} M tokens/s, vocab {}, ~{:.0} MiB",
        secs,
        n_docs as f64 / secs,
        tokens_total as f64 / secs / 1e6,
        ix.vocabulary_len(),
        ix.memory_bytes() as f64 / (1 << 20) as f64
    );

    for (mix, min_rank, max_rank) in [
        ("corpus-zipf", 0usize, VOCAB),
        ("content", 100, VOCAB),
        ("head-only", 0, 30),
    ] {
        let queries: Vec<Vec<String>> = (0..QUERIES + 50)
            .map(|_| {
                let n = 3 + rng.below(3);
                (0..n)
                    .map(|_| loop {
                        let r = zipf.sample(&mut rng);
                        if (min_rank..max_rank).contains(&r) {
                            break words[r].clone();
                        }
                    })
                    .collect()
            })
            .collect();
        let mut lat = Vec::with_capacity(QUERIES);
        let mut hits = 0usize;
        for (i, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let r = ix.search(q, K, None);
            let e = t.elapsed();
            hits += r.len();
            if i >= 50 {
                lat.push(e); // first 50 are warm-up
            }
        }
        lat.sort();
        let mean = lat.iter().sum::<Duration>() / lat.len() as u32;
        println!(
            "  {mix:<11} queries: p50 {:>9.1?}  p99 {:>9.1?}  mean {:>9.1?}  ({} hits)",
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            mean,
            hits
        );
    }
}

/// Tokenizer throughput on short conversational English.
fn bench_tokenizer() {
    let lines = [
        "When did Caroline go to the LGBTQ support group? She went on 7 May 2023.",
        "Melanie's kids loved the camping trip; they roasted marshmallows by the lake.",
        "I've been painting sunsets lately – it's relaxing after a long week at work!",
        "What books has Caroline recommended? \"Becoming Nicole\" and a few others.",
    ];
    let tok = Tokenizer::default();
    let mut bytes = 0usize;
    let mut n_tokens = 0usize;
    let t = Instant::now();
    for i in 0..200_000 {
        let line = lines[i % lines.len()];
        bytes += line.len();
        n_tokens += tok.tokenize(line).len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "tokenizer (stem + stopwords): {:.0} texts/s, {:.1} MB/s, {:.1} M tokens/s",
        200_000.0 / secs,
        bytes as f64 / secs / 1e6,
        n_tokens as f64 / secs / 1e6
    );
}

/// Real text: `texts` repeated up to `n_docs` documents, searched with
/// `queries`. Each repetition is an exact copy, so a term's postings are
/// `n_docs / texts.len()` times as long as in the texts: a hard case for
/// pruning (every top-k score ties with its copies').
fn run_texts(n_docs: usize, texts: &[Vec<String>], queries: &[Vec<String>]) {
    let mut ix = Bm25Index::new(Bm25Params::default()).unwrap();
    let t = Instant::now();
    for d in 0..n_docs {
        ix.add(d as u64, &texts[d % texts.len()]);
    }
    println!(
        "n={n_docs:>8} (texts x{:.0}): build {:.2}s, vocab {}",
        n_docs as f64 / texts.len() as f64,
        t.elapsed().as_secs_f64(),
        ix.vocabulary_len()
    );
    for k in [K, 100] {
        let mut best = vec![Duration::MAX; queries.len()];
        for _ in 0..5 {
            for (q, b) in queries.iter().zip(&mut best) {
                let t = Instant::now();
                std::hint::black_box(ix.search(q, k, None));
                *b = (*b).min(t.elapsed());
            }
        }
        best.sort();
        let mean = best.iter().sum::<Duration>() / best.len() as u32;
        println!(
            "  top {k:<3} ({} queries, best of 5): p50 {:>9.1?}  p90 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}  mean {:>9.1?}",
            best.len(),
            percentile(&best, 0.5),
            percentile(&best, 0.9),
            percentile(&best, 0.99),
            best[best.len() - 1],
            mean
        );
    }
}

fn read_lines(path: &str) -> Vec<Vec<String>> {
    let tok = Tokenizer::default();
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|l| tok.tokenize(l))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if let (Some(texts), Some(queries)) = (flag("--texts"), flag("--queries")) {
        let (texts, queries) = (read_lines(&texts), read_lines(&queries));
        for n in if sizes.is_empty() {
            vec![100_000, 1_000_000]
        } else {
            sizes
        } {
            run_texts(n, &texts, &queries);
        }
        return;
    }
    bench_tokenizer();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000, 1_000_000]
    } else {
        sizes
    };
    let words: Vec<String> = (0..VOCAB).map(|i| format!("w{i}")).collect();
    let zipf = Zipf::new(VOCAB, ZIPF_S);
    for n in sizes {
        run(n, &words, &zipf);
    }
}
