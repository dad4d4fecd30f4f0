//! The global allocator of fabricemu's binaries (the Python extension, the examples and the
//! benchmarks): large arrays on huge pages.
//!
//! On large fabrics the engine waits on memory, and part of the wait is page walks: a k=32 fat
//! tree's ports, queues, packet arena, event lanes and flow records span about 100 MiB, which
//! 4 KiB pages cover with 25,000 TLB entries. Allocations of 2 MiB or more (those arrays, a few
//! dozen per run) are mapped here on their own, aligned to 2 MiB and advised as transparent
//! huge pages (`MADV_HUGEPAGE`: honoured where the kernel's setting is `madvise` or `always`);
//! everything smaller goes to the system allocator as before. A mapping only holds the pages
//! touched, rounded up to 2 MiB at most once per array, so memory stays about what it was.
//! Measured with paired runs of `run_scenario` against the system allocator (2026-12-03): k=32
//! 0.79x the time (peak RSS 108 -> 107 MiB), k=24 0.84x (47 -> 50 MiB), k=16 0.88x, k=8 1.00x.
//!
//! This module is one of the crate's two audited `unsafe` exceptions (the other is the prefetch
//! hint): a `GlobalAlloc` is unsafe by contract. Each call keeps it: a pointer this allocator
//! returns for a large layout is the start of a mapping of `round_up(size)` bytes, aligned to
//! 2 MiB (or page-aligned after `mremap` moved it), which is at least the layout's alignment
//! (at most a page: larger alignments go to the system allocator), and whose pages the kernel
//! zero-fills; `dealloc` and `realloc` receive the same layout, so they tell large from small
//! by the same test. Off Linux every call goes to the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

/// The allocator (`#[global_allocator] static A: HugePageAlloc = HugePageAlloc;`).
pub struct HugePageAlloc;

/// Allocations of at least this many bytes get a mapping of their own (one huge page).
pub const LARGE: usize = 2 << 20;

/// Whether layout `l` (or its size after a realloc) is served by a mapping of its own.
#[inline]
fn is_large(size: usize, align: usize) -> bool {
    cfg!(target_os = "linux") && size >= LARGE && align <= 4096
}

