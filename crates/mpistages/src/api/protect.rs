//! Application data in checkpoints: regions registered with
//! `MPIX_Protect` (FTI / VeloC style) and files routed with
//! `MPIX_Checkpoint_route` (SCR style). Both are saved by
//! `MPIX_Checkpoint_write` with the MPI state; `MPIX_Checkpoint_restore`
//! and `MPIX_Checkpoint_locate` give back the fault epoch's copies.

use super::consts::err;
use super::error::{fail, stages_error, MpiError, MpiResult};
use super::mpix::check_running;
use super::usermem::TypedBuf;
use super::Mpi;
use crate::checkpoint::format::{Kind, Section, SectionData, SectionRef};
use crate::progress::Layout;
use crate::stages::StagesError;
use crate::stages::ToRestore;
use crate::transport::RawBuf;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

/// The registered regions by id.
#[derive(Default)]
pub struct Regions(Mutex<BTreeMap<i32, TypedBuf>>);

impl Regions {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<i32, TypedBuf>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn check_id(id: i32) -> MpiResult<()> {
    if id < 0 {
        return fail(
            err::ARG,
            format!("region id {id} is negative (ids are 0 or more)"),
        );
    }
    Ok(())
}

/// `MPIX_Protect`: registers `buf` under `id`, replacing an earlier
/// registration of the same id.
pub fn protect(m: &Mpi, id: i32, buf: TypedBuf) -> MpiResult<()> {
    check_id(id)?;
    m.regions.lock().insert(id, buf);
    Ok(())
}

/// `MPIX_Unprotect`.
pub fn unprotect(m: &Mpi, id: i32) -> MpiResult<()> {
    check_id(id)?;
    match m.regions.lock().remove(&id) {
        Some(buf) => {
            let_go(&buf);
            Ok(())
        }
        None => fail(err::ARG, format!("no region is protected with id {id}")),
    }
}

/// Forgets every region (the state right after `MPI_Init`).
pub fn unprotect_all(m: &Mpi) {
    for (_, buf) in std::mem::take(&mut *m.regions.lock()) {
        let_go(&buf);
    }
}

/// A region's memory is the program's again: a snapshot of it under way
/// finishes first (the program may free it next).
fn let_go(buf: &TypedBuf) {
    if let Some(run) = buf.contiguous() {
        crate::checkpoint::snapshot::unprotected(run.ptr() as usize, run.len());
    }
}

/// A protected region's bytes for a checkpoint: the application's memory
/// itself when the region is one run (directory levels write it without a
/// copy), else packed.
pub enum RegionBytes {
    User(RawBuf),
    Packed(Vec<u8>),
}

impl RegionBytes {
    pub fn bytes(&self) -> &[u8] {
        match self {
            RegionBytes::User(b) => b.as_slice(),
            RegionBytes::Packed(v) => v,
        }
    }
}

/// Every registered region's id and current bytes, packed where a derived
/// datatype has holes (which are not saved); valid during the checkpoint
/// call: the application does not change or free its regions meanwhile.
pub fn regions(m: &Mpi) -> Vec<(u64, RegionBytes)> {
    m.regions
        .lock()
        .iter()
        .map(|(&id, buf)| {
            let bytes = match buf.contiguous() {
                Some(run) => RegionBytes::User(run),
                None => RegionBytes::Packed(buf.pack()),
            };
            (id as u64, bytes)
        })
        .collect()
}

/// `regions` as sections to write.
pub fn sections(regions: &[(u64, RegionBytes)]) -> Vec<SectionRef<'_>> {
    regions
        .iter()
        .map(|(id, b)| SectionRef {
            kind: Kind::Protected,
            id: *id,
            name: "",
            data: b.bytes(),
            program: matches!(b, RegionBytes::User(_)),
        })
        .collect()
}

fn stage_err(call: &str) -> impl Fn(StagesError) -> MpiError + '_ {
    move |e| stages_error(call, e)
}

