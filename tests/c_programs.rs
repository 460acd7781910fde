//! The C test programs under tests/c, each built with our mpicc and run with
//! our mpiexec at 1, 2, 3, 4 and 7 ranks (real processes, real sockets).

mod common;
use common::{build, run_ok, RANKS};

fn at_all_sizes(name: &str) {
    let exe = build(name);
    for &np in RANKS {
        run_ok(&exe, np, &[]);
    }
}

#[test]
fn p2p() {
    at_all_sizes("p2p.c");
}

#[test]
fn ordering() {
    at_all_sizes("ordering.c");
}

#[test]
fn placed() {
    at_all_sizes("placed.c");
}

#[test]
fn shm_collectives() {
    at_all_sizes("shm_coll.c");
}

/// Large collectives of one host copy from each other's memory; the same
/// calls by messages too.
#[test]
fn copied_collectives() {
    at_all_sizes("copied_coll.c");
    let exe = build("copied_coll.c");
    for np in [3, 4] {
        run_ok(&exe, np, &[("MPISTAGES_CMA_COLL", "0")]);
    }
}

#[test]
fn large_messages() {
    at_all_sizes("large.c");
}

/// The same programs with the waiting user thread driving progress.
#[test]
fn poll_mode() {
    for name in ["p2p.c", "large.c"] {
        let exe = build(name);
        for np in [2, 3] {
            run_ok(&exe, np, &[("MPISTAGES_PROGRESS", "poll")]);
        }
    }
}

#[test]
fn ssend() {
    at_all_sizes("ssend.c");
}

#[test]
fn persistent() {
    at_all_sizes("persistent.c");
}

#[test]
fn waits() {
    at_all_sizes("waits.c");
}

#[test]
fn bsend() {
    at_all_sizes("bsend.c");
}

#[test]
fn collectives() {
    at_all_sizes("collectives.c");
}

#[test]
fn comms_and_groups() {
    at_all_sizes("comms.c");
}

#[test]
fn datatypes() {
    at_all_sizes("datatypes.c");
}

#[test]
fn errors() {
    at_all_sizes("errors.c");
}

/// Cartesian, graph and distributed-graph topologies with the
/// neighbourhood collectives on each.
#[test]
fn topologies() {
    at_all_sizes("topology.c");
}

/// Non-blocking and persistent collectives in flight together, Isendrecv,
/// Comm_idup, matched probe, Alltoallw; also with the progress thread off
/// (MPISTAGES_PROGRESS=poll): the collectives' worker threads progress
/// them all the same.
/// Non-blocking and persistent collectives whose arrays the program frees
/// right after the call (as mpi4py does), in place, with zero counts and on
/// MPI_COMM_SELF.
#[test]
fn collective_arrays_freed_after_the_call() {
    at_all_sizes("nbc_arrays.c");
}

/// Generalized requests: cancel, query and free called when the standard
/// says (mpi4py's test_grequest).
#[test]
fn generalized_requests() {
    at_all_sizes("grequest.c");
}

/// Ports (both sides accepting), the job's name service and
/// MPI_Comm_join over a socket of the program's own (mpi4py's
/// test_dynproc); bad ports and names are errors of their class.
#[test]
fn ports_names_and_join() {
    at_all_sizes("ports.c");
}

#[test]
fn nonblocking_collectives() {
    let exe = build("nonblocking_coll.c");
    for &np in RANKS {
        run_ok(&exe, np, &[]);
    }
    run_ok(&exe, 4, &[("MPISTAGES_PROGRESS", "poll")]);
}

/// Collectives on an inter-communicator (evens and odds), blocking and
/// non-blocking, with MPI_ROOT / MPI_PROC_NULL roots.
#[test]
fn intercommunicator_collectives() {
    at_all_sizes("intercoll.c");
}

/// The large-count (`_c`) calls of MPI 4.0.
#[test]
fn large_counts() {
    at_all_sizes("large_count.c");
}

