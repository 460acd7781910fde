//! Communicators, groups and the predefined attributes.

use super::{array, array_mut, get, mpi, mpi_fn, put, ret};
use crate::api::consts::{err, COMM_NULL, COMM_WORLD, GROUP_EMPTY, GROUP_NULL, UNDEFINED};
use crate::api::consts::{
    KEY_APPNUM, KEY_HOST, KEY_IO, KEY_TAG_UB, KEY_UNIVERSE_SIZE, KEY_WTIME_IS_GLOBAL, PROC_NULL,
    TAG_UB,
};
use crate::api::error::{fail, MpiResult};
use crate::api::group::{compare_comms, Group};
use crate::api::{comm, Mpi};
use std::os::raw::{c_int, c_void};

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

fn new_comm(
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
    ret(name, parent, r)
}

mpi_fn!(fn MPI_Comm_dup / PMPI_Comm_dup(c: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_dup", c, out, |m| comm::dup(m, c))
});

mpi_fn!(fn MPI_Comm_split / PMPI_Comm_split(c: c_int, color: c_int, key: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_split", c, out, |m| comm::split(m, c, color, key))
});

mpi_fn!(fn MPI_Comm_create / PMPI_Comm_create(c: c_int, g: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_create", c, out, |m| comm::create(m, c, g))
});

mpi_fn!(fn MPI_Comm_free / PMPI_Comm_free(c: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer.
        let h = unsafe { get(c)? };
        comm::free(m, h)?;
        // SAFETY: as above.
        unsafe { put(c, COMM_NULL) }
    });
    ret("MPI_Comm_free", COMM_WORLD, r)
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
static APPNUM_VAL: c_int = 0;
static UNIVERSE: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();

mpi_fn!(fn MPI_Comm_get_attr / PMPI_Comm_get_attr(c: c_int, key: c_int, value: *mut c_void, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        let p: Option<&'static c_int> = match key {
            KEY_TAG_UB => Some(&TAG_UB_VAL),
            KEY_WTIME_IS_GLOBAL => Some(&WTIME_GLOBAL_VAL),
            KEY_HOST => Some(&HOST_VAL),
            KEY_IO => Some(&IO_VAL),
            KEY_APPNUM => Some(&APPNUM_VAL),
            KEY_UNIVERSE_SIZE => Some(UNIVERSE.get_or_init(|| m.size as c_int)),
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
