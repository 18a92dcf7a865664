//! Cache hints for reads scattered over a large memory: a traversal round
//! reads a few dozen vectors and edge lists far apart from each other, and
//! asking for all of them before the first is used lets their cache misses
//! overlap instead of queueing one behind the other. A hint reads nothing
//! and cannot fault; on a CPU without the instruction it does nothing.

const LINE: usize = 64;

/// Ask for every cache line of `items`.
#[inline]
pub(crate) fn slice<T>(items: &[T]) {
    let bytes = std::mem::size_of_val(items);
    let start = items.as_ptr().cast::<u8>();
    for at in (0..bytes).step_by(LINE) {
        // SAFETY: `at` < `bytes`, so the address is inside `items`.
        line(unsafe { start.add(at) });
    }
}

/// Ask for the cache line that holds the start of `value`.
#[inline]
pub(crate) fn value<T>(value: &T) {
    line(std::ptr::from_ref(value).cast::<u8>());
}

#[inline]
fn line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults, whatever the address.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
