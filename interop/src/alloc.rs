//! A counting global allocator for memory tests. A test binary installs it
//! with `#[global_allocator] static A: Counting = Counting;` and reads
//! [`live`] before and after (all threads), [`live_here`] (this thread's
//! share, and [`peak_here`] its high-water mark), or [`allocations`] (calls made on the current thread, so that a
//! peer on another thread is not counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Bytes currently allocated through [`Counting`].
static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Allocation calls (`alloc` and `realloc`) made on this thread.
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread.
    static LIVE_HERE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
    /// The highest [`LIVE_HERE`] since [`reset_peak_here`].
    static PEAK_HERE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

fn count_one() {
    // `try_with`: the thread-locals may be gone while a thread exits.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn here(bytes: isize) {
    let _ = LIVE_HERE.try_with(|c| {
        let now = c.get() + bytes;
        c.set(now);
        let _ = PEAK_HERE.try_with(|p| p.set(p.get().max(now)));
    });
}

/// Forwards to the system allocator and counts live bytes.
pub struct Counting;

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        here(layout.size() as isize);
        count_one();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size as isize - layout.size() as isize;
        LIVE.fetch_add(grown, Ordering::Relaxed);
        here(grown);
        count_one();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        here(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Bytes live now (only meaningful where [`Counting`] is installed).
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Allocation calls (`alloc` and `realloc`) made so far on this thread.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

/// Bytes allocated minus bytes freed on this thread: exact for a test whose
/// allocations all happen on its own thread (a current-thread runtime), and
/// blind to other tests running at the same time (the test harness's
/// capture of their output, say).
pub fn live_here() -> isize {
    LIVE_HERE.with(|c| c.get())
}

/// Start [`peak_here`] over from [`live_here`] now.
pub fn reset_peak_here() {
    PEAK_HERE.with(|p| p.set(live_here()));
}

/// The highest [`live_here`] since [`reset_peak_here`].
pub fn peak_here() -> isize {
    PEAK_HERE.with(|p| p.get())
}
