//! The large-count calls of MPI 4.0 (`MPI_*_c`) that are their int
//! twin with the counts and arrays converted (`via_int!`): a count that
//! does not fit an int is `MPI_ERR_COUNT` with the count in its message,
//! never cut. The `_c` calls that take large counts whole (point-to-point,
//! the datatype constructors and queries of `large.rs`) are elsewhere.

use super::large::{fit, fit_opt, len_of};
use super::{mpi_fn, nbc, ret, CStatus, NO_OBJECT};
use crate::api::error::MpiResult;
use std::os::raw::{c_char, c_int, c_void};

/// An argument as the int version takes it.
macro_rules! convert {
    (same, $a:ident) => {
        $a
    };
    (count, $a:ident) => {
        fit($a)?
    };
    (arr, $a:ident, $n:expr) => {
        // SAFETY: the standard's array of `$n` elements, or NULL.
        unsafe { fit_opt($a, $n)? }
    };
}

/// A converted argument passed on (`MPI_Aint` is `isize` in some of the
/// int versions, `i64` in others: the same 64 bits).
macro_rules! pass {
    (same, $a:ident) => {
        $a as _
    };
    (count, $a:ident) => {
        $a
    };
    (arr, $a:ident) => {
        $a.as_ref()
            .map_or(std::ptr::null(), |v: &Vec<c_int>| v.as_ptr())
    };
}

/// An error of the conversion, raised on the call's object.
macro_rules! fail_on {
    (comm $c:ident, $name:expr, $e:expr) => {
        ret($name, $c, Err($e))
    };
    (file $f:ident, $name:expr, $e:expr) => {
        super::ret_file($name, $f, Err($e))
    };
    (win $w:ident, $name:expr, $e:expr) => {
        super::win::ret_win($name, $w, Err($e))
    };
    (world, $name:expr, $e:expr) => {
        ret($name, NO_OBJECT, Err($e))
    };
}

/// A large-count call as its int twin: each argument passed on as it is
/// (`same`: handles, pointers, and `MPI_Aint`/`MPI_Count` where the twin
/// takes the same 64-bit type), as a count that must fit an int (`count`),
/// or as an array of counts or displacements of the length given, each of
/// which must fit (`arr`; NULL or empty passed on as NULL). The twins that
/// start work for later (non-blocking and persistent collectives) copy
/// their arrays at the call, so the converted ones may go right after it.
macro_rules! via_int {
    ($( $name:ident / $pname:ident => $int:path, on $on:ident $($obj:ident)? ( $($kind:ident $a:ident : $t:ty $(= $n:expr)?),* ); )*) => {$(
        mpi_fn!(fn $name / $pname ($($a: $t),*) {
            #[allow(clippy::redundant_closure_call)]
            let converted = (|| -> MpiResult<_> { Ok(( $( convert!($kind, $a $(, $n)?), )* )) })();
            match converted {
                // SAFETY: the int version's contract, with its arguments as
                // it takes them.
                Ok(( $($a,)* )) => unsafe { $int($( pass!($kind, $a) ),*) },
                Err(e) => fail_on!($on $($obj)?, stringify!($name), e),
            }
        });
    )*};
}

