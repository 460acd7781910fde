//! The operations an origin issues (`MPI_Put`, `MPI_Get`, the
//! accumulates, compare-and-swap): each reaches the target's memory itself
//! where it can, or goes as a request to the target's agent.

use super::*;

/// `MPI_Put` (`user` for `MPI_Rput`: the request returned completes when
/// the data has left, as the standard has it).
pub fn put(
    m: &Mpi,
    w: &mut Win,
    origin: &TypedBuf,
    at: &At,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(origin, &place)?;
    if let Some(d) = w.direct(rank, &place) {
        // A contiguous origin is copied from where it is.
        let written = match origin.contiguous() {
            Some(run) => d.write(run.as_slice()),
            None => d.write(&origin.pack()),
        };
        match written {
            Ok(()) => return Ok(None),
            Err(e) => w.cma_failed(e),
        }
    }
    let id = send(m, w, rank, Request::Put(place), &origin.pack())?;
    Ok(Some(w.sent(rank, id, user)))
}

pub(super) fn same_size(origin: &TypedBuf, place: &Place) -> MpiResult<()> {
    let target = place.count as usize * place.dtype.size;
    if origin.bytes() != target {
        return fail(
            err::TYPE,
            format!(
                "the origin has {} bytes and the target {target}",
                origin.bytes()
            ),
        );
    }
    Ok(())
}

/// `MPI_Get` (and `MPI_Rget`, whose request is the reply's receive).
pub fn get(
    m: &Mpi,
    w: &mut Win,
    origin: TypedBuf,
    at: &At,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(&origin, &place)?;
    if let Some(d) = w.direct(rank, &place) {
        match d.read(origin.bytes()) {
            Ok(data) => {
                origin.unpack(&data);
                return Ok(None);
            }
            Err(e) => w.cma_failed(e),
        }
    }
    let reply = w.reply_tag();
    let bytes = origin.bytes();
    let id = expect(m, w, rank, reply, origin.into_data());
    let sent = send(m, w, rank, Request::Get { at: place, reply }, &[])?;
    w.replied(rank, sent, id, bytes, user);
    Ok(Some(id))
}

/// The predefined type an accumulate's elements are of, and checks of
/// the operation against it.
pub(super) fn element(origin: &Datatype, target: &Datatype, o: i32) -> MpiResult<Datatype> {
    let elem = if let Some(p) = predefined_of(origin) {
        p
    } else {
        let basic = origin.uniform_basic().ok_or_else(|| {
            MpiError::new(
                err::TYPE,
                "an accumulate's origin type must be made of one predefined type",
            )
        })?;
        Datatype::of_basic(basic).ok_or_else(|| {
            MpiError::new(err::TYPE, "no predefined type for the origin's elements")
        })?
    };
    if target.size > 0 && !target.predefined && target.uniform_basic() != elem.uniform_basic() {
        return fail(
            err::TYPE,
            "origin and target types of an accumulate differ in their elements",
        );
    }
    if o != op::REPLACE && o != op::NO_OP {
        crate::api::op::check(&crate::api::op::OpDef::Predefined(o), &elem)?;
    }
    Ok(elem)
}

/// The one predefined type a derived type is built from (through the
/// types of its constructors), if there is one.
pub(super) fn predefined_of(t: &Datatype) -> Option<Datatype> {
    if t.predefined {
        return Some(t.clone());
    }
    let mut leaf: Option<Datatype> = None;
    for (_, sub) in &t.envelope.as_ref()?.types {
        let l = predefined_of(sub)?;
        match &leaf {
            Some(x) if x.name != l.name => return None,
            _ => leaf = Some(l),
        }
    }
    leaf
}

pub(super) fn check_op(o: i32) -> MpiResult<()> {
    if !(op::MAX..=op::NO_OP).contains(&o) {
        return fail(err::OP, "accumulates take predefined operations only");
    }
    Ok(())
}

