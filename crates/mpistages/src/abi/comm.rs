//! Communicators, groups and the predefined attributes.

use super::{array, array_mut, cstr, get, mpi, mpi_fn, put, put_str, ret};
use crate::api::attr::Kind;
use crate::api::consts::{err, COMM_NULL, COMM_WORLD, GROUP_EMPTY, GROUP_NULL, UNDEFINED};
use crate::api::consts::{
    KEY_APPNUM, KEY_HOST, KEY_IO, KEY_LASTUSEDCODE, KEY_TAG_UB, KEY_UNIVERSE_SIZE,
    KEY_WTIME_IS_GLOBAL, PROC_NULL, TAG_UB,
};
use crate::api::error::{fail, MpiResult};
use crate::api::group::{compare_comms, Group};
use crate::api::spawn::SpawnCommand;
use crate::api::{comm, Mpi};
use std::os::raw::{c_char, c_int, c_void};

/// `MPI_MAX_OBJECT_NAME`: name buffers hold this many bytes with the NUL.
pub const MAX_OBJECT_NAME: usize = 128;

mpi_fn!(fn MPI_Comm_rank / PMPI_Comm_rank(c: c_int, rank: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = mpi().and_then(|m| m.tables().comm(c)).and_then(|cm| unsafe { put(rank, cm.rank as c_int) });
    ret("MPI_Comm_rank", c, r)
});

mpi_fn!(fn MPI_Comm_size / PMPI_Comm_size(c: c_int, size: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = mpi().and_then(|m| m.tables().comm(c)).and_then(|cm| unsafe { put(size, cm.size() as c_int) });
    ret("MPI_Comm_size", c, r)
});

/// Runs a communicator constructor and writes its handle (`MPI_COMM_NULL`
/// when it fails).
pub(crate) fn new_comm(
    name: &str,
    parent: c_int,
    out: *mut c_int,
    f: impl FnOnce(&Mpi) -> MpiResult<i32>,
) -> c_int {
    let r = mpi().and_then(|m| {
        let h = f(m)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    if r.is_err() && !out.is_null() {
        // SAFETY: caller's out-pointer: no communicator was made.
        unsafe { out.write(COMM_NULL) };
    }
    ret(name, parent, r)
}

/// `MPI_Comm_dup` and its variants: the new communicator gets the
/// attributes the keys' copy callbacks give it.
fn dup_with_attrs(m: &Mpi, c: c_int) -> MpiResult<i32> {
    let h = comm::dup(m, c)?;
    if let Err(e) = super::attr::copy_all(m, Kind::Comm, c, h) {
        let _ = comm::free(m, h);
        return Err(e);
    }
    Ok(h)
}

mpi_fn!(fn MPI_Comm_dup / PMPI_Comm_dup(c: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_dup", c, out, |m| dup_with_attrs(m, c))
});

mpi_fn!(fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(c: c_int, info: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_dup_with_info", c, out, |m| {
        crate::api::info::get_or_empty(info)?;
        dup_with_attrs(m, c)
    })
});

// `MPI_Comm_idup`: the duplicate is made by the communicator's worker
// thread, as a non-blocking collective; `out` is written when it is done.
mpi_fn!(fn MPI_Comm_idup / PMPI_Comm_idup(c: c_int, out: *mut c_int, req: *mut c_int) {
    struct Out(*mut c_int);
    // SAFETY: the program keeps `out` valid until the request completes
    // and does not read it before.
    unsafe impl Send for Out {}
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if out.is_null() {
            return fail(err::ARG, "newcomm is NULL");
        }
        let dest = Out(out);
        let job: crate::api::nbc::Job = Box::new(move || {
            let dest = dest;
            let h = dup_with_attrs(m, c)?;
            // SAFETY: checked non-NULL; valid until completion (see Out).
            unsafe { dest.0.write(h) };
            Ok(())
        });
        let id = crate::api::nbc::start(m, c, cm.coll_context(), vec![(crate::api::Pin::Comm, c)], job);
        // SAFETY: caller's out-pointer.
        unsafe { put(req, super::request::handle(id)) }
    });
    ret("MPI_Comm_idup", c, r)
});