via_int! {
    MPI_Type_indexed_c / PMPI_Type_indexed_c => super::dtype::PMPI_Type_indexed, on world (count count: i64, arr array_of_blocklengths: *const i64 = len_of(count), arr array_of_displacements: *const i64 = len_of(count), same oldtype: c_int, same newtype: *mut c_int);
    MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c => super::dtype::PMPI_Type_create_subarray, on world (same ndims: c_int, arr array_of_sizes: *const i64 = len_of(ndims.into()), arr array_of_subsizes: *const i64 = len_of(ndims.into()), arr array_of_starts: *const i64 = len_of(ndims.into()), same order: c_int, same oldtype: c_int, same newtype: *mut c_int);
    MPI_Type_create_darray_c / PMPI_Type_create_darray_c => super::dtype::PMPI_Type_create_darray, on world (same size: c_int, same rank: c_int, same ndims: c_int, arr array_of_gsizes: *const i64 = len_of(ndims.into()), same array_of_distribs: *const c_int, same array_of_dargs: *const c_int, same array_of_psizes: *const c_int, same order: c_int, same oldtype: c_int, same newtype: *mut c_int);
    MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c => super::dtype::PMPI_Type_create_hvector, on world (count count: i64, count blocklength: i64, same stride: isize, same oldtype: c_int, same newtype: *mut c_int);
    MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c => super::dtype::PMPI_Type_create_hindexed_block, on world (count count: i64, count blocklength: i64, same array_of_displacements: *const isize, same oldtype: c_int, same newtype: *mut c_int);
    MPI_Type_create_struct_c / PMPI_Type_create_struct_c => super::dtype::PMPI_Type_create_struct, on world (count count: i64, arr array_of_blocklengths: *const i64 = len_of(count), same array_of_displacements: *const isize, same array_of_types: *const c_int, same newtype: *mut c_int);
    MPI_Type_create_resized_c / PMPI_Type_create_resized_c => super::dtype::PMPI_Type_create_resized, on world (same oldtype: c_int, same lb: isize, same extent: isize, same newtype: *mut c_int);
    MPI_Pack_external_c / PMPI_Pack_external_c => super::dtype::PMPI_Pack_external, on world (same datarep: *const c_char, same inbuf: *const c_void, count incount: i64, same datatype: c_int, same outbuf: *mut c_void, same outsize: isize, same position: *mut isize);
    MPI_Unpack_external_c / PMPI_Unpack_external_c => super::dtype::PMPI_Unpack_external, on world (same datarep: *const c_char, same inbuf: *const c_void, same insize: isize, same position: *mut isize, same outbuf: *mut c_void, count outcount: i64, same datatype: c_int);
    MPI_Pack_external_size_c / PMPI_Pack_external_size_c => super::dtype::PMPI_Pack_external_size, on world (same datarep: *const c_char, count incount: i64, same datatype: c_int, same size: *mut isize);
    MPI_Buffer_attach_c / PMPI_Buffer_attach_c => super::p2p::PMPI_Buffer_attach, on world (same buffer: *mut c_void, count size: i64);
    MPI_Sendrecv_c / PMPI_Sendrecv_c => super::p2p::PMPI_Sendrecv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same dest: c_int, same sendtag: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same source: c_int, same recvtag: c_int, same comm: c_int, same status: *mut CStatus);
    MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c => super::p2p::PMPI_Sendrecv_replace, on comm comm (same buf: *mut c_void, count count: i64, same datatype: c_int, same dest: c_int, same sendtag: c_int, same source: c_int, same recvtag: c_int, same comm: c_int, same status: *mut CStatus);
    MPI_Bsend_c / PMPI_Bsend_c => super::p2p::PMPI_Bsend, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int);
    MPI_Isendrecv_c / PMPI_Isendrecv_c => super::p2p::PMPI_Isendrecv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same dest: c_int, same sendtag: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same source: c_int, same recvtag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c => super::p2p::PMPI_Isendrecv_replace, on comm comm (same buf: *mut c_void, count count: i64, same datatype: c_int, same dest: c_int, same sendtag: c_int, same source: c_int, same recvtag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ibsend_c / PMPI_Ibsend_c => super::p2p::PMPI_Ibsend, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Send_init_c / PMPI_Send_init_c => super::p2p::PMPI_Send_init, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Recv_init_c / PMPI_Recv_init_c => super::p2p::PMPI_Recv_init, on comm comm (same buf: *mut c_void, count count: i64, same datatype: c_int, same source: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Bsend_init_c / PMPI_Bsend_init_c => super::p2p::PMPI_Bsend_init, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ssend_init_c / PMPI_Ssend_init_c => super::p2p::PMPI_Ssend_init, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Rsend_init_c / PMPI_Rsend_init_c => super::p2p::PMPI_Rsend_init, on comm comm (same buf: *const c_void, count count: i64, same datatype: c_int, same dest: c_int, same tag: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Mrecv_c / PMPI_Mrecv_c => super::probe::PMPI_Mrecv, on world (same buf: *mut c_void, count count: i64, same datatype: c_int, same message: *mut c_int, same status: *mut CStatus);
    MPI_Imrecv_c / PMPI_Imrecv_c => super::probe::PMPI_Imrecv, on world (same buf: *mut c_void, count count: i64, same datatype: c_int, same message: *mut c_int, same request: *mut c_int);
    MPI_Gatherv_c / PMPI_Gatherv_c => super::coll::PMPI_Gatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same recvtype: c_int, same root: c_int, same comm: c_int);
    MPI_Scatterv_c / PMPI_Scatterv_c => super::coll::PMPI_Scatterv, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int);
    MPI_Allgatherv_c / PMPI_Allgatherv_c => super::coll::PMPI_Allgatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr displs: *const i64 = nbc::peers(comm), same recvtype: c_int, same comm: c_int);
    MPI_Alltoallw_c / PMPI_Alltoallw_c => super::coll::PMPI_Alltoallw, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::unless_in_place(sendbuf, comm), arr sdispls: *const i64 = nbc::unless_in_place(sendbuf, comm), same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr rdispls: *const i64 = nbc::peers(comm), same recvtypes: *const c_int, same comm: c_int);
    MPI_Reduce_local_c / PMPI_Reduce_local_c => super::misc::PMPI_Reduce_local, on world (same inbuf: *const c_void, same inoutbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int);
    MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c => super::reduce::PMPI_Reduce_scatter_block, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count recvcount: i64, same datatype: c_int, same op: c_int, same comm: c_int);
    MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c => super::reduce::PMPI_Reduce_scatter, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::members(comm), same datatype: c_int, same op: c_int, same comm: c_int);
    MPI_Scan_c / PMPI_Scan_c => super::reduce::PMPI_Scan, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int);
    MPI_Exscan_c / PMPI_Exscan_c => super::reduce::PMPI_Exscan, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int);
    MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c => super::neighbor::PMPI_Neighbor_allgather, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int);
    MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c => super::neighbor::PMPI_Neighbor_allgatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr displs: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int);
    MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c => super::neighbor::PMPI_Neighbor_alltoall, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int);
    MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c => super::neighbor::PMPI_Neighbor_alltoallv, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), arr sdispls: *const i64 = nbc::degree(comm, false), same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr rdispls: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int);
    MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c => super::neighbor::PMPI_Neighbor_alltoallw, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), same sdispls: *const isize, same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), same rdispls: *const isize, same recvtypes: *const c_int, same comm: c_int);
    MPI_Ibcast_c / PMPI_Ibcast_c => super::nbc::PMPI_Ibcast, on comm comm (same buffer: *mut c_void, count count: i64, same datatype: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Igather_c / PMPI_Igather_c => super::nbc::PMPI_Igather, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Igatherv_c / PMPI_Igatherv_c => super::nbc::PMPI_Igatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same recvtype: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iscatter_c / PMPI_Iscatter_c => super::nbc::PMPI_Iscatter, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iscatterv_c / PMPI_Iscatterv_c => super::nbc::PMPI_Iscatterv, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iallgather_c / PMPI_Iallgather_c => super::nbc::PMPI_Iallgather, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iallgatherv_c / PMPI_Iallgatherv_c => super::nbc::PMPI_Iallgatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr displs: *const i64 = nbc::peers(comm), same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ialltoall_c / PMPI_Ialltoall_c => super::nbc::PMPI_Ialltoall, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ialltoallv_c / PMPI_Ialltoallv_c => super::nbc::PMPI_Ialltoallv, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::unless_in_place(sendbuf, comm), arr sdispls: *const i64 = nbc::unless_in_place(sendbuf, comm), same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr rdispls: *const i64 = nbc::peers(comm), same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ialltoallw_c / PMPI_Ialltoallw_c => super::nbc::PMPI_Ialltoallw, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::unless_in_place(sendbuf, comm), arr sdispls: *const i64 = nbc::unless_in_place(sendbuf, comm), same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr rdispls: *const i64 = nbc::peers(comm), same recvtypes: *const c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ireduce_c / PMPI_Ireduce_c => super::nbc::PMPI_Ireduce, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same root: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iallreduce_c / PMPI_Iallreduce_c => super::nbc::PMPI_Iallreduce, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c => super::nbc::PMPI_Ireduce_scatter_block, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count recvcount: i64, same datatype: c_int, same op: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c => super::nbc::PMPI_Ireduce_scatter, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::members(comm), same datatype: c_int, same op: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iscan_c / PMPI_Iscan_c => super::nbc::PMPI_Iscan, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Iexscan_c / PMPI_Iexscan_c => super::nbc::PMPI_Iexscan, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c => super::nbc::PMPI_Ineighbor_allgather, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c => super::nbc::PMPI_Ineighbor_allgatherv, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr displs: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c => super::nbc::PMPI_Ineighbor_alltoall, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c => super::nbc::PMPI_Ineighbor_alltoallv, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), arr sdispls: *const i64 = nbc::degree(comm, false), same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr rdispls: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int, same request: *mut c_int);
    MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c => super::nbc::PMPI_Ineighbor_alltoallw, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), same sdispls: *const isize, same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), same rdispls: *const isize, same recvtypes: *const c_int, same comm: c_int, same request: *mut c_int);
    MPI_Bcast_init_c / PMPI_Bcast_init_c => super::nbc::PMPI_Bcast_init, on comm comm (same buffer: *mut c_void, count count: i64, same datatype: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Gather_init_c / PMPI_Gather_init_c => super::nbc::PMPI_Gather_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Gatherv_init_c / PMPI_Gatherv_init_c => super::nbc::PMPI_Gatherv_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same recvtype: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Scatter_init_c / PMPI_Scatter_init_c => super::nbc::PMPI_Scatter_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Scatterv_init_c / PMPI_Scatterv_init_c => super::nbc::PMPI_Scatterv_init, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::at_root(comm, root), arr displs: *const i64 = nbc::at_root(comm, root), same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Allgather_init_c / PMPI_Allgather_init_c => super::nbc::PMPI_Allgather_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c => super::nbc::PMPI_Allgatherv_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr displs: *const i64 = nbc::peers(comm), same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Alltoall_init_c / PMPI_Alltoall_init_c => super::nbc::PMPI_Alltoall_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c => super::nbc::PMPI_Alltoallv_init, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::unless_in_place(sendbuf, comm), arr sdispls: *const i64 = nbc::unless_in_place(sendbuf, comm), same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr rdispls: *const i64 = nbc::peers(comm), same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c => super::nbc::PMPI_Alltoallw_init, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::unless_in_place(sendbuf, comm), arr sdispls: *const i64 = nbc::unless_in_place(sendbuf, comm), same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::peers(comm), arr rdispls: *const i64 = nbc::peers(comm), same recvtypes: *const c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Reduce_init_c / PMPI_Reduce_init_c => super::nbc::PMPI_Reduce_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same root: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Allreduce_init_c / PMPI_Allreduce_init_c => super::nbc::PMPI_Allreduce_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c => super::nbc::PMPI_Reduce_scatter_block_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count recvcount: i64, same datatype: c_int, same op: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c => super::nbc::PMPI_Reduce_scatter_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::members(comm), same datatype: c_int, same op: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Scan_init_c / PMPI_Scan_init_c => super::nbc::PMPI_Scan_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Exscan_init_c / PMPI_Exscan_init_c => super::nbc::PMPI_Exscan_init, on comm comm (same sendbuf: *const c_void, same recvbuf: *mut c_void, count count: i64, same datatype: c_int, same op: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c => super::nbc::PMPI_Neighbor_allgather_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c => super::nbc::PMPI_Neighbor_allgatherv_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr displs: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c => super::nbc::PMPI_Neighbor_alltoall_init, on comm comm (same sendbuf: *const c_void, count sendcount: i64, same sendtype: c_int, same recvbuf: *mut c_void, count recvcount: i64, same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c => super::nbc::PMPI_Neighbor_alltoallv_init, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), arr sdispls: *const i64 = nbc::degree(comm, false), same sendtype: c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), arr rdispls: *const i64 = nbc::degree(comm, true), same recvtype: c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c => super::nbc::PMPI_Neighbor_alltoallw_init, on comm comm (same sendbuf: *const c_void, arr sendcounts: *const i64 = nbc::degree(comm, false), same sdispls: *const isize, same sendtypes: *const c_int, same recvbuf: *mut c_void, arr recvcounts: *const i64 = nbc::degree(comm, true), same rdispls: *const isize, same recvtypes: *const c_int, same comm: c_int, same info: c_int, same request: *mut c_int);
    MPI_Win_create_c / PMPI_Win_create_c => super::win::PMPI_Win_create, on comm comm (same base: *mut c_void, same size: isize, count disp_unit: i64, same info: c_int, same comm: c_int, same win: *mut c_int);
    MPI_Win_allocate_c / PMPI_Win_allocate_c => super::win::PMPI_Win_allocate, on comm comm (same size: isize, count disp_unit: i64, same info: c_int, same comm: c_int, same baseptr: *mut c_void, same win: *mut c_int);
    MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c => super::win::PMPI_Win_allocate_shared, on comm comm (same size: isize, count disp_unit: i64, same info: c_int, same comm: c_int, same baseptr: *mut c_void, same win: *mut c_int);
    MPI_Get_c / PMPI_Get_c => super::win::PMPI_Get, on win win (same origin_addr: *mut c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same win: c_int);
    MPI_Put_c / PMPI_Put_c => super::win::PMPI_Put, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same win: c_int);
    MPI_Accumulate_c / PMPI_Accumulate_c => super::win::PMPI_Accumulate, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same op: c_int, same win: c_int);
    MPI_Get_accumulate_c / PMPI_Get_accumulate_c => super::win::PMPI_Get_accumulate, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same result_addr: *mut c_void, count result_count: i64, same result_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same op: c_int, same win: c_int);
    MPI_Rget_c / PMPI_Rget_c => super::win::PMPI_Rget, on win win (same origin_addr: *mut c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same win: c_int, same request: *mut c_int);
    MPI_Rput_c / PMPI_Rput_c => super::win::PMPI_Rput, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same win: c_int, same request: *mut c_int);
    MPI_Raccumulate_c / PMPI_Raccumulate_c => super::win::PMPI_Raccumulate, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same op: c_int, same win: c_int, same request: *mut c_int);
    MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c => super::win::PMPI_Rget_accumulate, on win win (same origin_addr: *const c_void, count origin_count: i64, same origin_datatype: c_int, same result_addr: *mut c_void, count result_count: i64, same result_datatype: c_int, same target_rank: c_int, same target_disp: isize, count target_count: i64, same target_datatype: c_int, same op: c_int, same win: c_int, same request: *mut c_int);
    MPI_File_read_at_c / PMPI_File_read_at_c => super::file::PMPI_File_read_at, on file fh (same fh: c_int, same offset: i64, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_read_at_all_c / PMPI_File_read_at_all_c => super::file::PMPI_File_read_at_all, on file fh (same fh: c_int, same offset: i64, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_at_c / PMPI_File_write_at_c => super::file::PMPI_File_write_at, on file fh (same fh: c_int, same offset: i64, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_at_all_c / PMPI_File_write_at_all_c => super::file::PMPI_File_write_at_all, on file fh (same fh: c_int, same offset: i64, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_iread_at_c / PMPI_File_iread_at_c => super::file::PMPI_File_iread_at, on file fh (same fh: c_int, same offset: i64, same buf: *mut c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c => super::file::PMPI_File_iread_at_all, on file fh (same fh: c_int, same offset: i64, same buf: *mut c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c => super::file::PMPI_File_iwrite_at, on file fh (same fh: c_int, same offset: i64, same buf: *const c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c => super::file::PMPI_File_iwrite_at_all, on file fh (same fh: c_int, same offset: i64, same buf: *const c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_read_c / PMPI_File_read_c => super::file::PMPI_File_read, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_read_all_c / PMPI_File_read_all_c => super::file::PMPI_File_read_all, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_c / PMPI_File_write_c => super::file::PMPI_File_write, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_all_c / PMPI_File_write_all_c => super::file::PMPI_File_write_all, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_iread_c / PMPI_File_iread_c => super::file::PMPI_File_iread, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iread_all_c / PMPI_File_iread_all_c => super::file::PMPI_File_iread_all, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iwrite_c / PMPI_File_iwrite_c => super::file::PMPI_File_iwrite, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c => super::file::PMPI_File_iwrite_all, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_read_shared_c / PMPI_File_read_shared_c => super::file::PMPI_File_read_shared, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_shared_c / PMPI_File_write_shared_c => super::file::PMPI_File_write_shared, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_iread_shared_c / PMPI_File_iread_shared_c => super::file::PMPI_File_iread_shared, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c => super::file::PMPI_File_iwrite_shared, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same request: *mut c_int);
    MPI_File_read_ordered_c / PMPI_File_read_ordered_c => super::file::PMPI_File_read_ordered, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_write_ordered_c / PMPI_File_write_ordered_c => super::file::PMPI_File_write_ordered, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int, same status: *mut CStatus);
    MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c => super::file::PMPI_File_read_at_all_begin, on file fh (same fh: c_int, same offset: i64, same buf: *mut c_void, count count: i64, same datatype: c_int);
    MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c => super::file::PMPI_File_write_at_all_begin, on file fh (same fh: c_int, same offset: i64, same buf: *const c_void, count count: i64, same datatype: c_int);
    MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c => super::file::PMPI_File_read_all_begin, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int);
    MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c => super::file::PMPI_File_write_all_begin, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int);
    MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c => super::file::PMPI_File_read_ordered_begin, on file fh (same fh: c_int, same buf: *mut c_void, count count: i64, same datatype: c_int);
    MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c => super::file::PMPI_File_write_ordered_begin, on file fh (same fh: c_int, same buf: *const c_void, count count: i64, same datatype: c_int);
    MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c => super::file::PMPI_File_get_type_extent, on file fh (same fh: c_int, same datatype: c_int, same extent: *mut isize);
}

/// Runs the int version `f` with an int in place of the `MPI_Count` at
/// `p` (read first when `read`, NULL passed on as NULL), and writes the
/// int back there if the call succeeded.
///
/// # Safety
/// `p` is NULL or valid for reads (when `read`) and writes of a count.
unsafe fn through_int(
    p: *mut i64,
    read: bool,
    f: impl FnOnce(*mut c_int) -> c_int,
) -> Result<c_int, crate::api::error::MpiError> {
    if p.is_null() {
        return Ok(f(std::ptr::null_mut()));
    }
    // SAFETY: by the caller's contract.
    let mut v = if read { fit(unsafe { p.read() })? } else { 0 };
    let rc = f(&mut v);
    if rc == crate::api::consts::err::SUCCESS {
        // SAFETY: by the caller's contract.
        unsafe { p.write(i64::from(v)) };
    }
    Ok(rc)
}

mpi_fn!(fn MPI_Status_set_elements_c / PMPI_Status_set_elements_c(status: *mut CStatus, dt: c_int, n: i64) {
    // SAFETY: the same contract as MPI_Status_set_elements_x's.
    unsafe { super::misc::PMPI_Status_set_elements_x(status, dt, n) }
});

mpi_fn!(fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, n: i64, h: c_int, outbuf: *mut c_void, outsize: i64, pos: *mut i64, c: c_int) {
    let r = fit(n).and_then(|n| Ok((n, fit(outsize)?))).and_then(|(n, outsize)| {
        // SAFETY: MPI_Pack's contract, the position as an int.
        unsafe { through_int(pos, true, |p| super::dtype::PMPI_Pack(inbuf, n, h, outbuf, outsize, p, c)) }
    });
    r.unwrap_or_else(|e| ret("MPI_Pack_c", c, Err(e)))
});

mpi_fn!(fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: i64, pos: *mut i64, outbuf: *mut c_void, n: i64, h: c_int, c: c_int) {
    let r = fit(n).and_then(|n| Ok((n, fit(insize)?))).and_then(|(n, insize)| {
        // SAFETY: MPI_Unpack's contract, the position as an int.
        unsafe { through_int(pos, true, |p| super::dtype::PMPI_Unpack(inbuf, insize, p, outbuf, n, h, c)) }
    });
    r.unwrap_or_else(|e| ret("MPI_Unpack_c", c, Err(e)))
});

mpi_fn!(fn MPI_Pack_size_c / PMPI_Pack_size_c(n: i64, h: c_int, c: c_int, size: *mut i64) {
    let r = fit(n).and_then(|n| {
        // SAFETY: MPI_Pack_size's contract, the size as an int.
        unsafe { through_int(size, false, |s| super::dtype::PMPI_Pack_size(n, h, c, s)) }
    });
    r.unwrap_or_else(|e| ret("MPI_Pack_size_c", c, Err(e)))
});

mpi_fn!(fn MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buf: *mut c_void, size: *mut i64) {
    // SAFETY: MPI_Buffer_detach's contract, the size as an int.
    let r = unsafe { through_int(size, false, |s| super::p2p::PMPI_Buffer_detach(buf, s)) };
    r.unwrap_or_else(|e| ret("MPI_Buffer_detach_c", NO_OBJECT, Err(e)))
});

