//! Synchronization: completion and flushes, fence, passive-target locks
//! (at the agent or in shared memory), and post/start/complete/wait.

use super::*;

/// Waits for what is outstanding to `rank` here (local completion: the
/// data has left, the replies are in).
pub(super) fn complete_local(m: &Mpi, w: &mut Win, rank: usize) -> MpiResult<()> {
    let mut first = Ok(());
    for p in std::mem::take(&mut w.pending[rank]) {
        let r = match p {
            Pending::Ours(id) => check(m.engine.wait(id)).map(|_| ()),
            Pending::Users(id) => {
                m.engine.wait_done(id);
                Ok(())
            }
            Pending::Reply { id, bytes, users } => {
                let st = if users {
                    m.engine.wait_done(id);
                    m.engine.peek(id)
                } else {
                    Some(m.engine.wait(id))
                };
                match st.map(check) {
                    Some(Ok(st)) if st.bytes != bytes => fail(
                        err::RMA_RANGE,
                        format!("rank {rank} answered {} of {bytes} bytes: the access is outside its window", st.bytes),
                    ),
                    Some(Err(e)) => Err(e),
                    _ => Ok(()),
                }
            }
        };
        first = first.and(r);
    }
    first
}

/// Flushes to `rank`: local completion, then a round trip through its
/// agent for requests that have no reply of their own.
pub(super) fn flush_one(m: &Mpi, w: &mut Win, rank: usize) -> MpiResult<()> {
    let local = complete_local(m, w, rank);
    if !w.unflushed.remove(&rank) {
        return local;
    }
    let code = round_trip(m, w, rank, |reply| Request::Flush { reply })?;
    local?;
    agent_error(rank, code)
}

/// Sends a request that the agent answers with an error code; returns it.
pub(super) fn round_trip(
    m: &Mpi,
    w: &mut Win,
    rank: usize,
    req: impl FnOnce(i32) -> Request,
) -> MpiResult<i32> {
    let reply = w.reply_tag();
    let mut code = [0u8; 4];
    // SAFETY: `code` outlives the receive, waited for below.
    let raw = unsafe { RawBuf::new(code.as_mut_ptr(), 4) };
    let id = expect(m, w, rank, reply, Data::Bytes(raw));
    let sent = send(m, w, rank, req(reply), &[]);
    let got = m.engine.wait(id);
    check(m.engine.wait(sent?))?;
    check(got)?;
    Ok(i32::from_le_bytes(code))
}

pub(super) fn agent_error(rank: usize, code: i32) -> MpiResult<()> {
    if code != 0 {
        return fail(code, format!("an operation at rank {rank} failed"));
    }
    Ok(())
}

pub(super) fn flush_all(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let mut first = Ok(());
    for r in 0..w.comm.size() {
        first = first.and(flush_one(m, w, r));
    }
    first
}

/// `MPI_Win_flush` (`rank` `None`: `_all`) and `MPI_Win_flush_local`.
pub fn flush(m: &Mpi, w: &mut Win, rank: Option<i32>, local: bool) -> MpiResult<()> {
    // A range, not a list: a flush to one rank allocates nothing.
    let ranks = match rank {
        Some(r) => w.target_rank(r)?.map_or(0..0, |t| t..t + 1),
        None => 0..w.comm.size(),
    };
    let mut first = Ok(());
    for r in ranks {
        first = first.and(if local {
            complete_local(m, w, r)
        } else {
            flush_one(m, w, r)
        });
    }
    first
}

/// `MPI_Win_fence`: everyone's operations complete everywhere.
pub fn fence(m: &Mpi, w: &mut Win, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    let mine = flush_all(m, w);
    coll::barrier(&w.comm.team(m))?;
    mine
}

/// `MPI_Win_lock` (`MPI_MODE_NOCHECK`: no other origin locks it now, so
/// nothing is asked).
pub fn lock(m: &Mpi, w: &mut Win, kind: i32, rank: i32, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    let exclusive = match kind {
        LOCK_EXCLUSIVE => true,
        LOCK_SHARED => false,
        k => {
            return fail(
                err::LOCKTYPE,
                format!("lock type {k} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"),
            )
        }
    };
    let Some(r) = w.target_rank(rank)? else {
        return Ok(());
    };
    if w.locked.contains_key(&r) {
        return fail(err::RMA_SYNC, format!("rank {r} is locked already"));
    }
    if a & assert::NOCHECK == 0 && w.on_host.is_some() {
        host_lock(m, w, r, exclusive)?;
    } else if a & assert::NOCHECK == 0 {
        let reply = w.reply_tag();
        let id = expect(m, w, r, reply, Data::Bytes(RawBuf::empty()));
        let sent = send(m, w, r, Request::Lock { exclusive, reply }, &[]);
        let got = m.engine.wait(id);
        check(m.engine.wait(sent?))?;
        check(got)?;
    }
    w.locked.insert(
        r,
        win::Held {
            asked: a & assert::NOCHECK == 0,
            exclusive,
        },
    );
    Ok(())
}

/// Takes target `r`'s lock in the window's page on this host, waiting
/// as long as it is held; a halted job or a dead target ends the wait,
/// and dead members' locks are released on their behalf (ULFM).
pub(super) fn host_lock(m: &Mpi, w: &Win, r: usize, exclusive: bool) -> MpiResult<()> {
    let locks = &w.on_host.as_ref().expect("on host").locks;
    hostlock::acquire(locks, r, w.comm.rank, exclusive, || {
        if m.engine.halted() {
            return Some(hostlock::Interrupt::Halted);
        }
        let dead = m.engine.failed_members(w.comm.context);
        if dead.is_empty() {
            return None;
        }
        let dead: Vec<usize> = dead.iter().map(|&p| p as usize).collect();
        ranks_of(w, &dead).ok().map(hostlock::Interrupt::Dead)
    })
}

