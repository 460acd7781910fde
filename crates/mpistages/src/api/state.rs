//! The API layer's part of the Stages seam: its tables (communicators,
//! groups, derived datatypes, error handlers) to and from `MpiState`.
//! Handles keep their integer values across a save and a load. User
//! operations (`MPI_Op_create`) hold code addresses, which differ in a new
//! process: they are not saved and must be created again after a restore.

use super::consts::{dt, err};
use super::datatype::Datatype;
use super::error::{MpiError, MpiResult};
use super::group::Group;
use super::{Comm, CommEntry, Tables};
use crate::stages::state::{CommState, LibraryHandles, MpiState, STATE_VERSION};
use std::sync::Arc;

pub fn save(
    t: &Tables,
    rank: usize,
    size: usize,
    epoch: u64,
    library: &[LibraryHandles],
) -> MpiState {
    MpiState {
        version: STATE_VERSION,
        rank: rank as u32,
        size: size as u32,
        epoch,
        max_context: t.max_context,
        comms: t
            .comms
            .iter()
            .map(|c| {
                c.as_ref().map(|e| CommState {
                    context: e.comm.context,
                    members: e.comm.group.members.iter().map(|&m| m as u32).collect(),
                    errhandler: e.errhandler,
                    name: e.name.clone(),
                    remote: e
                        .comm
                        .remote
                        .as_ref()
                        .map(|g| g.members.iter().map(|&m| m as u32).collect()),
                    topology: e
                        .comm
                        .topo
                        .as_ref()
                        .map(|t| postcard::to_stdvec(&**t).expect("topologies always serialize")),
                })
            })
            .collect(),
        groups: t
            .groups
            .iter()
            .map(|g| {
                g.as_ref()
                    .map(|g| g.members.iter().map(|&m| m as u32).collect())
            })
            .collect(),
        types: t
            .types
            .iter()
            .enumerate()
            .skip(dt::FIRST_DERIVED as usize)
            .filter_map(|(h, ty)| {
                ty.as_ref().map(|ty| {
                    (
                        h as i32,
                        postcard::to_stdvec(&**ty).expect("datatypes always serialize"),
                    )
                })
            })
            .collect(),
        library: library.to_vec(),
    }
}

/// Replaces the tables' communicators, groups and derived datatypes with
/// the saved ones. Nothing changes if any part is invalid.
pub fn load(t: &mut Tables, st: &MpiState, rank: usize) -> MpiResult<()> {
    let bad = |why: String| MpiError::new(err::OTHER, format!("restoring MPI state: {why}"));
    let me = rank as u32;
    let mut comms = Vec::with_capacity(st.comms.len());
    for c in &st.comms {
        comms.push(match c {
            None => None,
            Some(c) => {
                let pos =
                    c.members.iter().position(|&m| m == me).ok_or_else(|| {
                        bad("a saved communicator does not contain this rank".into())
                    })?;
                let group = |v: &[u32]| {
                    Arc::new(Group {
                        members: v.iter().map(|&m| m as usize).collect(),
                    })
                };
                let topo = match &c.topology {
                    None => None,
                    Some(b) => Some(Arc::new(postcard::from_bytes(b).map_err(|e| {
                        bad(format!("a saved communicator's topology is malformed: {e}"))
                    })?)),
                };
                Some(CommEntry {
                    comm: Arc::new(Comm {
                        context: c.context,
                        group: group(&c.members),
                        rank: pos,
                        remote: c.remote.as_deref().map(group),
                        topo,
                    }),
                    errhandler: c.errhandler,
                    name: c.name.clone(),
                })
            }
        });
    }
    let groups = st
        .groups
        .iter()
        .map(|g| {
            g.as_ref().map(|g| {
                Arc::new(Group {
                    members: g.iter().map(|&m| m as usize).collect(),
                })
            })
        })
        .collect();
    let mut types: Vec<Option<Arc<Datatype>>> = t
        .types
        .iter()
        .take(dt::FIRST_DERIVED as usize)
        .cloned()
        .collect();
    for (h, bytes) in &st.types {
        let h = usize::try_from(*h)
            .ok()
            .filter(|&h| h >= dt::FIRST_DERIVED as usize && h < 1 << 20)
            .ok_or_else(|| bad("a saved datatype has an invalid handle".into()))?;
        let ty: Datatype = postcard::from_bytes(bytes)
            .map_err(|e| bad(format!("a saved datatype is malformed: {e}")))?;
        if !ty.is_consistent() {
            return Err(bad(format!("saved datatype {} is inconsistent", ty.name)));
        }
        if types.len() <= h {
            types.resize(h + 1, None);
        }
        types[h] = Some(Arc::new(ty));
    }
    t.comms = comms;
    t.groups = groups;
    t.types = types;
    t.max_context = st.max_context;
    t.forget_in_flight();
    Ok(())
}
