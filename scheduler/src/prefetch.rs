//! Prefetch hints for the cycle's passes over a large snapshot.
//!
//! Making a job reads its first pod, its PodGroup object, a few of their strings and its pods'
//! slots, each in a place of its own, in an order unrelated to where they lie: at 4,000 nodes
//! that is a cache miss or more per read, and the processor overlaps few of them by itself.
//! Asking for the memory of the jobs a few places ahead lets the misses overlap: `prepare` went
//! from 62 to about 45 ms (docs/performance.md, "Stop 49"). This is the crate's one `unsafe`.
#![allow(unsafe_code)]

/// How many items ahead a pass asks for the memory it will read: far enough for a miss to
/// resolve (a few hundred nanoseconds), near enough that the lines are still in cache.
pub(crate) const AHEAD: usize = 8;

/// Asks for the cache lines holding `value` (all of them: a `Pod` spans several).
#[inline(always)]
pub(crate) fn value<T>(value: &T) {
    let start = std::ptr::from_ref(value).cast::<u8>();
    for offset in (0..size_of::<T>()).step_by(64) {
        line(start.wrapping_add(offset));
    }
}

/// Asks for the first cache line of a string's bytes (enough for the names a job reads).
#[inline(always)]
pub(crate) fn text(text: &str) {
    line(text.as_ptr());
}

/// Asks for the first cache line of an optional string's bytes, if there is one.
#[inline(always)]
pub(crate) fn some_text(text: &Option<String>) {
    if let Some(t) = text {
        self::text(t);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn line(at: *const u8) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 processor has (the target's
    // baseline). A prefetch only hints: it never faults nor changes memory, whatever the
    // address; ours lie within live references anyway.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) }
}

/// Elsewhere (no stable prefetch intrinsic), nothing: the passes are only slower.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn line(_at: *const u8) {}
