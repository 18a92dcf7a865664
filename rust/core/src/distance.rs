//! The HNSW graph's distance functions, ours rather than usearch's.
//!
//! usearch is built without its optional numkong kernels (`default-features =
//! false`): numkong compiles about 300 CPU-seconds of C for every element
//! type it supports, most of them types the index never stores, and that was
//! the largest single cost of a fresh build. Without it usearch's own metrics
//! are plain loops compiled for the baseline target (SSE2 on x86-64), so the
//! graph is given these instead through usearch's custom-metric hook: cosine
//! distance for each quantization the index offers, dispatched at run time to
//! AVX2/FMA (and F16C for half precision) where the CPU has them, else to
//! portable lane-wise loops the compiler vectorizes for the baseline.
//!
//! Every vector in the graph and every query is unit length (the index
//! normalises them), so for f32 the cosine distance is `1 - a.b`. Quantized
//! rows are only approximately unit, so f16 and i8 divide by both norms, as
//! usearch's own cosine does, with its conventions for a zero row.

use usearch::{Distance, Index};

use crate::vector::{DotKernel, Quantization};

/// Install our cosine distance for `quantization` on a fresh graph of `dim`
/// dimensions. usearch calls it from its insert and search threads, through
/// an `extern "C"` trampoline, so it must never panic: the slices it builds
/// are exactly `dim` long, which is what usearch allocates per row.
pub(crate) fn install(index: &mut Index, quantization: Quantization, dim: usize) {
    match quantization {
        Quantization::F32 => {
            let kernel = DotKernel::detect();
            index.change_metric::<f32>(Box::new(move |a, b| {
                // SAFETY: usearch passes two rows of this index: `dim` f32 each.
                let (a, b) = unsafe { rows(a, b, dim) };
                1.0 - kernel.dot(a, b)
            }));
        }
        Quantization::F16 => {
            let kernel = HalfKernel::detect();
            index.change_metric::<usearch::f16>(Box::new(move |a, b| {
                // SAFETY: as above; usearch's f16 is a transparent 16-bit word.
                let (a, b) = unsafe { rows(a.cast::<u16>(), b.cast::<u16>(), dim) };
                let (ab, a2, b2) = kernel.products(a, b);
                cosine_distance(ab, a2, b2)
            }));
        }
        Quantization::I8 => {
            let kernel = ByteKernel::detect();
            index.change_metric::<i8>(Box::new(move |a, b| {
                // SAFETY: as above.
                let (a, b) = unsafe { rows(a, b, dim) };
                let (ab, a2, b2) = kernel.products(a, b);
                cosine_distance(ab as f32, a2 as f32, b2 as f32)
            }));
        }
    }
}

/// # Safety
/// `a` and `b` must each point to `dim` readable elements.
unsafe fn rows<'a, T>(a: *const T, b: *const T, dim: usize) -> (&'a [T], &'a [T]) {
    (
        std::slice::from_raw_parts(a, dim),
        std::slice::from_raw_parts(b, dim),
    )
}

/// `1 - ab / (|a| |b|)`; a zero row is at distance 1 from anything else and 0
/// from another zero row.
fn cosine_distance(ab: f32, a2: f32, b2: f32) -> Distance {
    match (a2 == 0.0, b2 == 0.0) {
        (true, true) => 0.0,
        (true, false) | (false, true) => 1.0,
        (false, false) => 1.0 - ab / (a2.sqrt() * b2.sqrt()),
    }
}

/// IEEE 754 half precision to single (exact: every half is a float).
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match (exponent, mantissa) {
        (0, 0) => 0,
        // subnormal: mantissa x 2^-24, exact in f32
        (0, m) => (m as f32 * f32::from_bits(0x3380_0000)).to_bits(),
        (0x1f, m) => 0x7f80_0000 | (m << 13),
        (e, m) => ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// (a.b, a.a, b.b) of two half-precision rows, by the best body this CPU runs.
#[derive(Clone, Copy)]
pub(crate) enum HalfKernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2F16c,
}

impl HalfKernel {
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            return HalfKernel::Avx2F16c;
        }
        HalfKernel::Portable
    }

    pub(crate) fn products(self, a: &[u16], b: &[u16]) -> (f32, f32, f32) {
        match self {
            HalfKernel::Portable => half_products_portable(a, b),
            // SAFETY: `detect` picks this variant only where the CPU has AVX2, FMA and F16C.
            #[cfg(target_arch = "x86_64")]
            HalfKernel::Avx2F16c => unsafe { half_products_avx2(a, b) },
        }
    }
}

