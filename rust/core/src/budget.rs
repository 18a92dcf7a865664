//! Expansion budgets: largest-remainder apportionment of B over the active
//! views, view activation, and the query's depth limit.
//!
//! The apportionment runs in exact integer arithmetic (weights are turned
//! into 41-bit fixed point first), so the budgets always sum to the total and
//! equal fractional parts tie-break the same way on every platform.

use serde::{Deserialize, Serialize};

use crate::error::{check_unit, Error, Result};
use crate::types::View;

/// Bits of the largest weight kept by the fixed-point conversion. Integer
/// weights below 2^41 and f32 probabilities are represented exactly.
const WEIGHT_BITS: i32 = 41;

/// Split a finite, non-negative f64 into (mantissa, exponent) with x = m * 2^e exactly.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0 {
        (frac, -1074) // subnormal (or zero)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    }
}

/// Exact fixed-point weights: every weight times the same power of two, the
/// largest landing in [2^40, 2^41), truncated towards zero. Scaling by a power
/// of two keeps proportions exact; only bits more than 41 below the largest
/// weight are dropped.
fn fixed_point(weights: &[f64]) -> Vec<u64> {
    let parts: Vec<(u64, i32)> = weights.iter().map(|&w| decompose(w)).collect();
    // Position of the top set bit of the largest weight.
    let top = parts
        .iter()
        .filter(|p| p.0 != 0)
        .map(|&(m, e)| 63 - m.leading_zeros() as i32 + e)
        .max()
        .expect("caller checked that some weight is positive");
    let shift_base = WEIGHT_BITS - 1 - top;
    parts
        .iter()
        .map(|&(m, e)| {
            let shift = e + shift_base;
            if m == 0 {
                0
            } else if shift >= 0 {
                // The largest weight ends below 2^41, so this cannot overflow.
                m << shift
            } else if shift > -64 {
                m >> (-shift)
            } else {
                0
            }
        })
        .collect()
}

/// Largest-remainder apportionment: every entry gets `minimum`, the rest
/// R = total - minimum * n is split by the normalised weights, floor(R * w_i)
/// each, and the leftover units go one each to the largest fractional parts
/// (ties to the smaller index). The result sums to exactly `total`.
pub fn largest_remainder(weights: &[f64], total: u32, minimum: u32) -> Result<Vec<u32>> {
    if weights.is_empty() {
        return Err(Error::invalid(
            "largest_remainder needs at least one weight",
        ));
    }
    if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(Error::invalid(format!(
            "weights must be finite and >= 0, got {w}"
        )));
    }
    if weights.iter().all(|&w| w == 0.0) {
        return Err(Error::invalid("weights are all zero"));
    }
    let n = weights.len() as u64;
    let floor_total = u64::from(minimum) * n;
    if u64::from(total) < floor_total {
        return Err(Error::config(format!(
            "total {total} is below minimum {minimum} times {n} entries"
        )));
    }
    let rest = u128::from(u64::from(total) - floor_total);
    let q = fixed_point(weights);
    let q_sum: u128 = q.iter().map(|&x| u128::from(x)).sum();
    let mut out = Vec::with_capacity(q.len());
    let mut remainders = Vec::with_capacity(q.len());
    let mut given: u128 = 0;
    for &qi in &q {
        let num = rest * u128::from(qi);
        let share = num / q_sum;
        given += share;
        out.push(minimum + share as u32);
        remainders.push(num % q_sum);
    }
    // Exact arithmetic: sum of floors <= rest, and fewer than n units are left.
    let leftover = (rest - given) as usize;
    let mut order: Vec<usize> = (0..q.len()).collect();
    order.sort_by(|&a, &b| remainders[b].cmp(&remainders[a]).then(a.cmp(&b)));
    for &i in order.iter().take(leftover) {
        out[i] += 1;
    }
    Ok(out)
}

