//! Reciprocal rank fusion of ranked id lists (anchor selection).
//!
//! s(v) = sum over the lists that contain v of 1 / (kappa + rank), rank from 1.
//! Only ranks matter, so lists from incomparable scorers (cosine, BM25) fuse
//! without calibration.

use crate::error::{Error, Result};
use crate::hashing::{ShortKeyMap, ShortKeySet};
use crate::types::NodeId;

/// The paper's kappa.
pub const DEFAULT_KAPPA: f64 = 60.0;

/// Fuse ranked lists. A duplicate id inside one list counts only at its first
/// position; later positions keep their rank numbers (ranks are positions in
/// the list as given). Sorted by score desc, ties by smaller id, so the output
/// is deterministic whatever hash order is used inside.
pub fn rrf(lists: &[&[NodeId]], kappa: f64) -> Result<Vec<(NodeId, f64)>> {
    if !(kappa.is_finite() && kappa > 0.0) {
        return Err(Error::config(format!(
            "rrf kappa must be finite and > 0, got {kappa}"
        )));
    }
    // each id's sum is taken in list order, whatever the map's order
    // sized for every id once: the maps never grow (rehash) on the way
    let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let mut scores: ShortKeyMap<NodeId, f64> =
        ShortKeyMap::with_capacity_and_hasher(total, Default::default());
    let mut seen: ShortKeySet<NodeId> =
        ShortKeySet::with_capacity_and_hasher(longest, Default::default());
    for list in lists {
        seen.clear();
        for (pos, &id) in list.iter().enumerate() {
            if seen.insert(id) {
                *scores.entry(id).or_insert(0.0) += 1.0 / (kappa + (pos + 1) as f64);
            }
        }
    }
    let mut fused: Vec<(NodeId, f64)> = scores.into_iter().collect();
    fused.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(fused)
}

/// The best `k` of [`rrf`].
pub fn rrf_top(lists: &[&[NodeId]], kappa: f64, k: usize) -> Result<Vec<(NodeId, f64)>> {
    let mut fused = rrf(lists, kappa)?;
    fused.truncate(k);
    Ok(fused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn two_lists_fuse_by_rank() {
        let a: &[NodeId] = &[1, 2, 3];
        let b: &[NodeId] = &[3, 1];
        let out = rrf(&[a, b], 60.0).unwrap();
        let s = |r: f64| 1.0 / (60.0 + r);
        assert_eq!(out[0].0, 1);
        assert!((out[0].1 - (s(1.0) + s(2.0))).abs() < 1e-15);
        assert_eq!(out[1].0, 3);
        assert!((out[1].1 - (s(3.0) + s(1.0))).abs() < 1e-15);
        assert_eq!(out[2], (2, s(2.0)));
    }

    #[test]
    fn duplicates_count_once_at_first_position_and_ties_by_id() {
        let a: &[NodeId] = &[5, 5, 7];
        let out = rrf(&[a], 1.0).unwrap();
        assert_eq!(out, vec![(5, 0.5), (7, 0.25)]);
        // Same rank in two lists: equal score, smaller id first.
        let x: &[NodeId] = &[9];
        let y: &[NodeId] = &[4];
        assert_eq!(rrf(&[x, y], 60.0).unwrap()[0].0, 4);
    }

    #[test]
    fn bad_kappa_and_top_k() {
        let a: &[NodeId] = &[1, 2, 3];
        for k in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(rrf(&[a], k), Err(Error::InvalidConfig(_))));
        }
        assert_eq!(rrf_top(&[a], 60.0, 2).unwrap().len(), 2);
        assert!(rrf(&[], 60.0).unwrap().is_empty());
    }

    /// Quadratic, obviously-correct version.
    fn naive(lists: &[Vec<NodeId>], kappa: f64) -> Vec<(NodeId, f64)> {
        let mut ids: Vec<NodeId> = lists.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut out: Vec<(NodeId, f64)> = ids
            .into_iter()
            .map(|id| {
                let mut s = 0.0;
                for l in lists {
                    if let Some(p) = l.iter().position(|&x| x == id) {
                        s += 1.0 / (kappa + (p + 1) as f64);
                    }
                }
                (id, s)
            })
            .collect();
        out.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        out
    }

    proptest! {
        #[test]
        fn matches_naive(
            lists in prop::collection::vec(prop::collection::vec(0u64..30, 0..20), 0..5),
            kappa in 0.5f64..100.0,
            k in 0usize..40,
        ) {
            let refs: Vec<&[NodeId]> = lists.iter().map(|l| l.as_slice()).collect();
            let got = rrf(&refs, kappa).unwrap();
            let want = naive(&lists, kappa);
            prop_assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                prop_assert_eq!(g.0, w.0);
                prop_assert!((g.1 - w.1).abs() < 1e-12);
            }
            let top = rrf_top(&refs, kappa, k).unwrap();
            prop_assert_eq!(top.len(), want.len().min(k));
        }
    }
}
