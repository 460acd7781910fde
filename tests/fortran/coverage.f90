! Beyond the LULESH/CoMD subset, from Fortran (`use mpi`): a periodic
! Cartesian grid and its neighbourhood, non-blocking and persistent
! collectives, matched probe, Comm_split_type, an inter-communicator, info,
! error classes and MPI-IO (in FILE_TEST_DIR).
program coverage
  use mpi
  use checks
  implicit none
  integer :: rank, np, ierr, i, dims(2), coords(2), cart, src, dst, kind
  integer :: got(4), req, val, total, flag, msg, node, nn, half, inter, rsize
  integer :: status(MPI_STATUS_SIZE), info, nkeys, cls, code, comb, ni, na, nt
  logical :: periods(2), is_inter, lflag
  integer :: keyval, dupc, slen
  integer(kind=MPI_ADDRESS_KIND) :: aval, aval2, extra
  character(len=MPI_MAX_INFO_VAL) :: sval
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  character(len=512) :: dir
  character(len=MPI_MAX_PORT_NAME) :: port, found
  integer :: rest, joined
  integer :: fh, vals(3), back(3)
  integer(kind=MPI_OFFSET_KIND) :: fsize, disp

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)

  dims = 0
  call MPI_DIMS_CREATE(np, 2, dims, ierr)
  call check(dims(1) * dims(2) == np .and. dims(1) >= dims(2), 'MPI_DIMS_CREATE')
  periods = (/ .true., .true. /)
  call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call check_rc(ierr, 'MPI_CART_CREATE')
  call MPI_TOPO_TEST(cart, kind, ierr)
  call check(kind == MPI_CART, 'MPI_TOPO_TEST')
  call MPI_CART_COORDS(cart, rank, 2, coords, ierr)
  call check(coords(1) == rank / dims(2) .and. coords(2) == mod(rank, dims(2)), 'MPI_CART_COORDS')
  call MPI_CART_RANK(cart, coords, i, ierr)
  call check(i == rank, 'MPI_CART_RANK')
  call MPI_CART_SHIFT(cart, 1, 1, src, dst, ierr)
  call check(dst == coords(1) * dims(2) + mod(coords(2) + 1, dims(2)), 'MPI_CART_SHIFT')
  got = -1
  call MPI_NEIGHBOR_ALLGATHER(rank, 1, MPI_INTEGER, got, 1, MPI_INTEGER, cart, ierr)
  call check(got(4) == dst .and. got(3) == src, 'MPI_NEIGHBOR_ALLGATHER')

  ! Non-blocking: an allreduce waited for after a blocking barrier.
  call MPI_IALLREDUCE(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_WAIT(req, status, ierr)
  call check(total == np * (np - 1) / 2 .and. req == MPI_REQUEST_NULL, 'MPI_IALLREDUCE')
  val = -1
  if (rank == 0) val = 17
  call MPI_IBCAST(val, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  call check(val == 17, 'MPI_IBCAST')
  ! Persistent: started twice.
  call MPI_ALLREDUCE_INIT(val, total, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, req, ierr)
  do i = 1, 2
    val = rank * i
    call MPI_START(req, ierr)
    call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    call check(total == (np - 1) * i, 'MPI_ALLREDUCE_INIT')
  end do
  call MPI_REQUEST_FREE(req, ierr)

  ! Matched probe of a message to oneself.
  call MPI_ISEND(rank + 100, 1, MPI_INTEGER, rank, 5, MPI_COMM_WORLD, req, ierr)
  call MPI_MPROBE(rank, 5, MPI_COMM_WORLD, msg, status, ierr)
  call check(status(MPI_SOURCE) == rank .and. msg /= MPI_MESSAGE_NULL, 'MPI_MPROBE')
  call MPI_MRECV(val, 1, MPI_INTEGER, msg, status, ierr)
  call check(val == rank + 100 .and. msg == MPI_MESSAGE_NULL, 'MPI_MRECV')
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)

  call MPI_COMM_SPLIT_TYPE(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node, ierr)
  call MPI_COMM_SIZE(node, nn, ierr)
  call check(nn == np, 'MPI_COMM_SPLIT_TYPE')

  if (np > 1) then
    call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
    call MPI_INTERCOMM_CREATE(half, 0, MPI_COMM_WORLD, 1 - mod(rank, 2), 7, inter, ierr)
    call check_rc(ierr, 'MPI_INTERCOMM_CREATE')
    call MPI_COMM_TEST_INTER(inter, is_inter, ierr)
    call MPI_COMM_REMOTE_SIZE(inter, rsize, ierr)
    if (mod(rank, 2) == 0) then
      call check(is_inter .and. rsize == np / 2, 'MPI_COMM_REMOTE_SIZE')
    else
      call check(is_inter .and. rsize == (np + 1) / 2, 'MPI_COMM_REMOTE_SIZE')
    end if
  end if

  call MPI_INFO_CREATE(info, ierr)
  call MPI_INFO_GET_NKEYS(info, nkeys, ierr)
  call check(nkeys == 0 .and. info /= MPI_INFO_NULL, 'MPI_INFO_CREATE')
  call MPI_INFO_FREE(info, ierr)
  call check(info == MPI_INFO_NULL, 'MPI_INFO_FREE')
  call MPI_INFO_CREATE(info, ierr)
  call MPI_INFO_SET(info, 'color', 'blue', ierr)
  call MPI_INFO_GET(info, 'color', MPI_MAX_INFO_VAL, sval, lflag, ierr)
  call check(lflag .and. trim(sval) == 'blue', 'MPI_INFO_SET/GET')
  call MPI_INFO_GET(info, 'size', MPI_MAX_INFO_VAL, sval, lflag, ierr)
  call check(.not. lflag, 'MPI_INFO_GET of a missing key')
  call MPI_INFO_FREE(info, ierr)
  call MPI_COMM_SET_NAME(MPI_COMM_WORLD, 'the world', ierr)
  call MPI_COMM_GET_NAME(MPI_COMM_WORLD, cname, slen, ierr)
  call check(cname(1:slen) == 'the world' .and. slen == 9, 'MPI_COMM_GET_NAME')
  extra = 0
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, keyval, extra, ierr)
  aval = 12345
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, keyval, aval, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dupc, ierr)
  aval2 = 0
  call MPI_COMM_GET_ATTR(dupc, keyval, aval2, lflag, ierr)
  call check(lflag .and. aval2 == 12345, 'a Fortran attribute copied by MPI_COMM_DUP_FN')
  call MPI_COMM_FREE(dupc, ierr)
  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, keyval, ierr)
  call MPI_COMM_FREE_KEYVAL(keyval, ierr)
  call check(keyval == MPI_KEYVAL_INVALID, 'MPI_COMM_FREE_KEYVAL')

  call MPI_ADD_ERROR_CLASS(cls, ierr)
  call MPI_ADD_ERROR_CODE(cls, code, ierr)
  call MPI_ERROR_CLASS(code, i, ierr)
  call check(i == cls, 'MPI_ADD_ERROR_CODE')
  call MPI_TYPE_GET_ENVELOPE(MPI_INTEGER, ni, na, nt, comb, ierr)
  call check(comb == MPI_COMBINER_NAMED, 'MPI_TYPE_GET_ENVELOPE')

  ! MPI-IO: each rank's three integers at its offset, read back by the
  ! next rank; the shared pointer hands out distinct slots.
  call get_environment_variable('FILE_TEST_DIR', dir)
  call MPI_FILE_OPEN(MPI_COMM_WORLD, trim(dir)//'/f.bin', &
       MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, fh, ierr)
  call check_rc(ierr, 'MPI_FILE_OPEN')
  vals = [rank, 2 * rank, 3 * rank]
  disp = 12 * rank
  call MPI_FILE_WRITE_AT_ALL(fh, disp, vals, 3, MPI_INTEGER, status, ierr)
  call MPI_GET_COUNT(status, MPI_INTEGER, i, ierr)
  call check(i == 3, 'MPI_FILE_WRITE_AT_ALL')
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FILE_GET_SIZE(fh, fsize, ierr)
  call check(fsize == 12 * np, 'MPI_FILE_GET_SIZE')
  disp = 12 * mod(rank + 1, np)
  call MPI_FILE_READ_AT(fh, disp, back, 3, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  call check(back(3) == 3 * mod(rank + 1, np), 'MPI_FILE_READ_AT')
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FILE_SEEK_SHARED(fh, 0_MPI_OFFSET_KIND, MPI_SEEK_END, ierr)
  call MPI_FILE_WRITE_SHARED(fh, rank, 1, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FILE_GET_POSITION_SHARED(fh, disp, ierr)
  call check(disp == 16 * np, 'MPI_FILE_WRITE_SHARED')
  call MPI_FILE_CLOSE(fh, ierr)
  call check(ierr == MPI_SUCCESS .and. fh == MPI_FILE_NULL, 'MPI_FILE_CLOSE')
  call MPI_FILE_OPEN(MPI_COMM_WORLD, trim(dir)//'/missing/f.bin', MPI_MODE_RDONLY, &
       MPI_INFO_NULL, fh, ierr)
  call check(ierr == MPI_ERR_NO_SUCH_FILE, 'MPI_FILE_OPEN of a missing file')

  ! Ports and names: rank 0 publishes a port, everyone finds it; the
  ! other ranks connect to it as one group.
  if (rank == 0) then
    call MPI_OPEN_PORT(MPI_INFO_NULL, port, ierr)
    call check_rc(ierr, 'MPI_OPEN_PORT')
    call MPI_PUBLISH_NAME('f-ocean', MPI_INFO_NULL, port, ierr)
    call check_rc(ierr, 'MPI_PUBLISH_NAME')
  end if
  call MPI_BCAST(port, MPI_MAX_PORT_NAME, MPI_CHARACTER, 0, MPI_COMM_WORLD, ierr)
  call MPI_LOOKUP_NAME('f-ocean', MPI_INFO_NULL, found, ierr)
  call check(ierr == MPI_SUCCESS .and. found == port, 'MPI_LOOKUP_NAME')
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, min(rank, 1), 0, rest, ierr)
  if (np > 1) then
    if (rank == 0) then
      call MPI_COMM_ACCEPT(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, joined, ierr)
    else
      call MPI_COMM_CONNECT(port, MPI_INFO_NULL, 0, rest, joined, ierr)
    end if
    call MPI_COMM_REMOTE_SIZE(joined, rsize, ierr)
    call check(rsize == merge(np - 1, 1, rank == 0), 'MPI_COMM_ACCEPT/CONNECT')
    call MPI_COMM_DISCONNECT(joined, ierr)
  end if
  call MPI_COMM_FREE(rest, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_UNPUBLISH_NAME('f-ocean', MPI_INFO_NULL, port, ierr)
    call MPI_CLOSE_PORT(port, ierr)
    call check_rc(ierr, 'MPI_CLOSE_PORT')
  end if

  call checks_done('coverage')
  call MPI_FINALIZE(ierr)
end program coverage