/// Which views a query activates and how much expansion budget each gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewBudgets {
    /// Indexed by [`View::index`].
    pub active: [bool; View::COUNT],
    /// Inactive views get 0; active ones sum to the total budget.
    pub budgets: [u32; View::COUNT],
    /// No view reached theta_act; the single best one was activated anyway.
    pub fallback: bool,
}

/// Activate views with p >= theta_act (or, when none does, the single
/// highest-scoring view, ties to the lower index, so that expansion stays
/// possible) and apportion `total` over them with weights p^gamma.
/// If every active weight is zero (all-zero routing), they share equally.
pub fn view_budgets(
    probs: [f32; View::COUNT],
    theta_act: f32,
    total: u32,
    minimum: u32,
    gamma: f32,
) -> Result<ViewBudgets> {
    for (view, &p) in View::ALL.iter().zip(&probs) {
        check_unit(
            format_args!("routing probability of view {}", view.name()),
            p,
        )?;
    }
    if !(theta_act.is_finite() && (0.0..=1.0).contains(&theta_act)) {
        return Err(Error::config(format!(
            "theta_act must be in [0, 1], got {theta_act}"
        )));
    }
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(Error::config(format!(
            "gamma must be finite and > 0, got {gamma}"
        )));
    }
    let mut active = probs.map(|p| p >= theta_act);
    let fallback = !active.iter().any(|&a| a);
    if fallback {
        let mut best = 0;
        for i in 1..View::COUNT {
            if probs[i] > probs[best] {
                best = i;
            }
        }
        active[best] = true;
    }
    let idx: Vec<usize> = (0..View::COUNT).filter(|&i| active[i]).collect();
    let mut weights: Vec<f64> = idx
        .iter()
        .map(|&i| f64::from(probs[i]).powf(f64::from(gamma)))
        .collect();
    if weights.iter().all(|&w| w == 0.0) {
        weights.iter_mut().for_each(|w| *w = 1.0);
    }
    let shares = largest_remainder(&weights, total, minimum)?;
    let mut budgets = [0u32; View::COUNT];
    for (&i, &b) in idx.iter().zip(&shares) {
        budgets[i] = b;
    }
    Ok(ViewBudgets {
        active,
        budgets,
        fallback,
    })
}