mpi_fn!(fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(c: c_int, info: c_int, out: *mut c_int, req: *mut c_int) {
    if let Err(e) = crate::api::info::get_or_empty(info) {
        return ret("MPI_Comm_idup_with_info", c, Err(e));
    }
    // SAFETY: the same contract as MPI_Comm_idup's.
    unsafe { PMPI_Comm_idup(c, out, req) }
});

mpi_fn!(fn MPI_Comm_split_type / PMPI_Comm_split_type(c: c_int, kind: c_int, key: c_int, info: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_split_type", c, out, |m| {
        comm::split_type(m, c, kind, key, info)
    })
});

mpi_fn!(fn MPI_Comm_create_group / PMPI_Comm_create_group(c: c_int, g: c_int, tag: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_create_group", c, out, |m| comm::create_group(m, c, g, tag))
});

/// The tag of `MPI_Comm_create_from_group`'s string tag (FNV-1a, within
/// the tags a send may use): processes that give the same string create
/// the same communicator, different strings keep concurrent creations
/// apart.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn string_tag(s: *const c_char) -> MpiResult<c_int> {
    // SAFETY: forwarded.
    let text = unsafe { cstr(s)? };
    if text.len() > 255 {
        return fail(
            err::ARG,
            "the string tag is longer than MPI_MAX_STRINGTAG_LEN",
        );
    }
    let mut h: u32 = 0x811c9dc5;
    for b in text.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x01000193);
    }
    Ok((h & 0x3fff_ffff) as c_int)
}

/// A communicator of the processes of group `g`, made among them alone
/// (MPI 4.0; here through the job's world), with error handler `eh`.
fn from_group(m: &Mpi, g: c_int, tag: c_int, info: c_int, eh: c_int) -> MpiResult<i32> {
    crate::api::info::get_or_empty(info)?;
    // A process outside every group asks with the empty one (MPI 4.0).
    if m.tables().group(g)?.members.is_empty() {
        return Ok(crate::api::consts::COMM_NULL);
    }
    let h = comm::create_group(m, crate::api::consts::COMM_WORLD, g, tag)?;
    if eh != crate::api::consts::ERRHANDLER_NULL {
        // SAFETY: plain handles.
        let rc = unsafe { super::errors::PMPI_Comm_set_errhandler(h, eh) };
        if rc != err::SUCCESS {
            return fail(rc, format!("error handler {eh} for the new communicator"));
        }
    }
    Ok(h)
}

mpi_fn!(fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(g: c_int, stringtag: *const c_char,
        info: c_int, eh: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_create_from_group", COMM_WORLD, out, |m| {
        // SAFETY: caller's string.
        let tag = unsafe { string_tag(stringtag)? };
        from_group(m, g, tag, info, eh)
    })
});

mpi_fn!(fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local: c_int, local_leader: c_int,
        remote: c_int, remote_leader: c_int, stringtag: *const c_char, info: c_int, eh: c_int, out: *mut c_int) {
    new_comm("MPI_Intercomm_create_from_groups", COMM_WORLD, out, |m| {
        // SAFETY: caller's string.
        let tag = unsafe { string_tag(stringtag)? };
        let leader = m.tables().group(remote)?.members.get(usize::try_from(remote_leader).unwrap_or(usize::MAX)).copied();
        let Some(leader) = leader else {
            return fail(err::RANK, format!("remote leader {remote_leader} is not in the remote group"));
        };
        let mine = from_group(m, local, tag, info, crate::api::consts::ERRHANDLER_NULL)?;
        let made = comm::intercomm_create(m, mine, local_leader, COMM_WORLD, leader as i32, tag);
        // The local communicator served its turn.
        let mut h = mine;
        // SAFETY: a local handle.
        unsafe { PMPI_Comm_free(&mut h) };
        let made = made?;
        if eh != crate::api::consts::ERRHANDLER_NULL {
            // SAFETY: plain handles.
            unsafe { super::errors::PMPI_Comm_set_errhandler(made, eh) };
        }
        Ok(made)
    })
});