mpi_fn!(fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(w: c_int, rank: c_int, size: *mut isize, disp_unit: *mut i64, baseptr: *mut c_void) {
    // SAFETY: MPI_Win_shared_query's contract, the unit as an int.
    let r = unsafe { through_int(disp_unit, false, |u| super::win::PMPI_Win_shared_query(w, rank, size, u, baseptr)) };
    r.unwrap_or_else(|e| super::win::ret_win("MPI_Win_shared_query_c", w, Err(e)))
});

/// The envelope the large-count interface reports for `h`, where it is
/// not the int interface's (see `Envelope::as_large`).
fn large_envelope(h: c_int) -> MpiResult<Option<std::sync::Arc<crate::api::datatype::Envelope>>> {
    let m = super::mpi()?;
    let t = m.tables().any_dtype(h)?;
    Ok(t.envelope.as_ref().and_then(|e| e.as_large.clone()))
}

mpi_fn!(fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(h: c_int, ni: *mut i64, na: *mut i64, nl: *mut i64, nt: *mut i64, combiner: *mut c_int) {
    let large = match large_envelope(h) {
        Ok(l) => l,
        Err(e) => return ret("MPI_Type_get_envelope_c", NO_OBJECT, Err(e)),
    };
    // Other types describe themselves through ints and addresses alone.
    let mut c = 0;
    let (rc, i, a, l, t) = match &large {
        Some(e) => {
            c = e.combiner;
            (crate::api::consts::err::SUCCESS, e.ints.len(), e.aints.len(), e.larges.len(), e.types.len())
        }
        None => {
            let (mut i, mut a, mut t) = (0, 0, 0);
            // SAFETY: MPI_Type_get_envelope's contract, with locals.
            let rc = unsafe { super::dtype::PMPI_Type_get_envelope(h, &mut i, &mut a, &mut t, &mut c) };
            (rc, i as usize, a as usize, 0, t as usize)
        }
    };
    if rc == crate::api::consts::err::SUCCESS {
        let out = [(ni, i), (na, a), (nl, l), (nt, t)];
        if combiner.is_null() || out.iter().any(|(p, _)| p.is_null()) {
            return ret("MPI_Type_get_envelope_c", NO_OBJECT, crate::api::error::fail(crate::api::consts::err::ARG, "an output argument is NULL"));
        }
        // SAFETY: the caller's out-pointers, checked above.
        unsafe {
            for (p, v) in out {
                p.write(v as i64);
            }
            combiner.write(c);
        }
    }
    rc
});

