//! The memory of `MPI_Win_allocate_shared`: one anonymous segment
//! (memfd) the first member makes, sized for every member's share one
//! after the other, which the others open through `/proc/PID/fd/N` and
//! every member maps. Nothing is left behind by a crash: the segment has
//! no name in any file system, and goes when the last mapping does.

use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::file::agree;
use crate::coll::{self, Team};
use crate::transport::RawBuf;

/// The mapped segment and each member's share's address in it.
pub struct Segment {
    pub bases: Vec<usize>,
    /// `None` when no member asked for memory.
    pub map: Option<memmap2::MmapMut>,
}

/// Maps the segment for members of `sizes[r].0` bytes each (collective);
/// `hosts` are the members' host indices (`comm::host_indices`).
pub fn map(team: &Team, hosts: &[usize], sizes: &[(usize, usize)]) -> MpiResult<Segment> {
    if hosts.iter().any(|&h| h != hosts[0]) {
        return fail(
            err::RMA_SHARED,
            "the communicator spans more than one host: a shared window needs one (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED makes such a communicator)",
        );
    }
    let offsets: Vec<usize> = sizes
        .iter()
        .scan(0, |at, &(s, _)| {
            let o = *at;
            *at += s;
            Some(o)
        })
        .collect();
    let total: usize = sizes.iter().map(|s| s.0).sum();
    if total == 0 {
        return Ok(Segment {
            bases: vec![0; sizes.len()],
            map: None,
        });
    }
    let no_mem = |what: &str, e: std::io::Error| {
        MpiError::new(
            err::NO_MEM,
            format!("{what} a shared segment of {total} bytes: {e}"),
        )
    };
    let made = if team.rank == 0 {
        crate::sys::fdpass::memfd("mpistages-win", total as u64)
            .map(Some)
            .map_err(|e| no_mem("cannot make", e))
    } else {
        Ok(None)
    };
    agree(team, &made.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let made = made?;
    // The first member's process and descriptor name the segment.
    let mut id = [0u8; 8];
    if let Some(f) = &made {
        use std::os::fd::AsRawFd;
        id[..4].copy_from_slice(&std::process::id().to_le_bytes());
        id[4..].copy_from_slice(&f.as_raw_fd().to_le_bytes());
    }
    // SAFETY: `id` outlives the blocking broadcast.
    coll::bcast(team, 0, unsafe { RawBuf::new(id.as_mut_ptr(), 8) })?;
    let file = match made {
        Some(f) => Ok(f),
        None => {
            let pid = u32::from_le_bytes(id[..4].try_into().expect("4 bytes"));
            let fd = i32::from_le_bytes(id[4..].try_into().expect("4 bytes"));
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{pid}/fd/{fd}"))
                .map_err(|e| no_mem("cannot open", e))
        }
    };
    agree(team, &file.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let file = file?;
    // SAFETY: shared memory: the segment's length is fixed (set before it
    // was shared) and it lives as long as the mapping; what members store
    // in it concurrently is the program's business under MPI's rules for
    // shared windows, as with any shared memory.
    let map = unsafe { memmap2::MmapOptions::new().len(total).map_mut(&file) }
        .map_err(|e| no_mem("cannot map", e));
    agree(team, &map.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let mut map = map?;
    let at = map.as_mut_ptr() as usize;
    Ok(Segment {
        bases: offsets.iter().map(|o| at + o).collect(),
        map: Some(map),
    })
}