/// `MPI_Accumulate` (and `MPI_Raccumulate`).
pub fn accumulate(
    m: &Mpi,
    w: &mut Win,
    origin: &TypedBuf,
    at: &At,
    o: i32,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    check_op(o)?;
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(origin, &place)?;
    if origin.bytes() == 0 {
        // Nothing to combine: no element type to check either.
        return Ok(None);
    }
    let elem = element(&origin.dtype, &place.dtype, o)?;
    let data = origin.pack();
    if atomic_here(w, rank, &place, &elem, o, &data)?.is_some() {
        return Ok(None);
    }
    if let Some(d) = w.direct_exclusive(rank, &place) {
        if combine_direct(w, &d, &elem, o, &data, data.len())?.is_some() {
            return Ok(None);
        }
    }
    let req = Request::Accumulate {
        at: place,
        elem,
        op: o,
    };
    let id = send(m, w, rank, req, &data)?;
    Ok(Some(w.sent(rank, id, user)))
}

/// An accumulate done by the origin itself with the CPU's atomics, in a
/// window in shared memory whose elements allow it (`atomic.rs`); the
/// target's packed values before, or `None` when it goes another way.
fn atomic_here(
    w: &Win,
    rank: usize,
    place: &Place,
    elem: &Datatype,
    o: i32,
    data: &[u8],
) -> MpiResult<Option<Vec<u8>>> {
    let Some(t) = w.shared_place(rank, place) else {
        return Ok(None);
    };
    let Some(runs) = atomic::runs(&t, elem) else {
        return Ok(None);
    };
    // SAFETY: the target's segment is mapped here while the window lives
    // (`shared_place`), and `runs` checked the elements.
    unsafe { atomic::combine(&runs, elem, o, data) }.map(Some)
}

/// `MPI_Get_accumulate` (`origin` is `None` for `MPI_NO_OP`), also
/// `MPI_Fetch_and_op` and `MPI_Rget_accumulate`.
pub fn get_accumulate(
    m: &Mpi,
    w: &mut Win,
    origin: Option<&TypedBuf>,
    result: TypedBuf,
    at: &At,
    o: i32,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    check_op(o)?;
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(&result, &place)?;
    if result.bytes() == 0 {
        return Ok(None);
    }
    let data = match origin {
        Some(b) if o != op::NO_OP => {
            same_size(b, &place)?;
            b.pack()
        }
        _ => Vec::new(),
    };
    let elem = element(&result.dtype, &place.dtype, o)?;
    let bytes = result.bytes();
    if let Some(old) = atomic_here(w, rank, &place, &elem, o, &data)? {
        result.unpack(&old);
        return Ok(None);
    }
    if let Some(d) = w.direct_exclusive(rank, &place) {
        if let Some(old) = combine_direct(w, &d, &elem, o, &data, bytes)? {
            result.unpack(&old);
            return Ok(None);
        }
    }
    let reply = w.reply_tag();
    let id = expect(m, w, rank, reply, result.into_data());
    let req = Request::GetAccumulate {
        at: place,
        elem,
        op: o,
        reply,
    };
    let sent = send(m, w, rank, req, &data)?;
    w.replied(rank, sent, id, bytes, user);
    Ok(Some(id))
}

/// `MPI_Compare_and_swap`: one element of a predefined type.
pub fn compare_and_swap(
    m: &Mpi,
    w: &mut Win,
    new: &TypedBuf,
    compare: &TypedBuf,
    result: TypedBuf,
    at: &At,
) -> MpiResult<()> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(());
    };
    if !place.dtype.predefined {
        return fail(err::TYPE, "compare-and-swap takes a predefined type");
    }
    let mut data = new.pack();
    data.extend_from_slice(&compare.pack());
    let bytes = result.bytes();
    if let Some(t) = w.shared_place(rank, &place) {
        // SAFETY: in the target's segment, which this process maps while
        // the window lives.
        if let Some(old) = unsafe { atomic::compare_and_swap(&t, &data) } {
            result.unpack(&old);
            return Ok(());
        }
    }
    let reply = w.reply_tag();
    let id = expect(m, w, rank, reply, result.into_data());
    let sent = send(
        m,
        w,
        rank,
        Request::CompareAndSwap { at: place, reply },
        &data,
    )?;
    w.replied(rank, sent, id, bytes, false);
    Ok(())
}
