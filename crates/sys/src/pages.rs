//! Memory in pages of its own (`PageBuf`), and exchanging whole pages
//! between two ranges without copying them (`swap`): `mremap` moves page
//! table entries, not bytes. A rollback gives the program the pages of
//! its checkpoint this way, and the checkpoint's buffer gets the
//! program's abandoned pages (already populated: the next checkpoint
//! writes into them without a page fault).

use std::io;

const MREMAP_DONTUNMAP: libc::c_int = 4;

/// `len` bytes starting `offset` bytes into the first page of a private
/// anonymous mapping of their own (zero until written: the kernel zeroes
/// a page as it is first touched).
pub struct PageBuf {
    map: *mut u8,
    map_len: usize,
    offset: usize,
    len: usize,
}

// SAFETY: a PageBuf owns its mapping, like a Vec its allocation; shared
// references only read it.
unsafe impl Send for PageBuf {}
// SAFETY: as above.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// A buffer of `len` bytes at `offset` (< the page size) into its
    /// first page.
    pub fn new(len: usize, offset: usize) -> io::Result<PageBuf> {
        let page = super::uffd::page_size();
        let offset = offset % page;
        let map_len = (offset + len).next_multiple_of(page).max(page);
        // SAFETY: a new private anonymous mapping, at an address the
        // kernel chooses; nothing else refers to it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PageBuf {
            map: map as *mut u8,
            map_len,
            offset,
            len,
        })
    }

    /// Whether this buffer holds `len` bytes at the page offset of `at`.
    pub fn fits(&self, len: usize, at: usize) -> bool {
        self.len == len && self.offset == at % super::uffd::page_size()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: [offset, offset + len) lies inside the mapping, which
        // lives as long as `self`; writers need `&mut self`.
        unsafe { std::slice::from_raw_parts(self.map.add(self.offset), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.map.add(self.offset), self.len) }
    }

    /// Gives the bytes to `dst` (the same length, at the same page
    /// offset): the whole pages by exchanging them with `dst`'s, the
    /// partial pages at the ends by copying. This buffer is left with
    /// `dst`'s old bytes in those pages (its contents are then garbage).
    /// An error (memory that is not private and anonymous, or a kernel
    /// without `MREMAP_DONTUNMAP`) leaves both as they were, for the
    /// caller to copy instead.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `self.len()` bytes, and nothing
    /// may read or write its whole pages during the call (they are
    /// briefly empty).
    pub unsafe fn give_to(&mut self, dst: *mut u8) -> io::Result<()> {
        let page = super::uffd::page_size();
        let (src, len) = (self.map as usize + self.offset, self.len);
        let d = dst as usize;
        if d % page != self.offset {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not at the same offset into a page",
            ));
        }
        let (first, end) = (d.next_multiple_of(page), (d + len) / page * page);
        if end <= first {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no whole page"));
        }
        if !private_anonymous(first, end - first)? {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "not private anonymous memory",
            ));
        }
        let shift = first - d;
        // SAFETY: both ranges are page-aligned, of the same length, whole
        // pages of private anonymous mappings (ours, and `dst`'s as just
        // checked) that nothing else uses during the call (the contract).
        unsafe { swap(src + shift, first, end - first)? };
        // SAFETY: the ends are inside `dst` (the caller's contract) and
        // inside our mapping; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src as *const u8, dst, shift);
            let tail = d + len - end;
            std::ptr::copy_nonoverlapping((src + (end - d)) as *const u8, end as *mut u8, tail);
        }
        Ok(())
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Exchanges the pages of the page-aligned ranges `a` and `b` of `len`
/// bytes, both private anonymous memory, by moving page tables: `b`'s
/// pages go to a new place, `a`'s to `b`, then `b`'s old ones to `a`.
/// `MREMAP_DONTUNMAP` leaves each source mapped (and empty) so that no
/// range is ever a hole. On an error nothing has changed.
///
/// # Safety
/// Nothing may use the ranges' memory during the call.
unsafe fn swap(a: usize, b: usize, len: usize) -> io::Result<()> {
    let mremap = |from: usize, to: Option<usize>, flags: libc::c_int| -> io::Result<usize> {
        // SAFETY: the ranges are the caller's to rearrange (see above);
        // mremap checks them and fails rather than touching other memory.
        let r = unsafe {
            libc::mremap(
                from as *mut libc::c_void,
                len,
                len,
                libc::MREMAP_MAYMOVE | flags,
                to.unwrap_or(0) as *mut libc::c_void,
            )
        };
        if r == libc::MAP_FAILED {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    };
    let parked = mremap(b, None, MREMAP_DONTUNMAP)?;
    if let Err(e) = mremap(a, Some(b), libc::MREMAP_FIXED | MREMAP_DONTUNMAP) {
        // Back where they were (the empty range at `b` is replaced).
        mremap(parked, Some(b), libc::MREMAP_FIXED)?;
        return Err(e);
    }
    mremap(parked, Some(a), libc::MREMAP_FIXED)?;
    Ok(())
}

/// Whether `len` bytes at `addr` lie in private anonymous mappings
/// (`/proc/self/maps`: no file, not the stack, private and writable).
pub fn private_anonymous(addr: usize, len: usize) -> io::Result<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut at = addr;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let name = f.nth(3).unwrap_or("");
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)) else {
            continue;
        };
        if e <= at || s > at {
            continue;
        }
        let anonymous = name.is_empty() || name == "[heap]";
        if !anonymous || !perms.starts_with("rw") || perms.as_bytes().get(3) != Some(&b'p') {
            return Ok(false);
        }
        at = e;
        if at >= addr + len {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_pages_change_places_and_the_ends_are_copied() {
        let page = crate::uffd::page_size();
        for (offset, len) in [(0, 64 * page), (5, 64 * page + 3), (page - 1, 10 * page)] {
            let mut program = PageBuf::new(len, offset).unwrap();
            program.as_mut_slice().fill(1);
            let mut copy = PageBuf::new(len, offset).unwrap();
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            copy.as_mut_slice().copy_from_slice(&bytes);
            let dst = program.as_mut_slice().as_mut_ptr();
            // SAFETY: `program` is ours, of `len` bytes, unused meanwhile.
            unsafe { copy.give_to(dst) }.unwrap();
            assert_eq!(program.as_slice(), &bytes[..], "offset {offset}");
            // The copy holds the program's old whole pages.
            let first = (page - offset) % page;
            assert!(copy.as_slice()[first..first + page].iter().all(|&b| b == 1));
        }
    }

    #[test]
    fn memory_that_is_not_private_anonymous_is_refused() {
        let page = crate::uffd::page_size();
        // SAFETY: a new shared mapping of our own, unmapped below.
        let shared = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(shared, libc::MAP_FAILED);
        let mut copy = PageBuf::new(8 * page, 0).unwrap();
        copy.as_mut_slice().fill(7);
        // SAFETY: the shared mapping is ours and unused.
        let r = unsafe { copy.give_to(shared as *mut u8) };
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::Unsupported);
        // SAFETY: mapped above, 8 pages.
        let s = unsafe { std::slice::from_raw_parts(shared as *const u8, 8 * page) };
        assert!(s.iter().all(|&b| b == 0), "left alone");
        // A private mapping of a file: not anonymous.
        // SAFETY: memfd_create takes a C string; the descriptor is ours.
        let fd = unsafe { libc::memfd_create(c"pages-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: as above; a new private mapping of our file.
        let file = unsafe {
            assert_eq!(libc::ftruncate(fd, 8 * page as libc::off_t), 0);
            libc::mmap(
                std::ptr::null_mut(),
                8 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        assert_ne!(file, libc::MAP_FAILED);
        assert!(!private_anonymous(file as usize, 8 * page).unwrap());
        // SAFETY: ours, mapped and opened above.
        unsafe {
            libc::munmap(file, 8 * page);
            libc::close(fd);
        }
        let heap = vec![0u8; 1 << 20];
        assert!(private_anonymous(heap.as_ptr() as usize, heap.len()).unwrap());
        // SAFETY: mapped above.
        unsafe { libc::munmap(shared, 8 * page) };
    }
}