/// Eight independent lanes per sum, so the compiler can vectorize the reduction.
fn half_products_portable(a: &[u16], b: &[u16]) -> (f32, f32, f32) {
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (mut ab, mut a2, mut b2) = ([0.0f32; LANES], [0.0f32; LANES], [0.0f32; LANES]);
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            let (p, q) = (f16_to_f32(x[i]), f16_to_f32(y[i]));
            ab[i] += p * q;
            a2[i] += p * p;
            b2[i] += q * q;
        }
    }
    let mut tail = (0.0f32, 0.0f32, 0.0f32);
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        let (p, q) = (f16_to_f32(x), f16_to_f32(y));
        tail.0 += p * q;
        tail.1 += p * p;
        tail.2 += q * q;
    }
    (
        ab.iter().sum::<f32>() + tail.0,
        a2.iter().sum::<f32>() + tail.1,
        b2.iter().sum::<f32>() + tail.2,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn half_products_avx2(a: &[u16], b: &[u16]) -> (f32, f32, f32) {
    use std::arch::x86_64::*;
    unsafe fn sum(v: __m256) -> f32 {
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), v);
        lanes.iter().sum()
    }
    let n = a.len().min(b.len());
    // two independent sets of sums, so consecutive FMAs do not wait on each other
    let zero = _mm256_setzero_ps();
    let (mut ab, mut a2, mut b2) = ([zero; 2], [zero; 2], [zero; 2]);
    let mut i = 0;
    while i + 16 <= n {
        for (k, at) in [i, i + 8].into_iter().enumerate() {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(at).cast()));
            let y = _mm256_cvtph_ps(_mm_loadu_si128(b.as_ptr().add(at).cast()));
            ab[k] = _mm256_fmadd_ps(x, y, ab[k]);
            a2[k] = _mm256_fmadd_ps(x, x, a2[k]);
            b2[k] = _mm256_fmadd_ps(y, y, b2[k]);
        }
        i += 16;
    }
    let mut tail = (0.0f32, 0.0f32, 0.0f32);
    for (&x, &y) in a[i..n].iter().zip(&b[i..n]) {
        let (p, q) = (f16_to_f32(x), f16_to_f32(y));
        tail.0 += p * q;
        tail.1 += p * p;
        tail.2 += q * q;
    }
    (
        sum(_mm256_add_ps(ab[0], ab[1])) + tail.0,
        sum(_mm256_add_ps(a2[0], a2[1])) + tail.1,
        sum(_mm256_add_ps(b2[0], b2[1])) + tail.2,
    )
}

/// (a.b, a.a, b.b) of two i8 rows in exact integer arithmetic.
#[derive(Clone, Copy)]
pub(crate) enum ByteKernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl ByteKernel {
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            return ByteKernel::Avx2;
        }
        ByteKernel::Portable
    }

    pub(crate) fn products(self, a: &[i8], b: &[i8]) -> (i64, i64, i64) {
        match self {
            ByteKernel::Portable => byte_products(a, b),
            // SAFETY: `detect` picks this variant only where the CPU has AVX2.
            #[cfg(target_arch = "x86_64")]
            ByteKernel::Avx2 => unsafe { byte_products_avx2(a, b) },
        }
    }
}

/// Sixteen bytes at a time, widened to i16; `madd` multiplies pairs and adds
/// neighbours into i32 lanes. A lane gains at most 2 x 128^2 = 2^15 per step,
/// so it cannot overflow below 2^16 steps: a million elements, far above
/// `MAX_DIM`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn byte_products_avx2(a: &[i8], b: &[i8]) -> (i64, i64, i64) {
    use std::arch::x86_64::*;
    unsafe fn sum(v: __m256i) -> i64 {
        let mut lanes = [0i32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v);
        lanes.iter().map(|&x| i64::from(x)).sum()
    }
    let n = a.len().min(b.len());
    let (mut ab, mut a2, mut b2) = (
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
    );
    let mut i = 0;
    while i + 16 <= n {
        let x = _mm256_cvtepi8_epi16(_mm_loadu_si128(a.as_ptr().add(i).cast()));
        let y = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.as_ptr().add(i).cast()));
        ab = _mm256_add_epi32(ab, _mm256_madd_epi16(x, y));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(x, x));
        b2 = _mm256_add_epi32(b2, _mm256_madd_epi16(y, y));
        i += 16;
    }
    let tail = byte_products(&a[i..n], &b[i..n]);
    (sum(ab) + tail.0, sum(a2) + tail.1, sum(b2) + tail.2)
}

