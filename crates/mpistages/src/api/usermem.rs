//! The ABI boundary's memory side: the one place in the API layer that reads
//! and writes user memory through raw pointers. A `TypedBuf` is created only
//! by `src/abi` from arguments of an MPI call, where the MPI standard makes
//! the caller promise the buffer stays valid (and, for receives, untouched)
//! until the operation completes.

use super::datatype::Datatype;
use crate::progress::{Data, Layout};
use crate::transport::RawBuf;
use std::sync::Arc;

/// `count` elements of `dtype` at `base` in user memory.
#[derive(Clone)]
pub struct TypedBuf {
    base: *mut u8,
    pub count: usize,
    pub dtype: Arc<Datatype>,
}

// SAFETY: the pointer is only dereferenced under the MPI buffer rule stated
// in `new`; which thread completes the operation does not matter.
unsafe impl Send for TypedBuf {}
// SAFETY: shared references only read the pointer and the length (as for Send).
unsafe impl Sync for TypedBuf {}

impl TypedBuf {
    /// As an operation's data: a contiguous run as bytes (nothing to
    /// allocate), else this typed buffer.
    pub fn into_data(self) -> Data {
        match self.contiguous() {
            Some(b) => Data::Bytes(b),
            None => Data::of(self),
        }
    }

    /// # Safety
    /// Every byte the datatype's typemap names for `count` elements from
    /// `base` must be valid for reads (sends) or writes (receives) until the
    /// operation using this buffer completes.
    pub unsafe fn new(base: *mut u8, count: usize, dtype: Arc<Datatype>) -> TypedBuf {
        TypedBuf { base, count, dtype }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    pub fn bytes(&self) -> usize {
        self.count * self.dtype.size
    }

    /// The same datatype, `count` elements starting `first` elements in.
    pub fn slice(&self, first: usize, count: usize) -> TypedBuf {
        TypedBuf {
            base: self
                .base
                .wrapping_offset(first as isize * self.dtype.extent),
            count,
            dtype: self.dtype.clone(),
        }
    }

    fn raw(&self, off: isize, len: usize) -> RawBuf {
        // SAFETY: (off, len) is a run of this buffer's typemap, valid by `new`.
        unsafe { RawBuf::new(self.base.wrapping_offset(off), len) }
    }

    /// The elements' memory as one run, including any holes, from the true
    /// lower bound (used for reductions, which work in memory layout).
    pub fn span(&self) -> RawBuf {
        let (off, len) = self.dtype.span(self.count);
        self.raw(off, len)
    }

    /// Copies memory-layout bytes (see `span`) back, only into the typemap's
    /// runs (holes in the user's buffer are left untouched).
    pub fn store_span(&self, from: &[u8]) {
        let t0 = self.dtype.true_lb;
        for (off, len) in self.dtype.segments(self.count) {
            let s = (off - t0) as usize;
            self.raw(off, len).write_at(0, &from[s..s + len]);
        }
    }

    /// Copies the typemap's runs into a memory-layout buffer of `span` size.
    pub fn load_span(&self, into: &mut [u8]) {
        let t0 = self.dtype.true_lb;
        for (off, len) in self.dtype.segments(self.count) {
            let s = (off - t0) as usize;
            into[s..s + len].copy_from_slice(self.raw(off, len).as_slice());
        }
    }
}

impl Layout for TypedBuf {
    fn packed_len(&self) -> usize {
        self.bytes()
    }

    fn contiguous(&self) -> Option<RawBuf> {
        let (off, len) = self.dtype.contiguous_span(self.count)?;
        Some(if len == 0 {
            RawBuf::empty()
        } else {
            self.raw(off, len)
        })
    }

    fn pack(&self) -> Vec<u8> {
        // One run: a single copy instead of walking the elements.
        if let Some(run) = self.contiguous() {
            return run.as_slice().to_vec();
        }
        let mut out = Vec::with_capacity(self.bytes());
        for (off, len) in self.dtype.segments(self.count) {
            out.extend_from_slice(self.raw(off, len).as_slice());
        }
        out
    }

    fn unpack(&self, mut bytes: &[u8]) {
        if let Some(run) = self.contiguous() {
            let n = run.len().min(bytes.len());
            if n > 0 {
                run.write_at(0, &bytes[..n]);
            }
            return;
        }
        for (off, len) in self.dtype.segments(self.count) {
            if bytes.is_empty() {
                return;
            }
            let n = len.min(bytes.len());
            self.raw(off, n).write_at(0, &bytes[..n]);
            bytes = &bytes[n..];
        }
    }
}