/// `n` rounded up to whole huge pages.
#[inline]
fn round_up(n: usize) -> usize {
    n.div_ceil(LARGE) * LARGE
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod os {
    use super::{round_up, LARGE};

    /// A fresh mapping of `size` bytes (rounded up to huge pages) starting on a huge-page
    /// boundary, advised as huge pages; null if the system has no memory for it.
    pub fn map(size: usize) -> *mut u8 {
        let len = round_up(size);
        // SAFETY: an anonymous private mapping aliases nothing; one huge page more than needed
        // leaves room to start on a boundary, and the unused ends are given back right away.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len + LARGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            let start = raw as usize;
            let aligned = start.next_multiple_of(LARGE);
            let head = aligned - start;
            if head > 0 {
                libc::munmap(raw, head);
            }
            libc::munmap((aligned + len) as *mut libc::c_void, LARGE - head);
            // Advice only: where the kernel does not give huge pages the mapping still works.
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            aligned as *mut u8
        }
    }

    /// Give back the mapping of `size` bytes at `p` (from [`map`] or [`remap`]).
    pub fn unmap(p: *mut u8, size: usize) {
        // SAFETY: `p` starts a mapping of `round_up(size)` bytes this module made, which the
        // caller (the allocator's dealloc) no longer uses.
        unsafe {
            libc::munmap(p as *mut libc::c_void, round_up(size));
        }
    }

    /// The mapping of `old` bytes at `p` resized to hold `new` bytes (moved if it must be, its
    /// contents and huge-page advice kept); null if it cannot grow.
    pub fn remap(p: *mut u8, old: usize, new: usize) -> *mut u8 {
        let (a, b) = (round_up(old), round_up(new));
        if a == b {
            return p;
        }
        // SAFETY: `p` starts a mapping of `a` bytes this module made; the kernel moves or
        // resizes it whole, so the old range is not used again.
        unsafe {
            let q = libc::mremap(p as *mut libc::c_void, a, b, libc::MREMAP_MAYMOVE);
            if q == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            q as *mut u8
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub fn map(_: usize) -> *mut u8 {
        unreachable!("large allocations are mapped on Linux only")
    }
    pub fn unmap(_: *mut u8, _: usize) {
        unreachable!("large allocations are mapped on Linux only")
    }
    pub fn remap(_: *mut u8, _: usize, _: usize) -> *mut u8 {
        unreachable!("large allocations are mapped on Linux only")
    }
}

// SAFETY: see the module's documentation; small layouts are the system allocator's, unchanged.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if is_large(l.size(), l.align()) {
            os::map(l.size())
        } else {
            // SAFETY: the caller's layout, as the system allocator takes it.
            unsafe { System.alloc(l) }
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if is_large(l.size(), l.align()) {
            os::map(l.size()) // fresh anonymous pages are zero
        } else {
            // SAFETY: as above.
            unsafe { System.alloc_zeroed(l) }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if is_large(l.size(), l.align()) {
            os::unmap(p, l.size());
        } else {
            // SAFETY: `p` came from the system allocator with this layout (same test).
            unsafe { System.dealloc(p, l) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        match (is_large(l.size(), l.align()), is_large(new, l.align())) {
            // SAFETY: `p` is the system allocator's, with this layout.
            (false, false) => unsafe { System.realloc(p, l, new) },
            (true, true) => os::remap(p, l.size(), new),
            _ => {
                // Across the threshold: a new block from the other side, the bytes copied.
                // SAFETY: `new` is non-zero and, rounded to the alignment, fits isize (the
                // caller's contract for realloc); `p` holds `l.size()` bytes, `q` `new`.
                unsafe {
                    let nl = Layout::from_size_align_unchecked(new, l.align());
                    let q = self.alloc(nl);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                        self.dealloc(p, l);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    /// The flags of the mapping holding `p`, from /proc/self/smaps ("hg": advised huge pages).
    fn vm_flags(p: *const u8) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("procfs");
        let at = p as usize;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = a <= at && at < b;
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.trim().to_string();
                }
            }
        }
        panic!("no mapping holds {at:#x}");
    }

    #[test]
    fn large_blocks_are_aligned_advised_zeroed_and_keep_their_bytes_across_reallocs() {
        let a = HugePageAlloc;
        // SAFETY: every block is used within its size and freed with its layout.
        unsafe {
            let l = Layout::from_size_align(3 * LARGE + 12345, 8).unwrap();
            let p = a.alloc_zeroed(l);
            assert!(!p.is_null());
            assert_eq!(p as usize % LARGE, 0, "starts on a huge page");
            // Advised, where the kernel has transparent huge pages at all.
            let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
            if thp.is_ok_and(|s| !s.contains("[never]")) {
                assert!(vm_flags(p).split(' ').any(|f| f == "hg"), "{}", vm_flags(p));
            }
            let bytes = std::slice::from_raw_parts_mut(p, l.size());
            assert!(bytes.iter().all(|&b| b == 0));
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            // Grow (may move), shrink below the threshold, grow above it again, free.
            let check = |p: *mut u8, n: usize| {
                let s = std::slice::from_raw_parts(p, n);
                assert!(s.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            };
            let p = a.realloc(p, l, 9 * LARGE);
            check(p, l.size());
            let l = Layout::from_size_align(9 * LARGE, 8).unwrap();
            let p = a.realloc(p, l, 1000);
            check(p, 1000);
            let l = Layout::from_size_align(1000, 8).unwrap();
            let p = a.realloc(p, l, LARGE);
            check(p, 1000);
            a.dealloc(p, Layout::from_size_align(LARGE, 8).unwrap());
            // Small blocks are the system allocator's.
            let s = Layout::from_size_align(4096, 8).unwrap();
            let q = a.alloc(s);
            assert!(!q.is_null());
            a.dealloc(q, s);
        }
    }

    #[test]
    fn a_vec_on_the_allocator_grows_and_shrinks_past_the_threshold() {
        // The way the engine's arrays use it: through Vec's growth (realloc) and drop.
        let a = HugePageAlloc;
        let mut v: Vec<u64> = Vec::new();
        for i in 0..(3 * LARGE / 8) as u64 {
            if v.len() == v.capacity() {
                let old = Layout::array::<u64>(v.capacity()).unwrap();
                let cap = (v.capacity() * 2).max(16);
                // SAFETY: the vector's block is re-made by hand with this allocator: the old
                // layout is the one it was made with, the new one holds `cap` elements.
                unsafe {
                    let mut m = std::mem::ManuallyDrop::new(std::mem::take(&mut v));
                    let p = if m.capacity() == 0 {
                        a.alloc(Layout::array::<u64>(cap).unwrap())
                    } else {
                        a.realloc(m.as_mut_ptr() as *mut u8, old, cap * 8)
                    };
                    assert!(!p.is_null());
                    v = Vec::from_raw_parts(p as *mut u64, m.len(), cap);
                }
            }
            v.push(i);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        let mut m = std::mem::ManuallyDrop::new(v);
        // SAFETY: freed with the layout it was made with.
        unsafe {
            a.dealloc(
                m.as_mut_ptr() as *mut u8,
                Layout::array::<u64>(m.capacity()).unwrap(),
            );
        }
    }
}
