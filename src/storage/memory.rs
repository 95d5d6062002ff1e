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
        out_of_memory(len);
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

/// Ends the process with one line saying why: the kernel refused memory for a table (past
/// `ulimit -v`, the cgroup's `memory.max`, or the machine). Like the global allocator's failure
/// handler this does not return, but it says what happened instead of aborting with a bare
/// "memory allocation failed". (Returning an error would need every slot allocation to report
/// it; the memory check before loading refuses sizes that cannot fit, so this is the backstop.)
#[cold]
fn out_of_memory(len: usize) -> ! {
    let err = std::io::Error::last_os_error();
    eprintln!(
        "error: out of memory: the kernel refused {} MiB for table storage ({err}); the data does \
         not fit in the memory this process may use (RAM, ulimit -v, the cgroup's memory.max)",
        len >> 20
    );
    std::process::exit(1)
}

/// Faults in the `len` bytes at `p` (fresh memory from [`map`], not yet published to any other
/// thread) for writing, so that the thread that writes them later takes no page faults: the
/// kernel allocates and zeroes the pages now, in the calling thread. The contents stay zero.
pub fn populate(p: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `p..p + len` is one mapping of ours; MADV_POPULATE_WRITE (Linux 5.14) only
        // faults its pages in, as writes of their current (zero) contents would.
        if unsafe { libc::madvise(p.cast(), len, libc::MADV_POPULATE_WRITE) } == 0 {
            return;
        }
    }
    // Older kernels (and other systems): touch every page with a write of the zero it holds.
    for off in (0..len).step_by(4096) {
        // SAFETY: `off < len`, so the byte is inside the region, which only this thread uses.
        unsafe { p.add(off).write_volatile(0) };
    }
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
