//! The musl build's allocator: dlmalloc, or musl's own `malloc` when `VIGIL_PLAIN` names
//! `dlmalloc` (src/tricks.rs; docs/performance.md; BENCHMARKS.md, tenth and eleventh passes).
//! src/main.rs installs [`Chosen`]; the first allocation fixes the choice for the process's
//! life; the idle trim calls [`trim`]. A glibc build has none of this: glibc's `malloc` serves
//! well.
//!
//! Why: musl's `malloc` (mallocng) unmaps a group of objects of one size class as soon as the
//! group is empty, so a supervisor building and dropping thousands of small values per
//! `status` mapped and unmapped the same groups at every request (26 `mmap` and 26 `munmap`
//! calls per full status of 100 pods). dlmalloc (Doug Lea's allocator, the design glibc's
//! descends from; the `dlmalloc` crate std itself uses on wasm: pure Rust, set up on its first
//! allocation, no constructor) keeps freed chunks for reuse. C allocators that keep memory as
//! well (mimalloc, jemalloc) were measured and not taken: their constructors cost every CLI
//! call (mimalloc: +0.14 ms of CPU and 16 page faults per `vigil status`).
//!
//! Owns: the choice, the dlmalloc heap and the lock around it. Must not: change the choice once
//! anything was allocated (a block is always freed by the allocator that gave it), or allocate
//! from inside the allocator (the choice reads the environment with `getenv`, which does not).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const DLMALLOC: u8 = 2;

/// Which allocator serves this process; fixed by the first allocation at the latest.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The dlmalloc heap, touched only with [`LOCK`] held. (The loop has one thread; the
/// resolver thread of probes that name hosts allocates too.)
static HEAP: Heap = Heap(UnsafeCell::new(dlmalloc::Dlmalloc::new()));
static LOCK: Mutex<()> = Mutex::new(());

struct Heap(UnsafeCell<dlmalloc::Dlmalloc>);

// SAFETY: the heap is only reached through `with_heap`, which holds `LOCK` for the whole access.
unsafe impl Sync for Heap {}

/// Runs `f` on the dlmalloc heap with the lock held. std's `Mutex` does not allocate; a
/// poisoned lock (a panic cannot happen inside dlmalloc's calls in a release build) is taken
/// as it is.
fn with_heap<R>(f: impl FnOnce(&mut dlmalloc::Dlmalloc) -> R) -> R {
    let _held = LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: `LOCK` is held until `f` returns, so this is the only reference to the heap.
    f(unsafe { &mut *HEAP.0.get() })
}

/// Whether dlmalloc serves this process. The first call fixes the choice.
#[inline]
fn dlmalloc() -> bool {
    match CHOICE.load(Relaxed) {
        DLMALLOC => true,
        SYSTEM => false,
        _ => {
            let first = if crate::tricks::plain_from_env_unallocated(crate::tricks::Trick::Dlmalloc)
            {
                SYSTEM
            } else {
                DLMALLOC
            };
            let _ = CHOICE.compare_exchange(UNDECIDED, first, Relaxed, Relaxed);
            CHOICE.load(Relaxed) == DLMALLOC
        }
    }
}

/// Gives the free top of dlmalloc's heap and its unused segments back to the kernel (what
/// glibc's `malloc_trim` is to a glibc build); nothing when musl's `malloc` serves the process.
pub fn trim() {
    if CHOICE.load(Relaxed) == DLMALLOC {
        // SAFETY: trimming releases only memory no allocation holds.
        with_heap(|heap| unsafe { heap.trim(0) });
    }
}

/// The global allocator: dlmalloc or musl's, as chosen.
pub struct Chosen;

// SAFETY: every call goes to one allocator, the same for the process's whole life (the choice
// cannot change once anything was allocated), so each block is freed or resized by the
// allocator that gave it; dlmalloc is reached only under its lock; both uphold GlobalAlloc's
// contract themselves (dlmalloc takes the size and alignment as `Layout` gives them).
unsafe impl GlobalAlloc for Chosen {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if dlmalloc() {
            // SAFETY: the caller's guarantees (non-zero size) are passed on unchanged.
            with_heap(|heap| unsafe { heap.malloc(layout.size(), layout.align()) })
        } else {
            // SAFETY: as above.
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if dlmalloc() {
            // SAFETY: as for `alloc`.
            with_heap(|heap| unsafe { heap.calloc(layout.size(), layout.align()) })
        } else {
            // SAFETY: as for `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if dlmalloc() {
            // SAFETY: `ptr` came from this heap with this layout (see the impl's comment).
            with_heap(|heap| unsafe { heap.free(ptr, layout.size(), layout.align()) })
        } else {
            // SAFETY: `ptr` came from musl's allocator with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if dlmalloc() {
            // SAFETY: `ptr` came from this heap with this layout; `new_size` is non-zero.
            with_heap(|heap| unsafe { heap.realloc(ptr, layout.size(), layout.align(), new_size) })
        } else {
            // SAFETY: `ptr` came from musl's allocator with this layout.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}