/// Communicators made from groups alone (MPI 4.0) and its error classes.
#[test]
fn communicators_from_groups() {
    at_all_sizes("from_group.c");
}

/// MPI 4.0 sessions: process sets, their groups and communicators, error
/// handlers, a second session after the first; in a program of sessions
/// alone (MPI ends at exit) and around the world model (MPI_Finalize
/// while a session is open).
#[test]
fn sessions() {
    let exe = build("sessions.c");
    for &np in RANKS {
        run_ok(&exe, np, &[]);
        run_ok(&exe, np, &[("SESSIONS_WORLD", "1")]);
    }
}

/// Partitioned communication of MPI 4.0 (Psend/Precv, Pready, Parrived).
#[test]
fn partitioned() {
    at_all_sizes("partitioned.c");
}

/// Info, attributes with callbacks, names, envelopes, error classes and
/// handlers, group ranges, Comm_create_group, split_type,
/// inter-communicators.
#[test]
fn objects() {
    at_all_sizes("objects.c");
}

#[test]
fn environment() {
    at_all_sizes("env.c");
}

#[test]
fn cxx_program() {
    at_all_sizes("cxx.cpp");
}

#[test]
fn thread_multiple() {
    let exe = build("threads.c");
    for np in [1, 2, 3, 4] {
        common::run_ok(&exe, np, &[]);
        common::run_ok(&exe, np, &[("MPISTAGES_PROGRESS", "poll")]);
    }
}

/// `MPISTAGES_LOG` sets what a rank says: `debug` shows every error
/// returned under MPI_ERRORS_RETURN with its detail, the default does not,
/// and a level that does not exist fails MPI_Init with a message.
#[test]
fn log_levels_from_the_environment() {
    let exe = build("errors.c");
    let exe = exe.to_str().unwrap();
    let limit = std::time::Duration::from_secs(60);
    let quiet = common::mpiexec(&["-n", "2", exe], &[], limit);
    assert!(quiet.ok(), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("MPI_ERR_RANK"), "{}", quiet.stderr);
    let debug = common::mpiexec(&["-n", "2", exe], &[("MPISTAGES_LOG", "debug")], limit);
    assert!(debug.ok(), "{}", debug.stderr);
    assert!(
        debug.stderr.contains("mpistages: MPI_Send: MPI_ERR_RANK: "),
        "{}",
        debug.stderr
    );
    assert!(
        debug.stderr.contains("connected to rank"),
        "{}",
        debug.stderr
    );
    let bad = common::mpiexec(&["-n", "1", exe], &[("MPISTAGES_LOG", "loud")], limit);
    assert!(!bad.ok(), "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("MPISTAGES_LOG='loud': expected off, error"),
        "{}",
        bad.stderr
    );
}

/// One-sided communication: every window flavor but shared, every
/// operation and synchronization, passive-target progress while the
/// target computes, attributes and errors; on one host (origins copy and
/// lock themselves) and once with everything through the targets'
/// agents, as between hosts.
#[test]
fn one_sided() {
    let exe = build("rma.c");
    for &np in RANKS {
        run_ok(&exe, np, &[]);
    }
    run_ok(&exe, 4, &[("MPISTAGES_RMA_DIRECT", "0")]);
}

/// MPI-IO: explicit offsets, individual, shared and ordered pointers, a
/// strided view, sizes, modes, errors and handlers, in a scratch
/// directory that must be empty when the program is done with it.
#[test]
fn files() {
    let exe = build("file.c");
    for &np in RANKS {
        let dir = common::Scratch::new("file-io");
        run_ok(&exe, np, &[("FILE_TEST_DIR", dir.path())]);
        let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// Waiting ranks sleep (CPU time while waiting 1.5 s), with the
/// collectives in shared memory and by messages.
#[test]
fn waiting_ranks_sleep() {
    let exe = build("idle_wait.c");
    for np in [2, 8] {
        run_ok(&exe, np, &[]);
        run_ok(&exe, np, &[("MPISTAGES_SHM_COLL", "0")]);
    }
}