/// D(q) = min(D_max, max(1, ceil(D_max * h))), computed in f64 from the f32 h.
/// A NaN h counts as 0 (depth 1); callers validate h beforehand anyway.
pub fn depth_limit(multi_hop: f32, depth_max: u32) -> u32 {
    let raw = (f64::from(depth_max) * f64::from(multi_hop)).ceil();
    let at_least_one = if raw >= 1.0 {
        raw.min(f64::from(u32::MAX)) as u32
    } else {
        1
    };
    at_least_one.min(depth_max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paper_example_sums_to_budget() {
        let vb = view_budgets([0.9, 0.5, 0.05, 0.3], 0.10, 80, 1, 1.0).unwrap();
        assert_eq!(vb.active, [true, true, false, true]);
        assert!(!vb.fallback);
        assert_eq!(vb.budgets.iter().sum::<u32>(), 80);
        assert_eq!(vb.budgets[2], 0);
        // R = 77, w = 0.9/1.7, 0.5/1.7, 0.3/1.7 -> 40.76, 22.65, 13.59
        assert_eq!(vb.budgets, [1 + 41, 1 + 23, 0, 1 + 13]);
    }

    #[test]
    fn fallback_activates_single_best_view() {
        let vb = view_budgets([0.01, 0.05, 0.05, 0.0], 0.10, 80, 1, 1.0).unwrap();
        assert!(vb.fallback);
        assert_eq!(vb.active, [false, true, false, false]);
        assert_eq!(vb.budgets, [0, 80, 0, 0]);
        let zero = view_budgets([0.0; 4], 0.10, 80, 1, 1.0).unwrap();
        assert_eq!(zero.active, [true, false, false, false]);
        assert_eq!(zero.budgets, [80, 0, 0, 0]);
        // theta_act = 0 activates every view even at p = 0: equal shares.
        let all = view_budgets([0.0; 4], 0.0, 10, 1, 1.0).unwrap();
        assert_eq!(all.budgets, [3, 3, 2, 2]);
    }

    #[test]
    fn view_budget_errors() {
        assert!(matches!(
            view_budgets([f32::NAN, 0.5, 0.5, 0.5], 0.1, 80, 1, 1.0),
            Err(Error::InvalidScore { .. })
        ));
        assert!(view_budgets([1.5, 0.5, 0.5, 0.5], 0.1, 80, 1, 1.0).is_err());
        assert!(view_budgets([0.5; 4], 0.1, 80, 1, 0.0).is_err());
        assert!(view_budgets([0.5; 4], 0.1, 80, 1, f32::NAN).is_err());
        assert!(view_budgets([0.5; 4], 1.1, 80, 1, 1.0).is_err());
        assert!(view_budgets([0.5; 4], 0.1, 3, 1, 1.0).is_err());
    }

    #[test]
    fn lr_errors_and_ties() {
        assert!(largest_remainder(&[], 5, 0).is_err());
        assert!(largest_remainder(&[1.0, -1.0], 5, 0).is_err());
        assert!(largest_remainder(&[1.0, f64::NAN], 5, 0).is_err());
        assert!(largest_remainder(&[1.0, f64::INFINITY], 5, 0).is_err());
        assert!(largest_remainder(&[0.0, 0.0], 5, 0).is_err());
        assert!(matches!(
            largest_remainder(&[1.0, 1.0], 3, 2),
            Err(Error::InvalidConfig(_))
        ));
        assert_eq!(
            largest_remainder(&[1.0, 1.0, 1.0], 5, 0).unwrap(),
            [2, 2, 1]
        );
        // 2/10, 5/10, 3/10 of 5: 1.0, 2.5, 1.5 -> the tie goes to index 1.
        assert_eq!(
            largest_remainder(&[2.0, 5.0, 3.0], 5, 0).unwrap(),
            [1, 3, 1]
        );
        // Decimal weights that f64 cannot hold exactly still apportion exactly.
        assert_eq!(
            largest_remainder(&[0.1, 0.2, 0.7], 10, 0).unwrap(),
            [1, 2, 7]
        );
        // Extreme magnitudes do not overflow.
        let big = largest_remainder(&[f64::MAX, f64::MAX, 5e-324], u32::MAX, 0).unwrap();
        assert_eq!(
            big.iter().map(|&b| u64::from(b)).sum::<u64>(),
            u64::from(u32::MAX)
        );
        let tiny = largest_remainder(&[5e-324, 1e-320], 7, 1).unwrap();
        assert_eq!(tiny.iter().sum::<u32>(), 7);
    }

    #[test]
    fn depth_limit_formula() {
        assert_eq!(depth_limit(0.0, 8), 1);
        assert_eq!(depth_limit(0.1, 8), 1);
        assert_eq!(depth_limit(0.2, 8), 2);
        assert_eq!(depth_limit(0.5, 8), 4);
        assert_eq!(depth_limit(0.51, 8), 5);
        assert_eq!(depth_limit(1.0, 8), 8);
        assert_eq!(depth_limit(f32::NAN, 8), 1);
        assert_eq!(depth_limit(0.7, 1), 1);
    }

    /// Exact rational reference on integer weights: quota_i = R * w_i / W.
    fn naive_lr(weights: &[u32], total: u32, minimum: u32) -> Vec<u32> {
        let n = weights.len() as u128;
        let r = u128::from(total) - u128::from(minimum) * n;
        let w: u128 = weights.iter().map(|&x| u128::from(x)).sum();
        let mut out: Vec<u128> = weights
            .iter()
            .map(|&x| u128::from(minimum) + r * u128::from(x) / w)
            .collect();
        let mut left = u128::from(total) - out.iter().sum::<u128>();
        // Hand out units by repeatedly picking the largest remainder (smallest index on ties).
        let mut taken = vec![false; weights.len()];
        while left > 0 {
            let mut best: Option<usize> = None;
            for i in 0..weights.len() {
                if taken[i] {
                    continue;
                }
                let rem = r * u128::from(weights[i]) % w;
                match best {
                    Some(b) if r * u128::from(weights[b]) % w >= rem => {}
                    _ => best = Some(i),
                }
            }
            let b = best.unwrap();
            taken[b] = true;
            out[b] += 1;
            left -= 1;
        }
        out.into_iter().map(|x| x as u32).collect()
    }

    proptest! {
        #[test]
        fn lr_equals_exact_reference(
            weights in prop::collection::vec(0u32..2000, 1..8),
            total in 0u32..500,
            minimum in 0u32..5,
        ) {
            prop_assume!(weights.iter().any(|&w| w > 0));
            prop_assume!(u64::from(total) >= u64::from(minimum) * weights.len() as u64);
            let wf: Vec<f64> = weights.iter().map(|&w| f64::from(w)).collect();
            let got = largest_remainder(&wf, total, minimum).unwrap();
            prop_assert_eq!(&got, &naive_lr(&weights, total, minimum));
            // Monotone: a strictly larger weight never gets fewer units.
            for i in 0..weights.len() {
                for j in 0..weights.len() {
                    if weights[i] > weights[j] {
                        prop_assert!(got[i] >= got[j]);
                    }
                }
            }
        }

        #[test]
        fn lr_float_weights_sum_and_stay_within_one_unit(
            weights in prop::collection::vec(0.0f64..1e6, 1..8),
            total in 0u32..100_000,
            minimum in 0u32..10,
        ) {
            prop_assume!(weights.iter().any(|&w| w > 0.0));
            prop_assume!(u64::from(total) >= u64::from(minimum) * weights.len() as u64);
            let got = largest_remainder(&weights, total, minimum).unwrap();
            prop_assert_eq!(got.iter().map(|&b| u64::from(b)).sum::<u64>(), u64::from(total));
            let r = f64::from(total) - f64::from(minimum) * weights.len() as f64;
            let w: f64 = weights.iter().sum();
            for (b, wi) in got.iter().zip(&weights) {
                prop_assert!(*b >= minimum);
                let quota = r * wi / w;
                let extra = f64::from(*b - minimum);
                prop_assert!(extra > quota - 1.0 - 1e-6 && extra < quota + 1.0 + 1e-6);
            }
        }

        #[test]
        fn view_budgets_invariants(
            probs in prop::array::uniform4(0.0f32..=1.0),
            theta in 0.0f32..=1.0,
            total in 4u32..300,
            minimum in 0u32..3,
            gamma in 0.1f32..4.0,
        ) {
            prop_assume!(total >= 4 * minimum);
            let vb = view_budgets(probs, theta, total, minimum, gamma).unwrap();
            prop_assert_eq!(vb.budgets.iter().sum::<u32>(), total);
            prop_assert!(vb.active.iter().any(|&a| a));
            for (i, &p) in probs.iter().enumerate() {
                if vb.active[i] {
                    prop_assert!(vb.budgets[i] >= minimum);
                    prop_assert!(vb.fallback || p >= theta);
                } else {
                    prop_assert_eq!(vb.budgets[i], 0);
                    prop_assert!(vb.fallback || p < theta);
                }
            }
            prop_assert_eq!(vb.fallback, probs.iter().all(|&p| p < theta));
            if vb.fallback {
                prop_assert_eq!(vb.active.iter().filter(|&&a| a).count(), 1);
            }
        }

        #[test]
        fn depth_limit_bounds(h in 0.0f32..=1.0, dmax in 1u32..50) {
            let d = depth_limit(h, dmax);
            prop_assert!(d >= 1 && d <= dmax);
            prop_assert!(f64::from(d) >= (f64::from(dmax) * f64::from(h)).min(f64::from(dmax)) - 1e-9);
        }
    }
}
