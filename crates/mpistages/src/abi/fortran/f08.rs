//! The source of the `mpi_f08` module (`use mpi_f08`), generated from the
//! same table as `use mpi` and from mpif.h's constants: handles are the
//! standard's types (`TYPE(MPI_Comm)` … with one `MPI_VAL` component, `==`
//! and `/=`), a status is `TYPE(MPI_Status)` with `MPI_SOURCE`, `MPI_TAG`
//! and `MPI_ERROR` components, and `IERROR` is optional. Each routine is a
//! module procedure `MPI_X_f08` under the generic name `MPI_X` that calls
//! the `PMPI_X` binding of `use mpi`. Handles, arrays of handles and
//! statuses pass through unchanged: the types are `BIND(C)` with the
//! layout of the integers the old binding takes, and `MPI_STATUS_IGNORE`
//! lives in the COMMON block mpif.h's does, so the library sees the same
//! address. Left out: routines that take a procedure (keyval and error
//! handler constructors, user operations, generalized requests), whose
//! f08 callbacks have other interfaces, and the `PMPI_` names.

use super::module::header;
use super::{Binding, Kind, TABLE};
use std::fmt::Write;

/// mpif.h, whose `INTEGER, PARAMETER`s the module repeats with their types.
const MPIF_H: &str = include_str!("../../../../../include/mpif.h");

/// The handle types of the f08 binding.
const HANDLE_TYPES: &[&str] = &[
    "MPI_Comm",
    "MPI_Datatype",
    "MPI_Group",
    "MPI_Request",
    "MPI_Op",
    "MPI_Info",
    "MPI_Errhandler",
    "MPI_Message",
    "MPI_File",
    "MPI_Win",
    "MPI_Session",
];

/// The handle type of a binding's integer argument, by its name in the
/// table (`None`: a plain integer). A unit test checks that every name
/// in the table is one or the other on purpose.
fn handle_of_arg(name: &str) -> Option<&'static str> {
    Some(match name {
        "comm" | "comm1" | "comm2" | "comm_cart" | "comm_dist_graph" | "comm_graph"
        | "comm_old" | "intercomm" | "local_comm" | "newcomm" | "newintercomm" | "newintracomm"
        | "peer_comm" => "MPI_Comm",
        "array_of_datatypes" | "array_of_types" | "datatype" | "etype" | "filetype" | "newtype"
        | "oldtype" | "recvtype" | "recvtypes" | "sendtype" | "sendtypes" | "origin_datatype"
        | "result_datatype" | "target_datatype" => "MPI_Datatype",
        "group" | "group1" | "group2" | "newgroup" | "failedgrp" | "local_group"
        | "remote_group" => "MPI_Group",
        "parent" => "MPI_Comm",
        "array_of_requests" | "request" => "MPI_Request",
        "op" => "MPI_Op",
        "info" | "info_used" | "newinfo" => "MPI_Info",
        "errhandler" => "MPI_Errhandler",
        "message" => "MPI_Message",
        "fh" | "file" => "MPI_File",
        "win" => "MPI_Win",
        "session" => "MPI_Session",
        _ => return None,
    })
}

/// The handle type of a constant of mpif.h: by section for datatypes and
/// operations, by name for the other predefined handles.
fn handle_of_constant(section: &str, name: &str) -> Option<&'static str> {
    match section {
        "datatypes" => return Some("MPI_Datatype"),
        "reduction operations" => return Some("MPI_Op"),
        _ => {}
    }
    Some(match name {
        "MPI_COMM_NULL" | "MPI_COMM_WORLD" | "MPI_COMM_SELF" => "MPI_Comm",
        "MPI_GROUP_NULL" | "MPI_GROUP_EMPTY" => "MPI_Group",
        "MPI_REQUEST_NULL" => "MPI_Request",
        "MPI_OP_NULL" => "MPI_Op",
        "MPI_DATATYPE_NULL" => "MPI_Datatype",
        "MPI_ERRHANDLER_NULL"
        | "MPI_ERRORS_ARE_FATAL"
        | "MPI_ERRORS_RETURN"
        | "MPI_ERRORS_ABORT" => "MPI_Errhandler",
        "MPI_INFO_NULL" | "MPI_INFO_ENV" => "MPI_Info",
        "MPI_MESSAGE_NULL" | "MPI_MESSAGE_NO_PROC" => "MPI_Message",
        "MPI_FILE_NULL" => "MPI_File",
        "MPI_WIN_NULL" => "MPI_Win",
        "MPI_SESSION_NULL" => "MPI_Session",
        _ => return None,
    })
}