mpi_fn!(fn MPI_Intercomm_create / PMPI_Intercomm_create(local: c_int, local_leader: c_int, peer: c_int, remote_leader: c_int, tag: c_int, out: *mut c_int) {
    new_comm("MPI_Intercomm_create", local, out, |m| comm::intercomm_create(m, local, local_leader, peer, remote_leader, tag))
});

mpi_fn!(fn MPI_Intercomm_merge / PMPI_Intercomm_merge(c: c_int, high: c_int, out: *mut c_int) {
    new_comm("MPI_Intercomm_merge", c, out, |m| comm::intercomm_merge(m, c, high != 0))
});

mpi_fn!(fn MPI_Comm_test_inter / PMPI_Comm_test_inter(c: c_int, flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = mpi().and_then(|m| m.tables().comm(c)).and_then(|cm| unsafe { put(flag, cm.is_inter() as c_int) });
    ret("MPI_Comm_test_inter", c, r)
});

fn remote_group(m: &Mpi, c: c_int) -> MpiResult<std::sync::Arc<Group>> {
    match m.tables().comm(c)?.remote.clone() {
        Some(g) => Ok(g),
        None => fail(err::COMM, "the communicator is not an inter-communicator"),
    }
}

mpi_fn!(fn MPI_Comm_remote_size / PMPI_Comm_remote_size(c: c_int, size: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = mpi().and_then(|m| remote_group(m, c)).and_then(|g| unsafe { put(size, g.size() as c_int) });
    ret("MPI_Comm_remote_size", c, r)
});

mpi_fn!(fn MPI_Comm_remote_group / PMPI_Comm_remote_group(c: c_int, out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let g = (*remote_group(m, c)?).clone();
        let h = m.tables().add_group(g);
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    ret("MPI_Comm_remote_group", c, r)
});

mpi_fn!(fn MPI_Comm_set_name / PMPI_Comm_set_name(c: c_int, name: *const c_char) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's NUL-terminated string.
        let n = unsafe { cstr(name)? };
        let mut t = m.tables();
        t.comm(c)?;
        t.comms[c as usize].as_mut().expect("checked").name = truncate_name(n);
        Ok(())
    });
    ret("MPI_Comm_set_name", c, r)
});

/// Names longer than `MPI_MAX_OBJECT_NAME - 1` characters are cut there.
pub(super) fn truncate_name(mut n: String) -> String {
    let max = MAX_OBJECT_NAME - 1;
    if n.len() > max {
        let mut end = max;
        while !n.is_char_boundary(end) {
            end -= 1;
        }
        n.truncate(end);
    }
    n
}

mpi_fn!(fn MPI_Comm_get_name / PMPI_Comm_get_name(c: c_int, name: *mut c_char, len: *mut c_int) {
    let r = mpi().and_then(|m| {
        let n = {
            let t = m.tables();
            t.comm(c)?;
            t.comms[c as usize].as_ref().expect("checked").name.clone()
        };
        // SAFETY: the standard sizes `name` as MPI_MAX_OBJECT_NAME.
        unsafe { put_str(&n, name, MAX_OBJECT_NAME, len) }
    });
    ret("MPI_Comm_get_name", c, r)
});

mpi_fn!(fn MPI_Comm_set_info / PMPI_Comm_set_info(c: c_int, info: c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        crate::api::info::get_or_empty(info).map(|_| ())
    });
    ret("MPI_Comm_set_info", c, r)
});

// No hint changes what mpistages does, so the info in use is empty.
mpi_fn!(fn MPI_Comm_get_info / PMPI_Comm_get_info(c: c_int, out: *mut c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        let h = crate::api::info::add(Default::default());
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    ret("MPI_Comm_get_info", c, r)
});

mpi_fn!(fn MPI_Comm_split / PMPI_Comm_split(c: c_int, color: c_int, key: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_split", c, out, |m| comm::split(m, c, color, key))
});