/// `MPIX_Checkpoint_restore`: copies the fault epoch's data back into
/// every registered region. Every region is checked first; on any mismatch
/// nothing is written.
pub fn restore(m: &Mpi) -> MpiResult<()> {
    check_running(m)?;
    let (epoch, mut to) = {
        let mut st = m.stages();
        let to = st
            .sections_to_restore()
            .map_err(stage_err("MPIX_Checkpoint_restore"))?;
        (st.epoch, to)
    };
    let regions = m.regions.lock();
    let saved: BTreeMap<u64, usize> = (to.sections().iter().enumerate())
        .filter(|(_, s)| s.kind == Kind::Protected)
        .map(|(i, s)| (s.id, i))
        .collect();
    let mut plan = Vec::with_capacity(regions.len());
    for (&id, buf) in regions.iter() {
        let Some(&i) = saved.get(&(id as u64)) else {
            return fail(
                err::ARG,
                format!("MPIX_Checkpoint_restore: region {id} is not in checkpoint epoch {epoch} (it was protected after that checkpoint); nothing was restored"),
            );
        };
        let len = to.sections()[i].data.len();
        if len != buf.bytes() {
            return fail(
                err::ARG,
                format!(
                    "MPIX_Checkpoint_restore: region {id} is registered with {} bytes but checkpoint epoch {epoch} saved {len} bytes; nothing was restored",
                    buf.bytes(),
                ),
            );
        }
        plan.push((buf, i));
    }
    match &mut to {
        ToRestore::Owned(sections) => {
            for (buf, i) in plan {
                give_or_copy(buf, &mut sections[i]);
            }
        }
        ToRestore::Shared(sections) => {
            for (buf, i) in plan {
                buf.unpack(&sections[i].data);
            }
        }
    }
    drop(regions);
    if let ToRestore::Owned(sections) = to {
        m.stages().give_back(sections);
    }
    Ok(())
}

/// Restores region `buf` from `s`, of the same length: by giving it the
/// pages of the copy when both are one run in pages at the same offset
/// (no byte is copied but those of the partial pages at its ends), else
/// by copying.
fn give_or_copy(buf: &TypedBuf, s: &mut Section) {
    if let (Some(run), SectionData::Pages(pages)) = (buf.contiguous(), &mut s.data) {
        if let Some(pages) = Arc::get_mut(pages) {
            // SAFETY: `run` is the program's region, of the copy's length
            // (checked by the caller), registered with MPIX_Protect: the
            // program keeps it mapped and does not touch it while it is in
            // MPIX_Checkpoint_restore; nothing of ours reads it meanwhile.
            match unsafe { pages.give_to(run.ptr()) } {
                Ok(()) => {
                    log::debug!(
                        "mpistages: region of {} bytes restored by exchanging pages",
                        run.len()
                    );
                    return;
                }
                Err(e) => log::debug!(
                    "mpistages: region of {} bytes restored by a copy: {e}",
                    run.len()
                ),
            }
        }
    }
    buf.unpack(&s.data);
}

/// `MPIX_Checkpoint_route`: where to write `name` so that it joins the
/// next checkpoint.
pub fn route(m: &Mpi, name: &str) -> MpiResult<PathBuf> {
    m.stages()
        .files
        .route(name)
        .map_err(stage_err("MPIX_Checkpoint_route"))
}

/// `MPIX_Checkpoint_locate`: a path holding the fault epoch's copy of `name`.
pub fn locate(m: &Mpi, name: &str) -> MpiResult<PathBuf> {
    check_running(m)?;
    let mut st = m.stages();
    let epoch = st.epoch;
    let sections = st
        .fault_sections()
        .map_err(stage_err("MPIX_Checkpoint_locate"))?;
    st.files
        .locate(name, epoch, &sections)
        .map_err(stage_err("MPIX_Checkpoint_locate"))
}
