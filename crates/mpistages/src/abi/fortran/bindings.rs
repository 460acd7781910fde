//! The table of Fortran bindings: each entry is a C function's name and
//! the kinds of its Fortran arguments (before `IERROR`). `auto` entries
//! forward to the C function argument by argument; `custom` ones are
//! written in `special.rs` and listed here for the module's interfaces.
//! `MPI_WTIME` and `MPI_WTICK` are functions, declared in `mpif.h`.

use super::{fconv, fortran_bindings, fortran_fn, fty};
use crate::abi::attr::*;
use crate::abi::coll::*;
use crate::abi::comm::*;
use crate::abi::dpm::*;
use crate::abi::dtype::*;
use crate::abi::env::*;
use crate::abi::errors::*;
use crate::abi::file::*;
use crate::abi::info::*;
use crate::abi::large::{
    MPI_Type_get_extent_x, MPI_Type_get_true_extent_x, PMPI_Type_get_extent_x,
    PMPI_Type_get_true_extent_x,
};
use crate::abi::misc::*;
use crate::abi::mpix::*;
use crate::abi::nbc::*;
use crate::abi::neighbor::*;
use crate::abi::p2p::*;
use crate::abi::partitioned::*;
use crate::abi::probe::*;
use crate::abi::reduce::*;
use crate::abi::request::*;
use crate::abi::session::*;
use crate::abi::topo::*;
use crate::abi::ulfm::*;
use crate::abi::win::*;
use std::os::raw::{c_int, c_void};