mpi_fn!(fn MPI_Comm_create / PMPI_Comm_create(c: c_int, g: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_create", c, out, |m| comm::create(m, c, g))
});

/// `MPI_Comm_free`, and the end of `MPI_Comm_disconnect`.
///
/// # Safety
/// `c` is the caller's in/out handle pointer.
unsafe fn free_comm(m: &Mpi, c: *mut c_int) -> MpiResult<()> {
    // SAFETY: by the caller's contract.
    let h = unsafe { get(c)? };
    m.tables().comm(h)?;
    if h != COMM_WORLD && h != crate::api::consts::COMM_SELF {
        super::attr::delete_all(m, Kind::Comm, h)?;
    }
    comm::free(m, h)?;
    // SAFETY: as above.
    unsafe { put(c, COMM_NULL) }
}

mpi_fn!(fn MPI_Comm_free / PMPI_Comm_free(c: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let r = mpi().and_then(|m| unsafe { free_comm(m, c) });
    ret("MPI_Comm_free", COMM_WORLD, r)
});

// Collective: every member's pending communication on the communicator
// has completed when all have entered (the program completes its requests
// first, as the standard requires of it), so a barrier over it, then the
// free. A disconnected parent is gone for MPI_Comm_get_parent.
mpi_fn!(fn MPI_Comm_disconnect / PMPI_Comm_disconnect(c: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let h = match unsafe { get(c) } { Ok(h) => h, Err(e) => return ret("MPI_Comm_disconnect", COMM_WORLD, Err(e)) };
    let r = mpi().and_then(|m| {
        if h == COMM_WORLD || h == crate::api::consts::COMM_SELF {
            return crate::api::error::fail(crate::api::consts::err::COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected");
        }
        let cm = m.tables().comm(h)?;
        if cm.is_inter() {
            super::intercoll::barrier(m, &cm)?;
        } else {
            crate::api::collective::barrier(m, &cm)?;
        }
        // SAFETY: as above.
        unsafe { free_comm(m, c) }
    });
    ret("MPI_Comm_disconnect", h, r)
});

mpi_fn!(fn MPI_Comm_compare / PMPI_Comm_compare(a: c_int, b: c_int, result: *mut c_int) {
    let r = mpi().and_then(|m| {
        let (ca, cb) = {
            let t = m.tables();
            (t.comm(a)?, t.comm(b)?)
        };
        let v = compare_comms(a == b, ca.context == cb.context, &ca.group, &cb.group);
        // SAFETY: caller's out-pointer.
        unsafe { put(result, v) }
    });
    ret("MPI_Comm_compare", a, r)
});

mpi_fn!(fn MPI_Comm_group / PMPI_Comm_group(c: c_int, g: *mut c_int) {
    let r = mpi().and_then(|m| {
        let mut t = m.tables();
        let grp = (*t.comm(c)?.group).clone();
        let h = t.add_group(grp);
        // SAFETY: caller's out-pointer.
        unsafe { put(g, h) }
    });
    ret("MPI_Comm_group", c, r)
});

/// The predefined attributes. Values are returned as a pointer to an int
/// that lives as long as the program (as MPI requires).
static TAG_UB_VAL: c_int = TAG_UB;
static WTIME_GLOBAL_VAL: c_int = 0;
static HOST_VAL: c_int = PROC_NULL;
static IO_VAL: c_int = crate::api::consts::ANY_SOURCE;
static APPNUM_VAL: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
static UNIVERSE: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
static FT_ON: c_int = 1;
static FT_OFF: c_int = 0;

mpi_fn!(fn MPI_Comm_get_attr / PMPI_Comm_get_attr(c: c_int, key: c_int, value: *mut c_void, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        let p: Option<&'static c_int> = match key {
            KEY_TAG_UB => Some(&TAG_UB_VAL),
            KEY_WTIME_IS_GLOBAL => Some(&WTIME_GLOBAL_VAL),
            KEY_HOST => Some(&HOST_VAL),
            KEY_IO => Some(&IO_VAL),
            KEY_APPNUM => Some(APPNUM_VAL.get_or_init(crate::api::spawn::appnum)),
            KEY_UNIVERSE_SIZE => Some(UNIVERSE.get_or_init(|| m.size as c_int)),
            KEY_LASTUSEDCODE => Some(super::errors::last_used_code()),
            crate::api::consts::KEY_FT => Some(if m.mode == crate::api::RecoveryMode::Ulfm { &FT_ON } else { &FT_OFF }),
            k if super::attr::is_user_key(k) => {
                let v = super::attr::get_value(Kind::Comm, c, k)?;
                // SAFETY: the standard's `void **` and int* out-pointers.
                return unsafe { super::attr::put_c_attr(v, value, flag) };
            }
            _ => return fail(err::KEYVAL, format!("attribute key {key} is not known")),
        };
        // SAFETY: `value` is a `void **` by the standard's signature; `flag` an int*.
        unsafe {
            put(flag, p.is_some() as c_int)?;
            if let Some(p) = p {
                put(value as *mut *const c_int, p as *const c_int)?;
            }
        }
        Ok(())
    });
    ret("MPI_Comm_get_attr", c, r)
});

