//! Large zeroed regions for record segments and hash-index buckets.
//!
//! On Linux, regions are mapped directly, aligned to 2 MiB and advised as transparent huge pages
//! before they are first touched, so that every table (whichever is loaded first) gets huge pages
//! alike: random access then costs no TLB walk. (Through the global allocator the memory may be
//! pre-touched or unaligned, and only some tables got huge pages, which biased comparisons between
//! databases.) Elsewhere they come from the global allocator.

use std::alloc::Layout;

const HUGE: usize = 2 << 20;

/// Maps zeroed memory for `layout` (of non-zero size); aborts like the global allocator if none
/// is left.
#[cfg(target_os = "linux")]
pub fn map(layout: Layout) -> *mut u8 {
    let len = layout.size();
    let span = len + HUGE;
    // SAFETY: an anonymous private mapping with no address hint; the result is checked.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        std::alloc::handle_alloc_error(layout);
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(HUGE);
    let head = aligned - start;
    let tail = span - head - len;
    // SAFETY: `[start, start + span)` is our mapping; the head and tail trimmed here lie
    // inside it and outside `[aligned, aligned + len)`, which stays mapped. MADV_HUGEPAGE
    // is advice and changes no contents (fresh anonymous memory reads as zero).
    unsafe {
        if head > 0 {
            libc::munmap(start as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    aligned as *mut u8
}

/// Unmaps memory from [`map`].
///
/// # Safety
///
/// `p` came from `map(layout)` with the same layout and nothing refers into it any more.
#[cfg(target_os = "linux")]
pub unsafe fn unmap(p: *mut u8, layout: Layout) {
    // SAFETY: by the contract, `p..p + size` is exactly one live mapping of ours.
    unsafe { libc::munmap(p.cast(), layout.size()) };
}

/// Allocates zeroed memory for `layout`.
#[cfg(not(target_os = "linux"))]
pub fn map(layout: Layout) -> *mut u8 {
    // SAFETY: callers pass layouts of non-zero size (a segment or a bucket array).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    p
}

/// Frees memory from [`map`].
///
/// # Safety
///
/// `p` came from `map(layout)` with the same layout and nothing refers into it any more.
#[cfg(not(target_os = "linux"))]
pub unsafe fn unmap(p: *mut u8, layout: Layout) {
    // SAFETY: by the contract, `p` was allocated with `layout` by the global allocator.
    unsafe { std::alloc::dealloc(p, layout) };
}