fortran_bindings! {
    // environment and errors
    custom MPI_Init();
    custom MPI_Init_thread(required: I, provided: O);
    auto MPI_Initialized(flag: LO);
    auto MPI_Finalize();
    auto MPI_Finalized(flag: LO);
    auto MPI_Abort(comm: I, errorcode: I);
    custom MPI_Get_processor_name(name: StrO, resultlen: O);
    auto MPI_Get_version(version: O, subversion: O);
    custom MPI_Get_library_version(version: StrO, resultlen: O);
    auto MPI_Query_thread(provided: O);
    auto MPI_Is_thread_main(flag: LO);
    custom MPI_Error_string(errorcode: I, string: StrO, resultlen: O);
    auto MPI_Error_class(errorcode: I, errorclass: O);
    auto MPI_Comm_set_errhandler(comm: I, errhandler: I);
    auto MPI_Comm_get_errhandler(comm: I, errhandler: O);
    auto MPI_Errhandler_free(errhandler: IO);

    // sessions (MPI 4.0)
    auto MPI_Session_init(info: I, errhandler: I, session: O);
    auto MPI_Session_finalize(session: IO);
    auto MPI_Session_get_num_psets(session: I, info: I, npset_names: O);
    custom MPI_Session_get_nth_pset(session: I, info: I, n: I, pset_len: IO, pset_name: StrO);
    auto MPI_Session_get_info(session: I, info_used: O);
    custom MPI_Session_get_pset_info(session: I, pset_name: Str, info: O);
    custom MPI_Group_from_session_pset(session: I, pset_name: Str, newgroup: O);
    custom MPI_Session_create_errhandler(session_errhandler_fn: Fun, errhandler: O);
    auto MPI_Session_set_errhandler(session: I, errhandler: I);
    auto MPI_Session_get_errhandler(session: I, errhandler: O);
    auto MPI_Session_call_errhandler(session: I, errorcode: I);
    custom MPI_Comm_create_from_group(group: I, stringtag: Str, info: I, errhandler: I, newcomm: O);
    custom MPI_Intercomm_create_from_groups(local_group: I, local_leader: I, remote_group: I,
        remote_leader: I, stringtag: Str, info: I, errhandler: I, newintercomm: O);

    // files (MPI-IO)
    custom MPI_File_open(comm: I, filename: Str, amode: I, info: I, fh: O);
    auto MPI_File_close(fh: IO);
    custom MPI_File_delete(filename: Str, info: I);
    auto MPI_File_set_size(fh: I, size: Cnt);
    auto MPI_File_preallocate(fh: I, size: Cnt);
    auto MPI_File_get_size(fh: I, size: CntO);
    auto MPI_File_get_group(fh: I, group: O);
    auto MPI_File_get_amode(fh: I, amode: O);
    auto MPI_File_set_info(fh: I, info: I);
    auto MPI_File_get_info(fh: I, info_used: O);
    custom MPI_File_set_view(fh: I, disp: Cnt, etype: I, filetype: I, datarep: Str, info: I);
    custom MPI_File_get_view(fh: I, disp: CntO, etype: O, filetype: O, datarep: StrO);
    auto MPI_File_read_at(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_read_at_all(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write_at(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write_at_all(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_read(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_read_all(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write_all(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_seek(fh: I, offset: Cnt, whence: I);
    auto MPI_File_get_position(fh: I, offset: CntO);
    auto MPI_File_get_byte_offset(fh: I, offset: Cnt, disp: CntO);
    auto MPI_File_read_shared(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write_shared(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_read_ordered(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_write_ordered(fh: I, buf: Buf, count: I, datatype: I, status: St);
    auto MPI_File_seek_shared(fh: I, offset: Cnt, whence: I);
    auto MPI_File_get_position_shared(fh: I, offset: CntO);
    // one-sided communication
    auto MPI_Win_create(base: Buf, size: A, disp_unit: I, info: I, comm: I, win: O);
    auto MPI_Win_allocate(size: A, disp_unit: I, info: I, comm: I, baseptr: AO, win: O);
    auto MPI_Win_allocate_shared(size: A, disp_unit: I, info: I, comm: I, baseptr: AO, win: O);
    auto MPI_Win_shared_query(win: I, rank: I, size: AO, disp_unit: O, baseptr: AO);
    auto MPI_Win_create_dynamic(info: I, comm: I, win: O);
    auto MPI_Win_attach(win: I, base: Buf, size: A);
    auto MPI_Win_detach(win: I, base: Buf);
    auto MPI_Win_free(win: IO);
    auto MPI_Put(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, win: I);
    auto MPI_Get(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, win: I);
    auto MPI_Accumulate(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, op: I, win: I);
    auto MPI_Get_accumulate(origin_addr: Buf, origin_count: I, origin_datatype: I, result_addr: Buf, result_count: I, result_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, op: I, win: I);
    auto MPI_Fetch_and_op(origin_addr: Buf, result_addr: Buf, datatype: I, target_rank: I, target_disp: A, op: I, win: I);
    auto MPI_Compare_and_swap(origin_addr: Buf, compare_addr: Buf, result_addr: Buf, datatype: I, target_rank: I, target_disp: A, win: I);
    auto MPI_Rput(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, win: I, request: O);
    auto MPI_Rget(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, win: I, request: O);
    auto MPI_Raccumulate(origin_addr: Buf, origin_count: I, origin_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, op: I, win: I, request: O);
    auto MPI_Rget_accumulate(origin_addr: Buf, origin_count: I, origin_datatype: I, result_addr: Buf, result_count: I, result_datatype: I, target_rank: I, target_disp: A, target_count: I, target_datatype: I, op: I, win: I, request: O);
    auto MPI_Win_fence(assert: I, win: I);
    auto MPI_Win_lock(lock_type: I, rank: I, assert: I, win: I);
    auto MPI_Win_unlock(rank: I, win: I);
    auto MPI_Win_lock_all(assert: I, win: I);
    auto MPI_Win_unlock_all(win: I);
    auto MPI_Win_flush(rank: I, win: I);
    auto MPI_Win_flush_all(win: I);
    auto MPI_Win_flush_local(rank: I, win: I);
    auto MPI_Win_flush_local_all(win: I);
    auto MPI_Win_sync(win: I);
    auto MPI_Win_post(group: I, assert: I, win: I);
    auto MPI_Win_start(group: I, assert: I, win: I);
    auto MPI_Win_complete(win: I);
    auto MPI_Win_wait(win: I);
    auto MPI_Win_test(win: I, flag: LO);
    auto MPI_Win_get_group(win: I, group: O);
    auto MPI_Win_set_info(win: I, info: I);
    auto MPI_Win_get_info(win: I, info_used: O);
    custom MPI_Win_set_name(win: I, win_name: Str);
    custom MPI_Win_get_name(win: I, win_name: StrO, resultlen: O);
    custom MPI_Win_create_errhandler(win_errhandler_fn: Fun, errhandler: O);
    custom MPI_Win_get_attr(win: I, win_keyval: I, attribute_val: AO, flag: LO);
    custom MPI_Win_create_keyval(win_copy_attr_fn: Fun, win_delete_attr_fn: Fun, win_keyval: O,
        extra_state: A);
    auto MPI_Win_free_keyval(win_keyval: IO);
    auto MPI_Win_set_attr(win: I, win_keyval: I, attribute_val: A);
    auto MPI_Win_delete_attr(win: I, win_keyval: I);
    auto MPI_Win_set_errhandler(win: I, errhandler: I);
    auto MPI_Win_get_errhandler(win: I, errhandler: O);
    auto MPI_Win_call_errhandler(win: I, errorcode: I);
    auto MPI_File_iread(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iwrite(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iread_all(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iwrite_all(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iread_shared(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iwrite_shared(fh: I, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iread_at(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iwrite_at(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iread_at_all(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_iwrite_at_all(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I, request: O);
    auto MPI_File_read_all_begin(fh: I, buf: Buf, count: I, datatype: I);
    auto MPI_File_read_all_end(fh: I, buf: Buf, status: St);
    auto MPI_File_write_all_begin(fh: I, buf: Buf, count: I, datatype: I);
    auto MPI_File_write_all_end(fh: I, buf: Buf, status: St);
    auto MPI_File_read_ordered_begin(fh: I, buf: Buf, count: I, datatype: I);
    auto MPI_File_read_ordered_end(fh: I, buf: Buf, status: St);
    auto MPI_File_write_ordered_begin(fh: I, buf: Buf, count: I, datatype: I);
    auto MPI_File_write_ordered_end(fh: I, buf: Buf, status: St);
    auto MPI_File_read_at_all_begin(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I);
    auto MPI_File_read_at_all_end(fh: I, buf: Buf, status: St);
    auto MPI_File_write_at_all_begin(fh: I, offset: Cnt, buf: Buf, count: I, datatype: I);
    auto MPI_File_write_at_all_end(fh: I, buf: Buf, status: St);
    auto MPI_File_get_type_extent(fh: I, datatype: I, extent: AO);
    auto MPI_File_set_atomicity(fh: I, flag: L);
    auto MPI_File_get_atomicity(fh: I, flag: LO);
    auto MPI_File_sync(fh: I);
    custom MPI_File_create_errhandler(file_errhandler_fn: Fun, errhandler: O);
    auto MPI_File_set_errhandler(file: I, errhandler: I);
    auto MPI_File_get_errhandler(file: I, errhandler: O);
    auto MPI_File_call_errhandler(fh: I, errorcode: I);

    // point to point
    auto MPI_Send(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I);
    auto MPI_Ssend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I);
    auto MPI_Rsend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I);
    auto MPI_Bsend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I);
    auto MPI_Recv(buf: Buf, count: I, datatype: I, source: I, tag: I, comm: I, status: St);
    auto MPI_Isend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Issend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Irsend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Ibsend(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Irecv(buf: Buf, count: I, datatype: I, source: I, tag: I, comm: I, request: O);
    auto MPI_Buffer_attach(buffer: Buf, size: I);
    custom MPI_Buffer_detach(buffer_addr: Buf, size: O);
    auto MPI_Sendrecv(sendbuf: Buf, sendcount: I, sendtype: I, dest: I, sendtag: I,
        recvbuf: Buf, recvcount: I, recvtype: I, source: I, recvtag: I, comm: I, status: St);
    auto MPI_Sendrecv_replace(buf: Buf, count: I, datatype: I, dest: I, sendtag: I,
        source: I, recvtag: I, comm: I, status: St);
    auto MPI_Send_init(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Ssend_init(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Rsend_init(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Bsend_init(buf: Buf, count: I, datatype: I, dest: I, tag: I, comm: I, request: O);
    auto MPI_Recv_init(buf: Buf, count: I, datatype: I, source: I, tag: I, comm: I, request: O);
    auto MPI_Start(request: IO);
    auto MPI_Startall(count: I, array_of_requests: OA);
    auto MPI_Psend_init(buf: Buf, partitions: I, count: Cnt, datatype: I, dest: I, tag: I, comm: I, info: I, request: O);
    auto MPI_Precv_init(buf: Buf, partitions: I, count: Cnt, datatype: I, source: I, tag: I, comm: I, info: I, request: O);
    auto MPI_Pready(partition: I, request: I);
    auto MPI_Pready_range(partition_low: I, partition_high: I, request: I);
    auto MPI_Pready_list(length: I, array_of_partitions: IA, request: I);
    auto MPI_Parrived(request: I, partition: I, flag: LO);
    auto MPI_Wait(request: IO, status: St);
    auto MPI_Waitall(count: I, array_of_requests: OA, array_of_statuses: Sts);
    custom MPI_Waitany(count: I, array_of_requests: OA, index: O, status: St);
    custom MPI_Waitsome(incount: I, array_of_requests: OA, outcount: O, array_of_indices: OA,
        array_of_statuses: Sts);
    auto MPI_Test(request: IO, flag: LO, status: St);
    auto MPI_Testall(count: I, array_of_requests: OA, flag: LO, array_of_statuses: Sts);
    custom MPI_Testany(count: I, array_of_requests: OA, index: O, flag: LO, status: St);
    custom MPI_Testsome(incount: I, array_of_requests: OA, outcount: O, array_of_indices: OA,
        array_of_statuses: Sts);
    auto MPI_Request_free(request: IO);
    auto MPI_Cancel(request: IO);
    auto MPI_Test_cancelled(status: StIn, flag: LO);
    auto MPI_Probe(source: I, tag: I, comm: I, status: St);
    auto MPI_Iprobe(source: I, tag: I, comm: I, flag: LO, status: St);
    auto MPI_Get_count(status: StIn, datatype: I, count: O);
    auto MPI_Get_elements(status: StIn, datatype: I, count: O);

    // topologies
    auto MPI_Dims_create(nnodes: I, ndims: I, dims: OA);
    auto MPI_Cart_create(comm_old: I, ndims: I, dims: IA, periods: LA, reorder: L,
        comm_cart: O);
    auto MPI_Cartdim_get(comm: I, ndims: O);
    auto MPI_Cart_get(comm: I, maxdims: I, dims: OA, periods: LAO, coords: OA);
    auto MPI_Cart_rank(comm: I, coords: IA, rank: O);
    auto MPI_Cart_coords(comm: I, rank: I, maxdims: I, coords: OA);
    auto MPI_Cart_shift(comm: I, direction: I, disp: I, rank_source: O, rank_dest: O);
    auto MPI_Cart_sub(comm: I, remain_dims: LA, newcomm: O);
    auto MPI_Graph_create(comm_old: I, nnodes: I, index: IA, edges: IA, reorder: L,
        comm_graph: O);
    auto MPI_Graph_neighbors_count(comm: I, rank: I, nneighbors: O);
    auto MPI_Graph_neighbors(comm: I, rank: I, maxneighbors: I, neighbors: OA);
    auto MPI_Topo_test(comm: I, status: O);
    auto MPI_Neighbor_allgather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, comm: I);
    auto MPI_Neighbor_alltoall(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, comm: I);

    // communicators and info
    auto MPI_Comm_split_type(comm: I, split_type: I, key: I, info: I, newcomm: O);
    auto MPI_Comm_create_group(comm: I, group: I, tag: I, newcomm: O);
    auto MPI_Comm_dup_with_info(comm: I, info: I, newcomm: O);
    auto MPI_Comm_idup(comm: I, newcomm: O, request: O);
    auto MPI_Intercomm_create(local_comm: I, local_leader: I, peer_comm: I, remote_leader: I,
        tag: I, newintercomm: O);
    auto MPI_Intercomm_merge(intercomm: I, high: L, newintracomm: O);
    auto MPI_Comm_test_inter(comm: I, flag: LO);
    auto MPI_Comm_remote_size(comm: I, size: O);
    auto MPI_Comm_remote_group(comm: I, group: O);
    auto MPI_Info_create(info: O);
    auto MPI_Info_dup(info: I, newinfo: O);
    auto MPI_Info_get_nkeys(info: I, nkeys: O);
    auto MPI_Info_free(info: IO);
    auto MPI_Add_error_class(errorclass: O);
    auto MPI_Add_error_code(errorclass: I, errorcode: O);
    auto MPI_Comm_call_errhandler(comm: I, errorcode: I);
    auto MPI_Type_get_envelope(datatype: I, num_integers: O, num_addresses: O,
        num_datatypes: O, combiner: O);

    // non-blocking and persistent collectives, matched probe
    auto MPI_Ibarrier(comm: I, request: O);
    auto MPI_Ibcast(buffer: Buf, count: I, datatype: I, root: I, comm: I, request: O);
    auto MPI_Ireduce(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, root: I,
        comm: I, request: O);
    auto MPI_Iallreduce(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I,
        request: O);
    auto MPI_Igather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I, request: O);
    auto MPI_Iscatter(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I, request: O);
    auto MPI_Iallgather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I, request: O);
    auto MPI_Ialltoall(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I, request: O);
    auto MPI_Alltoallw(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtypes: IA,
        recvbuf: Buf, recvcounts: IA, rdispls: IA, recvtypes: IA, comm: I);
    auto MPI_Bcast_init(buffer: Buf, count: I, datatype: I, root: I, comm: I, info: I,
        request: O);
    auto MPI_Allreduce_init(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I,
        comm: I, info: I, request: O);
    auto MPI_Mprobe(source: I, tag: I, comm: I, message: O, status: St);
    auto MPI_Improbe(source: I, tag: I, comm: I, flag: LO, message: O, status: St);
    auto MPI_Mrecv(buf: Buf, count: I, datatype: I, message: IO, status: St);
    auto MPI_Isendrecv(sendbuf: Buf, sendcount: I, sendtype: I, dest: I, sendtag: I,
        recvbuf: Buf, recvcount: I, recvtype: I, source: I, recvtag: I, comm: I, request: O);
    auto MPI_Request_get_status(request: I, flag: LO, status: St);
    auto MPI_Reduce_local(inbuf: Buf, inoutbuf: Buf, count: I, datatype: I, op: I);

    // beyond the proxy subset: more of each family
    auto MPI_Comm_free_keyval(comm_keyval: IO);
    auto MPI_Comm_set_attr(comm: I, comm_keyval: I, attribute_val: A);
    auto MPI_Comm_delete_attr(comm: I, comm_keyval: I);
    auto MPI_Keyval_free(keyval: IO);
    custom MPI_Attr_put(comm: I, keyval: I, attribute_val: I);
    auto MPI_Attr_delete(comm: I, keyval: I);
    auto MPI_Type_free_keyval(type_keyval: IO);
    auto MPI_Type_set_attr(datatype: I, type_keyval: I, attribute_val: A);
    custom MPI_Type_get_attr(datatype: I, type_keyval: I, attribute_val: AO, flag: LO);
    auto MPI_Type_delete_attr(datatype: I, type_keyval: I);
    auto MPI_Comm_set_info(comm: I, info: I);
    auto MPI_Comm_get_info(comm: I, info_used: O);
    auto MPI_Errhandler_set(comm: I, errhandler: I);
    auto MPI_Errhandler_get(comm: I, errhandler: O);
    auto MPI_Cart_map(comm: I, ndims: I, dims: IA, periods: IA, newrank: O);
    auto MPI_Graphdims_get(comm: I, nnodes: O, nedges: O);
    auto MPI_Graph_get(comm: I, maxindex: I, maxedges: I, index: OA, edges: OA);
    auto MPI_Graph_map(comm: I, nnodes: I, index: IA, edges: IA, newrank: O);
    auto MPI_Dist_graph_create_adjacent(comm_old: I, indegree: I, sources: IA, sourceweights: IA,
        outdegree: I, destinations: IA, destweights: IA, info: I, reorder: I, comm_dist_graph: O);
    auto MPI_Dist_graph_create(comm_old: I, n: I, sources: IA, degrees: IA, destinations: IA,
        weights: IA, info: I, reorder: I, comm_dist_graph: O);
    auto MPI_Dist_graph_neighbors_count(comm: I, indegree: O, outdegree: O, weighted: LO);
    auto MPI_Dist_graph_neighbors(comm: I, maxindegree: I, sources: OA, sourceweights: OA,
        maxoutdegree: I, destinations: OA, destweights: OA);
    auto MPI_Type_get_contents(datatype: I, max_integers: I, max_addresses: I, max_datatypes: I,
        array_of_integers: OA, array_of_addresses: AA, array_of_datatypes: OA);
    auto MPI_Neighbor_allgatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcounts: IA, displs: IA, recvtype: I, comm: I);
    auto MPI_Neighbor_alltoallv(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I,
        recvbuf: Buf, recvcounts: IA, rdispls: IA, recvtype: I, comm: I);
    auto MPI_Neighbor_alltoallw(sendbuf: Buf, sendcounts: IA, sdispls: AA, sendtypes: IA,
        recvbuf: Buf, recvcounts: IA, rdispls: AA, recvtypes: IA, comm: I);
    auto MPI_Igatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, root: I, comm: I, request: O);
    auto MPI_Iscatterv(sendbuf: Buf, sendcounts: IA, displs: IA, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, root: I, comm: I, request: O);
    auto MPI_Iallgatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, comm: I, request: O);
    auto MPI_Ialltoallv(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I, recvbuf: Buf,
        recvcounts: IA, rdispls: IA, recvtype: I, comm: I, request: O);
    auto MPI_Ialltoallw(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtypes: IA, recvbuf: Buf,
        recvcounts: IA, rdispls: IA, recvtypes: IA, comm: I, request: O);
    auto MPI_Ireduce_scatter(sendbuf: Buf, recvbuf: Buf, recvcounts: IA, datatype: I, op: I,
        comm: I, request: O);
    auto MPI_Ireduce_scatter_block(sendbuf: Buf, recvbuf: Buf, recvcount: I, datatype: I, op: I,
        comm: I, request: O);
    auto MPI_Iscan(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I, request: O);
    auto MPI_Iexscan(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I, request: O);
    auto MPI_Ineighbor_allgather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, comm: I, request: O);
    auto MPI_Ineighbor_allgatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcounts: IA, displs: IA, recvtype: I, comm: I, request: O);
    auto MPI_Ineighbor_alltoall(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I, request: O);
    auto MPI_Ineighbor_alltoallv(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I,
        recvbuf: Buf, recvcounts: IA, rdispls: IA, recvtype: I, comm: I, request: O);
    auto MPI_Ineighbor_alltoallw(sendbuf: Buf, sendcounts: IA, sdispls: AA, sendtypes: IA,
        recvbuf: Buf, recvcounts: IA, rdispls: AA, recvtypes: IA, comm: I, request: O);
    auto MPI_Barrier_init(comm: I, info: I, request: O);
    auto MPI_Gather_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I, info: I, request: O);
    auto MPI_Gatherv_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, root: I, comm: I, info: I, request: O);
    auto MPI_Scatter_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I, info: I, request: O);
    auto MPI_Scatterv_init(sendbuf: Buf, sendcounts: IA, displs: IA, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, root: I, comm: I, info: I, request: O);
    auto MPI_Allgather_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I, info: I, request: O);
    auto MPI_Allgatherv_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Alltoall_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I, info: I, request: O);
    auto MPI_Alltoallv_init(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I, recvbuf: Buf,
        recvcounts: IA, rdispls: IA, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Alltoallw_init(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtypes: IA, recvbuf: Buf,
        recvcounts: IA, rdispls: IA, recvtypes: IA, comm: I, info: I, request: O);
    auto MPI_Reduce_init(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, root: I, comm: I,
        info: I, request: O);
    auto MPI_Reduce_scatter_init(sendbuf: Buf, recvbuf: Buf, recvcounts: IA, datatype: I, op: I,
        comm: I, info: I, request: O);
    auto MPI_Reduce_scatter_block_init(sendbuf: Buf, recvbuf: Buf, recvcount: I, datatype: I, op: I,
        comm: I, info: I, request: O);
    auto MPI_Scan_init(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I, info: I,
        request: O);
    auto MPI_Exscan_init(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I, info: I,
        request: O);
    auto MPI_Neighbor_allgather_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Neighbor_allgatherv_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcounts: IA, displs: IA, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Neighbor_alltoall_init(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Neighbor_alltoallv_init(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I,
        recvbuf: Buf, recvcounts: IA, rdispls: IA, recvtype: I, comm: I, info: I, request: O);
    auto MPI_Neighbor_alltoallw_init(sendbuf: Buf, sendcounts: IA, sdispls: AA, sendtypes: IA,
        recvbuf: Buf, recvcounts: IA, rdispls: AA, recvtypes: IA, comm: I, info: I, request: O);
    auto MPI_Imrecv(buf: Buf, count: I, datatype: I, message: IO, request: O);
    auto MPI_Isendrecv_replace(buf: Buf, count: I, datatype: I, dest: I, sendtag: I, source: I,
        recvtag: I, comm: I, request: O);
    auto MPI_Status_set_cancelled(status: St, flag: L);
    auto MPI_Status_set_elements(status: St, datatype: I, count: I);
    auto MPI_Status_set_elements_x(status: St, datatype: I, count: Cnt);
    auto MPI_Get_elements_x(status: StIn, datatype: I, count: CntO);
    auto MPI_Alloc_mem(size: A, info: I, baseptr: AO);
    auto MPI_Free_mem(base: Buf);
    auto MPI_Group_range_incl(group: I, n: I, ranges: IA, newgroup: O);
    auto MPI_Group_range_excl(group: I, n: I, ranges: IA, newgroup: O);
    custom MPI_Info_create_env(info: O);
    custom MPI_Info_set(info: I, key: Str, value: Str);
    custom MPI_Info_delete(info: I, key: Str);
    custom MPI_Info_get(info: I, key: Str, valuelen: I, value: StrO, flag: LO);
    custom MPI_Info_get_string(info: I, key: Str, buflen: IO, value: StrO, flag: LO);
    custom MPI_Info_get_valuelen(info: I, key: Str, valuelen: O, flag: LO);
    custom MPI_Info_get_nthkey(info: I, n: I, key: StrO);
    custom MPI_Comm_create_keyval(comm_copy_attr_fn: Fun, comm_delete_attr_fn: Fun, comm_keyval: O,
        extra_state: A);
    custom MPI_Keyval_create(copy_fn: Fun, delete_fn: Fun, keyval: O, extra_state: I);
    custom MPI_Type_create_keyval(type_copy_attr_fn: Fun, type_delete_attr_fn: Fun, type_keyval: O,
        extra_state: A);
    custom MPI_Comm_set_name(comm: I, comm_name: Str);
    custom MPI_Comm_get_name(comm: I, comm_name: StrO, resultlen: O);
    custom MPI_Type_set_name(datatype: I, type_name: Str);
    custom MPI_Type_get_name(datatype: I, type_name: StrO, resultlen: O);
    custom MPI_Add_error_string(errorcode: I, string: Str);
    custom MPI_Comm_create_errhandler(comm_errhandler_fn: Fun, errhandler: O);
    custom MPI_Errhandler_create(function: Fun, errhandler: O);
    custom MPI_Pcontrol(level: I);
    custom MPI_Grequest_start(query_fn: Fun, free_fn: Fun, cancel_fn: Fun, extra_state: A,
        request: O);
    auto MPI_Grequest_complete(request: I);
    auto MPI_Type_create_subarray(ndims: I, array_of_sizes: IA, array_of_subsizes: IA,
        array_of_starts: IA, order: I, oldtype: I, newtype: O);
    auto MPI_Type_create_darray(size: I, rank: I, ndims: I, array_of_gsizes: IA,
        array_of_distribs: IA, array_of_dargs: IA, array_of_psizes: IA, order: I, oldtype: I,
        newtype: O);
    auto MPI_Type_create_hindexed_block(count: I, blocklength: I, array_of_displacements: AA,
        oldtype: I, newtype: O);
    auto MPI_Type_match_size(typeclass: I, size: I, datatype: O);
    custom MPI_Pack_external_size(datarep: Str, incount: I, datatype: I, size: AO);
    custom MPI_Pack_external(datarep: Str, inbuf: Buf, incount: I, datatype: I, outbuf: Buf,
        outsize: A, position: AO);
    custom MPI_Unpack_external(datarep: Str, inbuf: Buf, insize: A, position: AO,
        outbuf: Buf, outcount: I, datatype: I);
    auto MPI_Comm_idup_with_info(comm: I, info: I, newcomm: O, request: O);

    // collectives and operations
    auto MPI_Barrier(comm: I);
    auto MPI_Bcast(buffer: Buf, count: I, datatype: I, root: I, comm: I);
    auto MPI_Reduce(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, root: I, comm: I);
    auto MPI_Allreduce(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I);
    auto MPI_Gather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I);
    auto MPI_Gatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, root: I, comm: I);
    auto MPI_Scatter(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, root: I, comm: I);
    auto MPI_Scatterv(sendbuf: Buf, sendcounts: IA, displs: IA, sendtype: I, recvbuf: Buf,
        recvcount: I, recvtype: I, root: I, comm: I);
    auto MPI_Allgather(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I);
    auto MPI_Allgatherv(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcounts: IA,
        displs: IA, recvtype: I, comm: I);
    auto MPI_Alltoall(sendbuf: Buf, sendcount: I, sendtype: I, recvbuf: Buf, recvcount: I,
        recvtype: I, comm: I);
    auto MPI_Alltoallv(sendbuf: Buf, sendcounts: IA, sdispls: IA, sendtype: I, recvbuf: Buf,
        recvcounts: IA, rdispls: IA, recvtype: I, comm: I);
    auto MPI_Reduce_scatter(sendbuf: Buf, recvbuf: Buf, recvcounts: IA, datatype: I, op: I,
        comm: I);
    auto MPI_Reduce_scatter_block(sendbuf: Buf, recvbuf: Buf, recvcount: I, datatype: I, op: I,
        comm: I);
    auto MPI_Scan(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I);
    auto MPI_Exscan(sendbuf: Buf, recvbuf: Buf, count: I, datatype: I, op: I, comm: I);
    custom MPI_Op_create(user_fn: Fun, commute: L, op: O);
    auto MPI_Op_free(op: IO);
    auto MPI_Op_commutative(op: I, commute: LO);

    // datatypes
    auto MPI_Type_contiguous(count: I, oldtype: I, newtype: O);
    auto MPI_Type_vector(count: I, blocklength: I, stride: I, oldtype: I, newtype: O);
    auto MPI_Type_create_hvector(count: I, blocklength: I, stride: A, oldtype: I, newtype: O);
    custom MPI_Type_hvector(count: I, blocklength: I, stride: I, oldtype: I, newtype: O);
    auto MPI_Type_indexed(count: I, array_of_blocklengths: IA, array_of_displacements: IA,
        oldtype: I, newtype: O);
    auto MPI_Type_create_indexed_block(count: I, blocklength: I, array_of_displacements: IA,
        oldtype: I, newtype: O);
    auto MPI_Type_create_hindexed(count: I, array_of_blocklengths: IA,
        array_of_displacements: AA, oldtype: I, newtype: O);
    custom MPI_Type_hindexed(count: I, array_of_blocklengths: IA, array_of_displacements: IA,
        oldtype: I, newtype: O);
    auto MPI_Type_create_struct(count: I, array_of_blocklengths: IA,
        array_of_displacements: AA, array_of_types: IA, newtype: O);
    custom MPI_Type_struct(count: I, array_of_blocklengths: IA, array_of_displacements: IA,
        array_of_types: IA, newtype: O);
    auto MPI_Type_create_resized(oldtype: I, lb: A, extent: A, newtype: O);
    auto MPI_Type_dup(oldtype: I, newtype: O);
    auto MPI_Type_commit(datatype: IO);
    auto MPI_Type_free(datatype: IO);
    auto MPI_Type_size(datatype: I, size: O);
    auto MPI_Type_size_x(datatype: I, size: CntO);
    auto MPI_Type_get_extent_x(datatype: I, lb: CntO, extent: CntO);
    auto MPI_Type_create_f90_integer(r: I, newtype: O);
    auto MPI_Type_create_f90_real(p: I, r: I, newtype: O);
    auto MPI_Type_create_f90_complex(p: I, r: I, newtype: O);
    auto MPI_Type_get_true_extent_x(datatype: I, true_lb: CntO, true_extent: CntO);
    auto MPI_Type_get_extent(datatype: I, lb: AO, extent: AO);
    auto MPI_Type_get_true_extent(datatype: I, true_lb: AO, true_extent: AO);
    custom MPI_Type_extent(datatype: I, extent: O);
    auto MPI_Get_address(location: Buf, address: AO);
    custom MPI_Address(location: Buf, address: O);
    auto MPI_Pack(inbuf: Buf, incount: I, datatype: I, outbuf: Buf, outsize: I, position: IO,
        comm: I);
    auto MPI_Unpack(inbuf: Buf, insize: I, position: IO, outbuf: Buf, outcount: I, datatype: I,
        comm: I);
    auto MPI_Pack_size(incount: I, datatype: I, comm: I, size: O);

    // communicators and groups
    auto MPI_Comm_rank(comm: I, rank: O);
    auto MPI_Comm_size(comm: I, size: O);
    auto MPI_Comm_dup(comm: I, newcomm: O);
    auto MPI_Comm_split(comm: I, color: I, key: I, newcomm: O);
    auto MPI_Comm_create(comm: I, group: I, newcomm: O);
    auto MPI_Comm_free(comm: IO);
    auto MPI_Comm_disconnect(comm: IO);
    auto MPI_Comm_compare(comm1: I, comm2: I, result: O);
    auto MPI_Comm_group(comm: I, group: O);
    auto MPI_Comm_get_parent(parent: O);
    custom MPI_Open_port(info: I, port_name: StrO);
    custom MPI_Close_port(port_name: Str);
    custom MPI_Comm_accept(port_name: Str, info: I, root: I, comm: I, newcomm: O);
    custom MPI_Comm_connect(port_name: Str, info: I, root: I, comm: I, newcomm: O);
    auto MPI_Comm_join(fd: I, intercomm: O);
    custom MPI_Publish_name(service_name: Str, info: I, port_name: Str);
    custom MPI_Unpublish_name(service_name: Str, info: I, port_name: Str);
    custom MPI_Lookup_name(service_name: Str, info: I, port_name: StrO);
    custom MPI_Comm_get_attr(comm: I, comm_keyval: I, attribute_val: AO, flag: LO);
    custom MPI_Attr_get(comm: I, keyval: I, attribute_val: O, flag: LO);
    auto MPI_Group_size(group: I, size: O);
    auto MPI_Group_rank(group: I, rank: O);
    auto MPI_Group_incl(group: I, n: I, ranks: IA, newgroup: O);
    auto MPI_Group_excl(group: I, n: I, ranks: IA, newgroup: O);
    auto MPI_Group_union(group1: I, group2: I, newgroup: O);
    auto MPI_Group_intersection(group1: I, group2: I, newgroup: O);
    auto MPI_Group_difference(group1: I, group2: I, newgroup: O);
    auto MPI_Group_translate_ranks(group1: I, n: I, ranks1: IA, group2: I, ranks2: OA);
    auto MPI_Group_compare(group1: I, group2: I, result: O);
    auto MPI_Group_free(group: IO);

    // ULFM (mpi-ext.h)
    auto MPIX_Comm_revoke(comm: I);
    auto MPIX_Comm_is_revoked(comm: I, flag: LO);
    auto MPIX_Comm_shrink(comm: I, newcomm: O);
    auto MPIX_Comm_agree(comm: I, flag: IO);
    auto MPIX_Comm_get_failed(comm: I, failedgrp: O);
    auto MPIX_Comm_ack_failed(comm: I, num_to_ack: I, num_acked: O);
    auto MPIX_Comm_failure_ack(comm: I);
    auto MPIX_Comm_failure_get_acked(comm: I, failedgrp: O);

    // MPI Stages and application checkpoints
    auto MPIX_Checkpoint_write();
    auto MPIX_Checkpoint_read();
    auto MPIX_Checkpoint_needed(flag: LO);
    auto MPIX_Get_fault_epoch(epoch: O);
    auto MPIX_Get_recovery_mode(mode: O);
    auto MPIX_Serialize_handles();
    auto MPIX_Deserialize_handles();
    custom MPIX_Serialize_handler_register(handler: Fun);
    custom MPIX_Deserialize_handler_register(handler: Fun);
    custom MPIX_Protect(id: I, buf: Region, count: I, datatype: I);
    custom MPIX_Protect_x(id: I, buf: Region, count: Cnt, datatype: I);
    auto MPIX_Unprotect(id: I);
    auto MPIX_Checkpoint_restore();
    custom MPIX_Checkpoint_route(name: Str, path: StrO);
    custom MPIX_Checkpoint_locate(name: Str, path: StrO);
}