mpi_fn!(fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(h: c_int, maxi: i64, maxa: i64, maxl: i64, maxt: i64,
        ints: *mut c_int, aints: *mut isize, larges: *mut i64, types: *mut c_int) {
    let large = match large_envelope(h) {
        Ok(l) => l,
        Err(e) => return ret("MPI_Type_get_contents_c", NO_OBJECT, Err(e)),
    };
    if let Some(e) = large {
        let r = (|| {
            let m = super::mpi()?;
            let fits = |max: i64, n: usize| usize::try_from(max).is_ok_and(|max| max >= n);
            if !fits(maxi, e.ints.len()) || !fits(maxa, e.aints.len()) || !fits(maxl, e.larges.len()) || !fits(maxt, e.types.len()) {
                return crate::api::error::fail(crate::api::consts::err::ARG, "the arrays are smaller than MPI_Type_get_envelope_c said");
            }
            // SAFETY: caller's arrays of at least the envelope's sizes.
            unsafe {
                super::array_mut(ints, e.ints.len())?.copy_from_slice(&e.ints);
                for (o, &v) in super::array_mut(aints, e.aints.len())?.iter_mut().zip(&e.aints) {
                    *o = v as isize;
                }
                super::array_mut(larges, e.larges.len())?.copy_from_slice(&e.larges);
                super::dtype::types_out(m, &e.types, super::array_mut(types, e.types.len())?);
            }
            Ok(())
        })();
        return ret("MPI_Type_get_contents_c", NO_OBJECT, r);
    }
    let r = fit(maxi).and_then(|i| Ok((i, fit(maxa)?, fit(maxt)?)));
    match r {
        // SAFETY: MPI_Type_get_contents's contract (no large counts to give).
        Ok((i, a, t)) => unsafe { super::dtype::PMPI_Type_get_contents(h, i, a, t, ints, aints as *mut _, types) },
        Err(e) => ret("MPI_Type_get_contents_c", NO_OBJECT, Err(e)),
    }
});
