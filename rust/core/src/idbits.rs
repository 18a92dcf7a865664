//! A set of node ids as one bit per id: ids are the insertion sequence, so
//! a set over them is dense, and a membership check reads one word that
//! stays in cache (12.5 KB for 100k ids) where a node's own record would miss.

use crate::types::NodeId;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdBits {
    words: Vec<u64>,
}

impl IdBits {
    #[inline]
    pub fn contains(&self, id: NodeId) -> bool {
        usize::try_from(id / 64)
            .ok()
            .and_then(|w| self.words.get(w))
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Add or drop `id`, growing the words to hold it.
    pub fn set(&mut self, id: NodeId, member: bool) {
        let w = usize::try_from(id / 64).expect("node ids index memory");
        if self.words.len() <= w {
            if !member {
                return; // past the end is absent already
            }
            self.words.resize(w + 1, 0);
        }
        if member {
            self.words[w] |= 1 << (id % 64);
        } else {
            self.words[w] &= !(1 << (id % 64));
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * std::mem::size_of::<u64>()
    }
}

impl FromIterator<NodeId> for IdBits {
    fn from_iter<I: IntoIterator<Item = NodeId>>(ids: I) -> Self {
        let mut bits = IdBits::default();
        for id in ids {
            bits.set(id, true);
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Membership as a set of ids holds it, through adds and drops, for
        /// any id (past the end, or far past it, reads absent).
        #[test]
        fn idbits_is_a_set(ops in prop::collection::vec((0u64..300, any::<bool>()), 0..200), probe in any::<u64>()) {
            let mut bits = IdBits::default();
            let mut model = BTreeSet::new();
            for (id, member) in ops {
                bits.set(id, member);
                if member { model.insert(id); } else { model.remove(&id); }
            }
            for id in (0..320).chain([probe, u64::MAX]) {
                prop_assert_eq!(bits.contains(id), model.contains(&id));
            }
        }
    }
}
