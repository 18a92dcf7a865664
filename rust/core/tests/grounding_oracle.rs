//! Differential check of `grounding::ground` against the Python reference.
//!
//! `tests/support/dump_grounding_oracle.py` writes the Python results for the
//! development texts and synthetic strings to a JSON file; set
//! `JEVMEM_GROUNDING_ORACLE` to that file to run this test (it is skipped
//! otherwise, since the file is large and built from local data sets).

use std::time::Instant;

use jevmem_core::grounding::{ground, GroundedRef};
use serde_json::Value;

type Row = (usize, usize, i64, i64, String, bool, String);

fn row(r: &GroundedRef) -> Row {
    (
        r.span.0,
        r.span.1,
        r.start,
        r.end,
        r.precision.to_string(),
        r.relative,
        r.anchor_precision.to_string(),
    )
}

fn expected(refs: &Value) -> Vec<Row> {
    refs.as_array()
        .expect("refs is a list")
        .iter()
        .map(|r| {
            let r = r.as_array().expect("a ref is a list");
            (
                r[0].as_u64().unwrap() as usize,
                r[1].as_u64().unwrap() as usize,
                r[2].as_i64().unwrap(),
                r[3].as_i64().unwrap(),
                r[4].as_str().unwrap().to_string(),
                r[5].as_bool().unwrap(),
                r[6].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn matches_the_python_reference() {
    let Ok(path) = std::env::var("JEVMEM_GROUNDING_ORACLE") else {
        eprintln!("JEVMEM_GROUNDING_ORACLE is not set: skipping the grounding oracle");
        return;
    };
    let raw = std::fs::read_to_string(&path).expect("the oracle file is readable");
    let oracle: Value = serde_json::from_str(&raw).expect("the oracle file is JSON");
    let cases = oracle["cases"].as_array().expect("cases is a list");
    let mut mismatches = Vec::new();
    let mut n_refs = 0;
    for (i, case) in cases.iter().enumerate() {
        let text = case["text"].as_str().unwrap();
        let observed_at = case["observed_at"].as_i64().unwrap();
        let got = ground(text, observed_at);
        if case.get("error").is_some() {
            if got.is_ok() {
                mismatches.push(format!("case {i}: expected an error at {observed_at}"));
            }
            continue;
        }
        let want = expected(&case["refs"]);
        n_refs += want.len();
        let got = match got {
            Ok(refs) => refs,
            Err(e) => {
                mismatches.push(format!("case {i}: unexpected error {e}"));
                continue;
            }
        };
        let chars: Vec<char> = text.chars().collect();
        for r in &got {
            assert_eq!(r.text, chars[r.span.0..r.span.1].iter().collect::<String>());
        }
        let got: Vec<Row> = got.iter().map(row).collect();
        if got != want {
            mismatches.push(format!(
                "case {i} at {observed_at}: {text:?}\n  python: {want:?}\n  rust:   {got:?}"
            ));
        }
    }
    eprintln!(
        "grounding oracle: {} cases, {n_refs} references, {} mismatches",
        cases.len(),
        mismatches.len()
    );
    for m in mismatches.iter().take(40) {
        eprintln!("{m}");
    }

    // The timing the dump script measured for Python, and the same texts here.
    let timing = &oracle["timing"];
    if let Some(py_s) = timing["beam_turns_s"].as_f64() {
        let n = timing["beam_turns"].as_u64().unwrap_or(0) as usize;
        // The dump flags the BEAM turns grounded at their own timestamps.
        let beam: Vec<(&str, i64)> = cases
            .iter()
            .filter(|c| c.get("beam_turn").is_some())
            .map(|c| {
                (
                    c["text"].as_str().unwrap(),
                    c["observed_at"].as_i64().unwrap(),
                )
            })
            .collect();
        if beam.len() == n && n > 0 {
            let t0 = Instant::now();
            let mut total = 0;
            for (text, ts) in &beam {
                total += ground(text, *ts).map_or(0, |r| r.len());
            }
            let rust_s = t0.elapsed().as_secs_f64();
            eprintln!(
                "BEAM turns: {n} texts, {} chars; python {py_s:.3} s, rust {rust_s:.3} s ({total} refs)",
                timing["beam_chars"]
            );
        }
    }
    assert!(mismatches.is_empty(), "{} mismatches", mismatches.len());
}
