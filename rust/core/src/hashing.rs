//! A fast hasher for short keys: per-call lookup tables (entity names, name
//! prefixes) and tables keyed by the store's own node ids (which no input
//! chooses). std's SipHash resists collision flooding, which neither needs,
//! and costs several times more per short key. Long-lived tables keyed by
//! text from outside (terms, entity names) keep SipHash. Only for tables
//! whose iteration order nobody reads.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7C_C1_B7_27_22_0A_95;

/// Word-at-a-time multiplicative hash (the rustc "Fx" scheme).
#[derive(Default, Clone, Copy)]
pub struct ShortKeyHasher(u64);

impl ShortKeyHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for ShortKeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_u8(&mut self, b: u8) {
        // `str`'s Hash ends with a 0xff byte, so "ab" and "a" + "b" differ
        self.mix(u64::from(b));
    }
}

pub type ShortKeyMap<K, V> = HashMap<K, V, BuildHasherDefault<ShortKeyHasher>>;
pub type ShortKeySet<K> = HashSet<K, BuildHasherDefault<ShortKeyHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A set built with this hasher answers membership as std's does.
        #[test]
        fn membership_matches_std(
            keys in prop::collection::vec("[a-z ]{0,12}", 0..40),
            probes in prop::collection::vec("[a-z ]{0,12}", 0..40),
        ) {
            let fast: ShortKeySet<&str> = keys.iter().map(String::as_str).collect();
            let std: HashSet<&str> = keys.iter().map(String::as_str).collect();
            prop_assert_eq!(fast.len(), std.len());
            for p in probes.iter().chain(&keys) {
                prop_assert_eq!(fast.contains(p.as_str()), std.contains(p.as_str()));
            }
        }
    }
}
