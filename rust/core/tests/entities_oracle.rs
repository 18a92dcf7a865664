//! The Rust entity extraction against the Python original.
//!
//! `tests/support/dump_entity_oracle.py` runs the Python `jevmem.entities`
//! over the development data (and seeded random strings) and writes its
//! answers as JSON; point `JEVMEM_ENTITY_ORACLE` at that file to run this
//! check. Without the variable the test only says it skipped.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use jevmem_core::entities::{extract_entities, mentions, normalise, pystr};
use serde_json::Value;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|p| {
            let kv = strings(p);
            (kv[0].clone(), kv[1].clone())
        })
        .collect()
}

/// One BEAM turn: text, speaker, provenance.
type Turn = (String, String, Vec<(String, String)>);

struct Tally {
    compared: BTreeMap<String, usize>,
    failed: Vec<String>,
}

impl Tally {
    fn check(&mut self, kind: &str, source: &str, ok: bool, detail: impl FnOnce() -> String) {
        *self.compared.entry(format!("{kind}/{source}")).or_default() += 1;
        if !ok {
            self.failed.push(format!("{kind}/{source}: {}", detail()));
        }
    }
}

#[test]
fn entities_match_the_python_oracle() {
    let Ok(path) = std::env::var("JEVMEM_ENTITY_ORACLE") else {
        eprintln!("JEVMEM_ENTITY_ORACLE unset: skipped (see tests/support/dump_entity_oracle.py)");
        return;
    };
    let raw = std::fs::read_to_string(&path).expect("the oracle file");
    let oracle: Value = serde_json::from_str(&raw).expect("oracle JSON");
    let mut tally = Tally {
        compared: BTreeMap::new(),
        failed: Vec::new(),
    };

    for c in oracle["extract"].as_array().expect("extract cases") {
        let text = c["text"].as_str().unwrap();
        let speaker = c["speaker"].as_str();
        let prov = pairs(&c["provenance"]);
        let extra = strings(&c["extra"]);
        let want = strings(&c["expected"]);
        let got = extract_entities(text, speaker, &prov, &extra);
        tally.check("extract", c["source"].as_str().unwrap(), got == want, || {
            format!("{text:?} speaker {speaker:?} prov {prov:?} extra {extra:?}: rust {got:?} python {want:?}")
        });
    }
    for c in oracle["mentions"].as_array().expect("mentions cases") {
        let query = c["query"].as_str().unwrap();
        let known = strings(&c["known"]);
        let want = strings(&c["expected"]);
        let got = mentions(query, &known);
        tally.check(
            "mentions",
            c["source"].as_str().unwrap(),
            got == want,
            || format!("{query:?} known {known:?}: rust {got:?} python {want:?}"),
        );
    }
    for c in oracle["normalise"].as_array().expect("normalise cases") {
        let input = c["input"].as_str().unwrap();
        let want = c["expected"].as_str().unwrap();
        let got = normalise(input);
        tally.check("normalise", "random", got == want, || {
            format!("{input:?}: rust {got:?} python {want:?}")
        });
    }

    // per code point, over the characters Python's Unicode assigns
    let chars = &oracle["chars"];
    let set = |key: &str| -> HashSet<u32> {
        chars[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    let (upper, lower, unassigned) = (set("upper"), set("lower"), set("unassigned"));
    let folds: BTreeMap<u32, String> = chars["casefold"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as u32,
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for c in (0..0x11_0000u32).filter_map(char::from_u32) {
        let cp = c as u32;
        if unassigned.contains(&cp) {
            continue;
        }
        let s = c.to_string();
        let fold = folds.get(&cp).cloned().unwrap_or_else(|| s.clone());
        let got = (
            pystr::char_is_upper(c),
            pystr::char_is_lower(c),
            pystr::casefold(&s),
        );
        let want = (upper.contains(&cp), lower.contains(&cp), fold);
        tally.check("char", "all", got == want, || {
            format!("U+{cp:04X}: rust {got:?} python {want:?}")
        });
    }

    for (kind, n) in &tally.compared {
        println!("compared {n:>8} {kind}");
    }
    let total: usize = tally.compared.values().sum();
    println!("{} of {total} differ", tally.failed.len());
    for f in tally.failed.iter().take(50) {
        println!("MISMATCH {f}");
    }

    // speed, on the same BEAM turns the Python timed
    let beam: Vec<Turn> = oracle["extract"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "beam")
        .map(|c| {
            (
                c["text"].as_str().unwrap().to_string(),
                c["speaker"].as_str().unwrap_or("").to_string(),
                pairs(&c["provenance"]),
            )
        })
        .collect();
    let mut passes = Vec::new();
    let mut n_ids = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        n_ids = 0;
        for (text, speaker, prov) in &beam {
            n_ids += extract_entities(text, Some(speaker), prov, &[]).len();
        }
        passes.push(t0.elapsed().as_secs_f64());
    }
    println!(
        "rust: {} BEAM turns ({n_ids} ids) in {:.3} s best of 3 ({passes:.3?}); python: {}",
        beam.len(),
        passes.iter().cloned().fold(f64::INFINITY, f64::min),
        oracle["timing"]
    );

    assert!(tally.failed.is_empty(), "{} mismatches", tally.failed.len());
}