mpi_fn!(fn MPI_Attr_get / PMPI_Attr_get(c: c_int, key: c_int, value: *mut c_void, flag: *mut c_int) {
    // SAFETY: same contract as MPI_Comm_get_attr.
    unsafe { PMPI_Comm_get_attr(c, key, value, flag) }
});

fn group_of(m: &Mpi, h: c_int) -> MpiResult<std::sync::Arc<Group>> {
    m.tables().group(h)
}

mpi_fn!(fn MPI_Group_size / PMPI_Group_size(g: c_int, size: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = mpi().and_then(|m| group_of(m, g)).and_then(|gr| unsafe { put(size, gr.size() as c_int) });
    ret("MPI_Group_size", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Group_rank / PMPI_Group_rank(g: c_int, rank: *mut c_int) {
    let r = mpi().and_then(|m| {
        let gr = group_of(m, g)?;
        let v = gr.rank_of(m.rank).map_or(UNDEFINED, |x| x as c_int);
        // SAFETY: caller's out-pointer.
        unsafe { put(rank, v) }
    });
    ret("MPI_Group_rank", COMM_WORLD, r)
});

fn new_group(name: &str, out: *mut c_int, f: impl FnOnce(&Mpi) -> MpiResult<Group>) -> c_int {
    let r = mpi().and_then(|m| {
        let g = f(m)?;
        let h = if g.members.is_empty() {
            GROUP_EMPTY
        } else {
            m.tables().add_group(g)
        };
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    ret(name, COMM_WORLD, r)
}

mpi_fn!(fn MPI_Group_incl / PMPI_Group_incl(g: c_int, n: c_int, ranks: *const c_int, out: *mut c_int) {
    new_group("MPI_Group_incl", out, |m| {
        // SAFETY: caller's array of n ranks.
        let rs = unsafe { array(ranks, super::count(n)?)? };
        group_of(m, g)?.incl(rs)
    })
});

mpi_fn!(fn MPI_Group_excl / PMPI_Group_excl(g: c_int, n: c_int, ranks: *const c_int, out: *mut c_int) {
    new_group("MPI_Group_excl", out, |m| {
        // SAFETY: caller's array of n ranks.
        let rs = unsafe { array(ranks, super::count(n)?)? };
        group_of(m, g)?.excl(rs)
    })
});

/// # Safety
/// `ranges` holds `n` triplets.
unsafe fn range_group(
    m: &Mpi,
    g: c_int,
    n: c_int,
    ranges: *const [c_int; 3],
    incl: bool,
) -> MpiResult<Group> {
    // SAFETY: forwarded from this function's contract.
    let rs = unsafe { array(ranges, super::count(n)?)? };
    let gr = group_of(m, g)?;
    let ranks = gr.range_ranks(rs)?;
    if incl {
        gr.incl(&ranks)
    } else {
        gr.excl(&ranks)
    }
}

mpi_fn!(fn MPI_Group_range_incl / PMPI_Group_range_incl(g: c_int, n: c_int, ranges: *const [c_int; 3], out: *mut c_int) {
    // SAFETY: caller's array of n triplets.
    new_group("MPI_Group_range_incl", out, |m| unsafe { range_group(m, g, n, ranges, true) })
});

mpi_fn!(fn MPI_Group_range_excl / PMPI_Group_range_excl(g: c_int, n: c_int, ranges: *const [c_int; 3], out: *mut c_int) {
    // SAFETY: caller's array of n triplets.
    new_group("MPI_Group_range_excl", out, |m| unsafe { range_group(m, g, n, ranges, false) })
});

mpi_fn!(fn MPI_Group_union / PMPI_Group_union(a: c_int, b: c_int, out: *mut c_int) {
    new_group("MPI_Group_union", out, |m| Ok(group_of(m, a)?.union(&*group_of(m, b)?)))
});

mpi_fn!(fn MPI_Group_intersection / PMPI_Group_intersection(a: c_int, b: c_int, out: *mut c_int) {
    new_group("MPI_Group_intersection", out, |m| Ok(group_of(m, a)?.intersection(&*group_of(m, b)?)))
});

mpi_fn!(fn MPI_Group_difference / PMPI_Group_difference(a: c_int, b: c_int, out: *mut c_int) {
    new_group("MPI_Group_difference", out, |m| Ok(group_of(m, a)?.difference(&*group_of(m, b)?)))
});

mpi_fn!(fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(a: c_int, n: c_int, ranks: *const c_int, b: c_int, out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let rs = unsafe { array(ranks, n)? };
        let v = group_of(m, a)?.translate(rs, &*group_of(m, b)?)?;
        // SAFETY: caller's arrays of the stated number of elements.
        let o = unsafe { array_mut(out, n)? };
        o.copy_from_slice(&v);
        Ok(())
    });
    ret("MPI_Group_translate_ranks", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Group_compare / PMPI_Group_compare(a: c_int, b: c_int, result: *mut c_int) {
    let r = mpi().and_then(|m| {
        let v = group_of(m, a)?.compare(&*group_of(m, b)?);
        // SAFETY: caller's out-pointer.
        unsafe { put(result, v) }
    });
    ret("MPI_Group_compare", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Group_free / PMPI_Group_free(g: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer.
        let h = unsafe { get(g)? };
        let mut t = m.tables();
        t.group(h)?;
        if h != GROUP_EMPTY {
            t.groups[h as usize] = None;
        }
        // SAFETY: as above.
        unsafe { put(g, GROUP_NULL) }
    });
    ret("MPI_Group_free", COMM_WORLD, r)
});

/// The strings of a NULL-terminated `argv` (none for `MPI_ARGV_NULL`).
///
/// # Safety
/// `argv` is NULL or a NULL-terminated array of C strings.
unsafe fn argv_of(argv: *const *const c_char) -> MpiResult<Vec<String>> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    for i in 0.. {
        // SAFETY: the array is NULL-terminated (caller's contract); i stops there.
        let p = unsafe { *argv.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: a C string of the caller's array.
        out.push(unsafe { cstr(p) }?);
    }
    Ok(out)
}

/// `MPI_Comm_spawn` and `MPI_Comm_spawn_multiple`: `request` (called at
/// the root only) reads the root's commands; `asked` is how many processes
/// the caller's `array_of_errcodes` holds when nothing was started.
fn spawn_from(
    name: &str,
    c: c_int,
    root: c_int,
    out: *mut c_int,
    errcodes: *mut c_int,
    asked: usize,
    request: impl FnOnce() -> MpiResult<crate::api::spawn::Request>,
) -> c_int {
    let mut spawned = 0usize;
    let code = new_comm(name, c, out, |m| {
        let cm = m.tables().comm(c)?;
        let root = usize::try_from(root).map_err(|_| {
            crate::api::error::MpiError::new(err::ROOT, format!("root {root} is negative"))
        })?;
        let request = if cm.rank == root {
            Some(request()?)
        } else {
            None
        };
        let inter = crate::api::spawn::spawn(m, &cm, root, request)?;
        spawned = inter.remote.as_ref().map_or(0, |g| g.size());
        Ok(comm::register(m, c, inter))
    });
    if !errcodes.is_null() {
        // One code per process asked for (the root's counts).
        let n = if spawned > 0 { spawned } else { asked };
        let v = if code == err::SUCCESS {
            err::SUCCESS
        } else {
            err::SPAWN
        };
        for i in 0..n {
            // SAFETY: the caller's array of one code per process asked for.
            unsafe { errcodes.add(i).write(v) };
        }
    }
    code
}

fn maxprocs_of(n: c_int) -> MpiResult<u32> {
    u32::try_from(n).or_else(|_| fail(err::ARG, format!("maxprocs {n} is negative")))
}

mpi_fn!(fn MPI_Comm_spawn / PMPI_Comm_spawn(command: *const c_char, argv: *const *const c_char, maxprocs: c_int, info: c_int, root: c_int, c: c_int, out: *mut c_int, errcodes: *mut c_int) {
    let asked = usize::try_from(maxprocs).unwrap_or(0);
    spawn_from("MPI_Comm_spawn", c, root, out, errcodes, asked, || {
        crate::api::info::get_or_empty(info)?;
        Ok(vec![SpawnCommand {
            // SAFETY: the caller's C string.
            program: unsafe { cstr(command) }?,
            // SAFETY: the caller's NULL-terminated argv (or MPI_ARGV_NULL).
            args: unsafe { argv_of(argv) }?,
            count: maxprocs_of(maxprocs)?,
        }])
    })
});

mpi_fn!(fn MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple(count: c_int, commands: *const *const c_char, argvs: *const *const *const c_char, maxprocs: *const c_int, infos: *const c_int, root: c_int, c: c_int, out: *mut c_int, errcodes: *mut c_int) {
    // (The counts are the root's: elsewhere they need not be valid.)
    let asked = || -> MpiResult<usize> {
        let n = usize::try_from(count).unwrap_or(0);
        // SAFETY: the caller's array of `count` maxprocs.
        let v = unsafe { array(maxprocs, n) }?;
        Ok(v.iter().map(|&k| usize::try_from(k).unwrap_or(0)).sum())
    };
    let is_root = mpi().and_then(|m| m.tables().comm(c)).is_ok_and(|cm| cm.rank as c_int == root);
    let asked = if is_root { asked().unwrap_or(0) } else { 0 };
    spawn_from("MPI_Comm_spawn_multiple", c, root, out, errcodes, asked, || {
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| crate::api::error::MpiError::new(err::ARG, format!("count {count} of commands")))?;
        // SAFETY: the caller's arrays of `count` elements.
        let (cmds, procs, infos) = unsafe { (array(commands, n)?, array(maxprocs, n)?, array(infos, n)?) };
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            crate::api::info::get_or_empty(infos[i])?;
            // SAFETY: MPI_ARGVS_NULL, or the caller's `count` argv arrays.
            let argv = if argvs.is_null() { std::ptr::null() } else { unsafe { *argvs.add(i) } };
            out.push(SpawnCommand {
                // SAFETY: the caller's C string.
                program: unsafe { cstr(cmds[i]) }?,
                // SAFETY: a NULL-terminated argv (or MPI_ARGV_NULL).
                args: unsafe { argv_of(argv) }?,
                count: maxprocs_of(procs[i])?,
            });
        }
        Ok(out)
    })
});

mpi_fn!(fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut c_int) {
    let r = mpi().and_then(|m| {
        let t = m.tables();
        // A parent the program freed is gone.
        let h = if t.comm(t.parent).is_ok() { t.parent } else { COMM_NULL };
        drop(t);
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(parent, h) }
    });
    ret("MPI_Comm_get_parent", COMM_WORLD, r)
});