/// (section, name, value) of every `INTEGER, PARAMETER` of mpif.h.
fn parameters() -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in MPIF_H.lines() {
        if let Some(c) = line.strip_prefix("! ") {
            section = c.trim().to_string();
            continue;
        }
        let Some(rest) = line.trim().strip_prefix("INTEGER, PARAMETER :: ") else {
            continue;
        };
        if let Some((n, v)) = rest.split_once('=') {
            out.push((section.clone(), n.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// Whether the module provides a binding: those taking procedures are
/// left out (see the module comment).
fn provided(b: &Binding) -> bool {
    !b.args.iter().any(|(_, k)| *k == Kind::Fun)
}

/// The declaration of one dummy argument of an `MPI_X_f08` procedure.
fn declare(name: &str, kind: Kind) -> String {
    declare_as(name, kind, handle_of_arg(name))
}

/// The declaration of a dummy argument, of handle type `handle` if any.
fn declare_as(name: &str, kind: Kind, handle: Option<&str>) -> String {
    let addr = "integer(kind=MPI_ADDRESS_KIND)";
    let choice = |extra: &str| {
        format!(
            "!GCC$ ATTRIBUTES NO_ARG_CHECK :: {name}\n    type(*), dimension(*){extra} :: {name}"
        )
    };
    match (kind, handle) {
        (Kind::I, Some(t)) => format!("type({t}), intent(in) :: {name}"),
        (Kind::O, Some(t)) => format!("type({t}), intent(out) :: {name}"),
        (Kind::IO, Some(t)) => format!("type({t}), intent(inout) :: {name}"),
        (Kind::IA, Some(t)) => format!("type({t}), intent(in) :: {name}(*)"),
        (Kind::OA, Some(t)) => format!("type({t}), intent(inout) :: {name}(*)"),
        (Kind::I, None) => format!("integer, intent(in) :: {name}"),
        (Kind::O, None) => format!("integer, intent(out) :: {name}"),
        (Kind::IO, None) => format!("integer, intent(inout) :: {name}"),
        (Kind::IA, None) => format!("integer, intent(in) :: {name}(*)"),
        (Kind::OA, None) => format!("integer, intent(inout) :: {name}(*)"),
        (Kind::L, _) => format!("logical, intent(in) :: {name}"),
        (Kind::LO, _) => format!("logical, intent(out) :: {name}"),
        (Kind::LA, _) => format!("logical, intent(in) :: {name}(*)"),
        (Kind::LAO, _) => format!("logical, intent(inout) :: {name}(*)"),
        (Kind::A | Kind::Cnt, _) => format!("{addr}, intent(in) :: {name}"),
        (Kind::AO | Kind::CntO, _) => format!("{addr}, intent(out) :: {name}"),
        (Kind::AA, _) => format!("{addr}, intent(in) :: {name}(*)"),
        (Kind::Buf, _) => choice(""),
        (Kind::Region, _) => choice(", target"),
        (Kind::St, _) => format!("type(MPI_Status) :: {name}"),
        (Kind::StIn, _) => format!("type(MPI_Status), intent(in) :: {name}"),
        (Kind::Sts, _) => format!("type(MPI_Status) :: {name}(*)"),
        (Kind::Str, _) => format!("character(len=*), intent(in) :: {name}"),
        (Kind::StrO, _) => format!("character(len=*), intent(out) :: {name}"),
        (Kind::Fun, _) => unreachable!("bindings with procedures are not provided"),
    }
}

/// The declaration of the same argument in the private interface of the
/// `PMPI_X` binding it calls: handles, arrays of them and statuses are
/// taken as they are (`NO_ARG_CHECK`), the rest as `use mpi` declares it.
fn declare_old(name: &str, kind: Kind) -> String {
    let any =
        format!("!GCC$ ATTRIBUTES NO_ARG_CHECK :: {name}\n      type(*), dimension(*) :: {name}");
    match kind {
        Kind::St | Kind::StIn | Kind::Sts | Kind::Buf | Kind::Region => any,
        Kind::IA | Kind::OA if handle_of_arg(name).is_some() => any,
        // An interface body sees nothing of the module: kind 8 is
        // MPI_ADDRESS_KIND, MPI_COUNT_KIND and MPI_OFFSET_KIND.
        _ => declare_as(name, kind, None).replace("MPI_ADDRESS_KIND", "8"),
    }
}

/// The actual argument passed on for a dummy.
fn pass(name: &str, kind: Kind) -> String {
    match (kind, handle_of_arg(name)) {
        (Kind::I | Kind::O | Kind::IO, Some(_)) => format!("{name}%MPI_VAL"),
        _ => name.to_string(),
    }
}

fn arg_names(b: &Binding) -> Vec<&str> {
    b.args.iter().map(|(a, _)| *a).chain(["ierror"]).collect()
}

/// The private interface of `PMPI_X`.
fn old_interface(out: &mut String, b: &Binding) {
    let old = format!("P{}", b.name.to_ascii_uppercase());
    let _ = writeln!(out, "{}", header("    ", &old, &arg_names(b)));
    for (a, k) in b.args {
        let _ = writeln!(out, "      {}", declare_old(a, *k));
    }
    let _ = writeln!(out, "      integer :: ierror\n    end subroutine {old}");
}

/// The module procedure `MPI_X_f08`.
fn procedure(out: &mut String, b: &Binding) {
    let name = format!("{}_f08", b.name);
    let _ = writeln!(out, "{}", header("  ", &name, &arg_names(b)));
    for (a, k) in b.args {
        let _ = writeln!(out, "    {}", declare(a, *k));
    }
    let actual: Vec<String> = b
        .args
        .iter()
        .map(|(a, k)| pass(a, *k))
        .chain(["ierror_".to_string()])
        .collect();
    let _ = writeln!(
        out,
        "    integer, optional, intent(out) :: ierror\n    integer :: ierror_"
    );
    let call = header(
        "    ",
        &format!("P{}", b.name.to_ascii_uppercase()),
        &actual.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let _ = writeln!(
        out,
        "{}\n    if (present(ierror)) ierror = ierror_\n  end subroutine {name}",
        call.replacen("subroutine ", "call ", 1)
    );
}

/// The whole module source.
pub fn source() -> String {
    let mut s = String::from(
        "! The `mpi_f08` module of mpistages, generated by mpifort from\n\
         ! src/abi/fortran/bindings.rs and include/mpif.h. Do not edit.\n\
         module mpi_f08\n  implicit none\n",
    );
    for t in HANDLE_TYPES {
        let _ = writeln!(
            s,
            "  type, bind(C) :: {t}\n    integer :: MPI_VAL\n  end type {t}"
        );
        let _ = writeln!(s, "  private :: mpistages_eq_{t}, mpistages_ne_{t}");
    }
    s.push_str(
        "  type, bind(C) :: MPI_Status\n    integer :: MPI_SOURCE, MPI_TAG, MPI_ERROR\n    \
         integer :: mpistages_count_lo, mpistages_count_hi_and_cancelled\n  end type MPI_Status\n",
    );
    // Constants: integers, and the predefined handles with their types.
    for (section, name, value) in parameters() {
        match handle_of_constant(&section, &name) {
            Some(t) => {
                let _ = writeln!(s, "  type({t}), parameter :: {name} = {t}({value})");
            }
            None => {
                let _ = writeln!(s, "  integer, parameter :: {name} = {value}");
            }
        }
    }
    // The sentinels share mpif.h's COMMON blocks (the library knows them
    // by address).
    s.push_str(
        "  integer :: MPI_BOTTOM, MPI_IN_PLACE\n  \
         type(MPI_Status) :: MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE(1)\n  \
         common /MPISTAGES_BOTTOM/ MPI_BOTTOM\n  common /MPISTAGES_IN_PLACE/ MPI_IN_PLACE\n  \
         common /MPISTAGES_STATUS_IGNORE/ MPI_STATUS_IGNORE\n  \
         common /MPISTAGES_STATUSES_IGNORE/ MPI_STATUSES_IGNORE\n  \
         save /MPISTAGES_BOTTOM/, /MPISTAGES_IN_PLACE/\n  \
         save /MPISTAGES_STATUS_IGNORE/, /MPISTAGES_STATUSES_IGNORE/\n",
    );
    // == and /= on each handle type.
    s.push_str("  interface operator(==)\n");
    for t in HANDLE_TYPES {
        let _ = writeln!(s, "    module procedure mpistages_eq_{t}");
    }
    s.push_str("  end interface\n  interface operator(/=)\n");
    for t in HANDLE_TYPES {
        let _ = writeln!(s, "    module procedure mpistages_ne_{t}");
    }
    s.push_str("  end interface\n");
    // Generic names, and the private interfaces of the old bindings.
    let bindings: Vec<&Binding> = TABLE.iter().filter(|b| provided(b)).collect();
    for b in &bindings {
        let _ = writeln!(
            s,
            "  interface {}\n    module procedure {}_f08\n  end interface",
            b.name, b.name
        );
    }
    s.push_str(
        "  interface MPI_Wtime\n    module procedure MPI_Wtime_f08\n  end interface\n  \
         interface MPI_Wtick\n    module procedure MPI_Wtick_f08\n  end interface\n",
    );
    s.push_str("  interface\n");
    for b in &bindings {
        old_interface(&mut s, b);
    }
    s.push_str(
        "    double precision function PMPI_WTIME()\n    end function PMPI_WTIME\n    \
         double precision function PMPI_WTICK()\n    end function PMPI_WTICK\n  end interface\n",
    );
    for b in &bindings {
        let _ = writeln!(s, "  private :: P{}", b.name.to_ascii_uppercase());
    }
    s.push_str("  private :: PMPI_WTIME, PMPI_WTICK\ncontains\n");
    for b in &bindings {
        procedure(&mut s, b);
    }
    s.push_str(
        "  double precision function MPI_Wtime_f08()\n    MPI_Wtime_f08 = PMPI_WTIME()\n  \
         end function MPI_Wtime_f08\n  double precision function MPI_Wtick_f08()\n    \
         MPI_Wtick_f08 = PMPI_WTICK()\n  end function MPI_Wtick_f08\n",
    );
    for t in HANDLE_TYPES {
        let _ = writeln!(
            s,
            "  logical function mpistages_eq_{t}(a, b)\n    type({t}), intent(in) :: a, b\n    \
             mpistages_eq_{t} = a%MPI_VAL == b%MPI_VAL\n  end function mpistages_eq_{t}\n  \
             logical function mpistages_ne_{t}(a, b)\n    type({t}), intent(in) :: a, b\n    \
             mpistages_ne_{t} = a%MPI_VAL /= b%MPI_VAL\n  end function mpistages_ne_{t}"
        );
    }
    s.push_str("end module mpi_f08\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every integer argument name of the table is a handle or a plain
    /// integer on purpose: a new name must be added to one list.
    #[test]
    fn every_integer_argument_is_classified() {
        const PLAIN: &[&str] = &[
            "address",
            "amode",
            "array_of_blocklengths",
            "array_of_dargs",
            "array_of_displacements",
            "array_of_distribs",
            "array_of_gsizes",
            "array_of_indices",
            "array_of_integers",
            "array_of_psizes",
            "array_of_sizes",
            "array_of_starts",
            "array_of_subsizes",
            "attribute_val",
            "blocklength",
            "buflen",
            "color",
            "combiner",
            "comm_keyval",
            "coords",
            "count",
            "degrees",
            "dest",
            "destinations",
            "destweights",
            "dims",
            "direction",
            "disp",
            "displs",
            "edges",
            "epoch",
            "errorclass",
            "errorcode",
            "extent",
            "extra_state",
            "id",
            "incount",
            "indegree",
            "index",
            "insize",
            "key",
            "keyval",
            "level",
            "local_leader",
            "max_addresses",
            "max_datatypes",
            "max_integers",
            "maxdims",
            "maxedges",
            "maxindegree",
            "maxindex",
            "maxneighbors",
            "maxoutdegree",
            "mode",
            "n",
            "ndims",
            "nedges",
            "neighbors",
            "newrank",
            "nkeys",
            "nneighbors",
            "nnodes",
            "num_addresses",
            "num_datatypes",
            "num_integers",
            "order",
            "outcount",
            "outdegree",
            "outsize",
            "periods",
            "position",
            "provided",
            "ranges",
            "rank",
            "rank_dest",
            "rank_source",
            "ranks",
            "ranks1",
            "ranks2",
            "rdispls",
            "recvcount",
            "recvcounts",
            "recvtag",
            "remote_leader",
            "reorder",
            "required",
            "result",
            "resultlen",
            "root",
            "sdispls",
            "sendcount",
            "sendcounts",
            "sendtag",
            "size",
            "source",
            "sources",
            "sourceweights",
            "split_type",
            "status",
            "stride",
            "subversion",
            "tag",
            "type_keyval",
            "typeclass",
            "valuelen",
            "version",
            "weights",
            "whence",
            "flag",
            "num_to_ack",
            "num_acked",
            "disp_unit",
            "origin_count",
            "result_count",
            "target_rank",
            "target_count",
            "lock_type",
            "assert",
            "win_keyval",
            "fd",
            "partitions",
            "partition",
            "partition_low",
            "npset_names",
            "p",
            "r",
            "pset_len",
            "partition_high",
            "array_of_partitions",
            "length",
        ];
        for b in TABLE.iter().filter(|b| provided(b)) {
            for (a, k) in b.args {
                if matches!(k, Kind::I | Kind::O | Kind::IO | Kind::IA | Kind::OA) {
                    assert!(
                        handle_of_arg(a).is_some() != PLAIN.contains(a),
                        "{}: argument {a} is neither a handle nor a plain integer (or both)",
                        b.name
                    );
                }
            }
        }
    }

    #[test]
    fn the_module_has_the_types_constants_and_procedures() {
        let s = source();
        assert!(s.contains("type(MPI_Comm), parameter :: MPI_COMM_WORLD = MPI_Comm(1)"));
        assert!(s.contains("type(MPI_Datatype), parameter :: MPI_DOUBLE_PRECISION = "));
        assert!(s.contains("type(MPI_Op), parameter :: MPI_SUM = MPI_Op(3)"));
        assert!(s.contains("integer, parameter :: MPI_ANY_SOURCE = -2"));
        assert!(
            s.contains("subroutine MPI_Send_f08(buf, count, datatype, dest, tag, comm, ierror)")
        );
        assert!(s.contains("type(MPI_Status) :: status"));
        assert!(
            !s.contains("MPI_Op_create_f08"),
            "procedure arguments are left out"
        );
        assert!(s.lines().all(|l| l.len() <= 132), "a line is too long");
        // Types come before their first use.
        assert!(s.find("type, bind(C) :: MPI_Comm").unwrap() < s.find("MPI_Comm(1)").unwrap());
    }
}