/// `MPI_Win_unlock`: the origin's operations complete at the target, then
/// the lock goes.
pub fn unlock(m: &Mpi, w: &mut Win, rank: i32) -> MpiResult<()> {
    let Some(r) = w.target_rank(rank)? else {
        return Ok(());
    };
    let Some(win::Held { asked, .. }) = w.locked.remove(&r) else {
        return fail(err::RMA_SYNC, format!("rank {r} is not locked"));
    };
    if w.on_host.is_some() {
        // Operations done by the agent complete first (a flush), then the
        // lock word is released.
        let flushed = flush_one(m, w, r);
        if asked {
            let me = w.comm.rank;
            w.on_host
                .as_ref()
                .expect("on host")
                .locks
                .slot(r)
                .unlock(me);
        }
        return flushed;
    }
    let local = complete_local(m, w, r);
    w.unflushed.remove(&r);
    // A lock taken with MPI_MODE_NOCHECK was never asked for: a flush
    // completes its operations.
    let code = round_trip(m, w, r, |reply| {
        if asked {
            Request::Unlock { reply }
        } else {
            Request::Flush { reply }
        }
    })?;
    local?;
    agent_error(r, code)
}

/// `MPI_Win_lock_all` / `unlock_all`: a shared lock on every member.
pub fn lock_all(m: &Mpi, w: &mut Win, a: i32) -> MpiResult<()> {
    for r in 0..w.comm.size() {
        lock(m, w, LOCK_SHARED, r as i32, a)?;
    }
    Ok(())
}

pub fn unlock_all(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let mut first = Ok(());
    for r in w.locked.keys().copied().collect::<Vec<_>>() {
        first = first.and(unlock(m, w, r as i32));
    }
    first
}

/// Ranks in the window's group of the world ranks of `members`.
pub fn ranks_of(w: &Win, members: &[usize]) -> MpiResult<Vec<usize>> {
    members
        .iter()
        .map(|&p| {
            w.comm
                .group
                .members
                .iter()
                .position(|&x| x == p)
                .ok_or_else(|| {
                    MpiError::new(err::GROUP, "the group has a process outside the window")
                })
        })
        .collect()
}

pub(super) fn notice(m: &Mpi, w: &Win, rank: usize, tag: i32) -> MpiResult<()> {
    let id = m.engine.post(Op::Send {
        dest: Some(w.comm.peer_world(rank)),
        src: w.comm.rank as u32,
        context: w.comm.context,
        tag,
        mode: SendMode::Standard,
        layout: Data::of(Owned(Vec::new())),
    });
    check(m.engine.wait(id)).map(|_| ())
}

pub(super) fn await_notice(m: &Mpi, w: &Win, rank: usize, tag: i32) -> MpiResult<()> {
    let id = expect(m, w, rank, tag, Data::Bytes(RawBuf::empty()));
    check(m.engine.wait(id)).map(|_| ())
}

/// `MPI_Win_post`: this member's window is exposed to `group`'s origins.
pub fn post(m: &Mpi, w: &mut Win, group: Vec<usize>, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    if w.exposure.is_some() {
        return fail(err::RMA_SYNC, "an exposure epoch is open already");
    }
    for &r in &group {
        notice(m, w, r, wire::POST)?;
    }
    w.exposure = Some(group);
    Ok(())
}

/// `MPI_Win_start`: an access epoch to `group`'s targets, once each has
/// posted.
pub fn start(m: &Mpi, w: &mut Win, group: Vec<usize>, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    if w.access.is_some() {
        return fail(err::RMA_SYNC, "an access epoch is open already");
    }
    if a & assert::NOCHECK == 0 {
        for &r in &group {
            await_notice(m, w, r, wire::POST)?;
        }
    }
    w.access = Some(group);
    Ok(())
}

/// `MPI_Win_complete`: the epoch's operations complete at their targets,
/// which hear that this origin is done.
pub fn complete(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let Some(group) = w.access.take() else {
        return fail(err::RMA_SYNC, "MPI_Win_complete without MPI_Win_start");
    };
    let mut first = Ok(());
    for &r in &group {
        first = first.and(flush_one(m, w, r));
        notice(m, w, r, wire::COMPLETE)?;
    }
    first
}

/// `MPI_Win_wait` (`block`) and `MPI_Win_test`: whether every origin of
/// the exposure epoch has completed (the epoch then ends).
pub fn wait(m: &Mpi, w: &mut Win, block: bool) -> MpiResult<bool> {
    let Some(group) = w.exposure.clone() else {
        return fail(
            err::RMA_SYNC,
            "no exposure epoch to wait for (MPI_Win_post)",
        );
    };
    if !block {
        let ready = group.iter().all(|&r| {
            m.engine
                .iprobe(w.comm.context, Src::Rank(r as u32), Some(wire::COMPLETE))
                .is_some()
        });
        if !ready {
            return Ok(false);
        }
    }
    for &r in &group {
        await_notice(m, w, r, wire::COMPLETE)?;
    }
    w.exposure = None;
    Ok(true)
}