/// Lane-wise i32 sums. A lane gains at most 128^2 = 2^14 per 32 elements
/// (lane 0 also the last 31), so it cannot overflow below about 4 million
/// elements, far above `MAX_DIM`.
fn byte_products(a: &[i8], b: &[i8]) -> (i64, i64, i64) {
    const LANES: usize = 32;
    let n = a.len().min(b.len());
    let (mut ab, mut a2, mut b2) = ([0i32; LANES], [0i32; LANES], [0i32; LANES]);
    let mut ca = a[..n].chunks_exact(LANES);
    let mut cb = b[..n].chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            let (p, q) = (i32::from(x[i]), i32::from(y[i]));
            ab[i] += p * q;
            a2[i] += p * p;
            b2[i] += q * q;
        }
    }
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        let (p, q) = (i32::from(x), i32::from(y));
        ab[0] += p * q;
        a2[0] += p * p;
        b2[0] += q * q;
    }
    let widen = |v: [i32; LANES]| v.iter().map(|&x| i64::from(x)).sum::<i64>();
    (widen(ab), widen(a2), widen(b2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The half-precision value written from the standard's formula, not bit moves.
    fn f16_reference(bits: u16) -> f64 {
        let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
        let exponent = i32::from((bits >> 10) & 0x1f);
        let fraction = f64::from(bits & 0x3ff) / 1024.0;
        sign * match exponent {
            0 => fraction * 2f64.powi(-14),
            31 if fraction == 0.0 => f64::INFINITY,
            31 => f64::NAN,
            e => (1.0 + fraction) * 2f64.powi(e - 15),
        }
    }

    #[test]
    fn every_half_converts_exactly() {
        for bits in 0..=u16::MAX {
            let (got, want) = (f16_to_f32(bits), f16_reference(bits));
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(f64::from(got), want, "{bits:#06x}");
                assert_eq!(got.is_sign_negative(), bits >> 15 == 1, "{bits:#06x}");
            }
        }
    }

    /// Finite halves of moderate size (no overflow in the sums).
    fn half() -> impl Strategy<Value = u16> {
        any::<u16>().prop_filter("moderate", |&b| {
            let v = f16_reference(b);
            v.is_finite() && v.abs() < 64.0
        })
    }

    proptest! {
        #[test]
        fn half_kernels_match_the_reference(
            pair in (0usize..70).prop_flat_map(|n| (
                proptest::collection::vec(half(), n),
                proptest::collection::vec(half(), n),
            ))
        ) {
            let (a, b) = pair;
            let want = a.iter().zip(&b).fold((0.0f64, 0.0f64, 0.0f64), |s, (&x, &y)| {
                let (p, q) = (f16_reference(x), f16_reference(y));
                (s.0 + p * q, s.1 + p * p, s.2 + q * q)
            });
            let scale = want.1.max(want.2).max(1.0);
            for kernel in [HalfKernel::Portable, HalfKernel::detect()] {
                let got = kernel.products(&a, &b);
                for (g, w) in [(got.0, want.0), (got.1, want.1), (got.2, want.2)] {
                    prop_assert!((f64::from(g) - w).abs() <= 1e-5 * scale, "{g} vs {w}");
                }
            }
        }

        #[test]
        fn byte_kernels_are_exact(
            pair in (0usize..300).prop_flat_map(|n| (
                proptest::collection::vec(any::<i8>(), n),
                proptest::collection::vec(any::<i8>(), n),
            ))
        ) {
            let (a, b) = pair;
            let want = a.iter().zip(&b).fold((0i64, 0i64, 0i64), |s, (&x, &y)| {
                let (p, q) = (i64::from(x), i64::from(y));
                (s.0 + p * q, s.1 + p * p, s.2 + q * q)
            });
            prop_assert_eq!(ByteKernel::Portable.products(&a, &b), want);
            prop_assert_eq!(ByteKernel::detect().products(&a, &b), want);
        }
    }

    #[test]
    fn byte_sums_do_not_overflow_at_the_largest_dimension() {
        let n = crate::vector::MAX_DIM;
        let a = vec![i8::MIN; n];
        let want = (n as i64) * 128 * 128;
        for kernel in [ByteKernel::Portable, ByteKernel::detect()] {
            assert_eq!(kernel.products(&a, &a), (want, want, want));
        }
    }

    #[test]
    fn zero_rows_follow_usearch_conventions() {
        assert_eq!(cosine_distance(0.0, 0.0, 0.0), 0.0);
        assert_eq!(cosine_distance(0.0, 0.0, 2.0), 1.0);
        assert!(cosine_distance(2.0, 2.0, 2.0).abs() < 1e-6);
        assert!((cosine_distance(0.0, 1.0, 1.0) - 1.0).abs() < 1e-6);
    }
}
