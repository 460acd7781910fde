! The mpi_f08 module: handle types and their comparison, TYPE(MPI_Status),
! optional IERROR, the ignore sentinels, MPI_IN_PLACE, and the common calls
! (point-to-point, collectives blocking and not, datatypes, communicators,
! topologies, errors, info, files blocking, non-blocking and split,
! one-sided communication).
program f08
  use mpi_f08
  use checks
  implicit none
  integer :: rank, np, ierr, v, total, i, n, dims(2), coords(2), left, right
  integer :: buf(8), got(8), vals(4)
  type(MPI_Status) :: st, sts(2)
  type(MPI_Request) :: reqs(2), req
  type(MPI_Comm) :: dup, half, cart
  type(MPI_Datatype) :: pair, strided
  type(MPI_Info) :: info
  type(MPI_File) :: fh
  type(MPI_Group) :: g
  type(MPI_Win) :: win
  type(MPI_Session) :: session
  type(MPI_Group) :: sg
  integer :: nsets
  integer :: slots(16), one, old
  integer(kind=MPI_ADDRESS_KIND) :: tdisp, attr
  logical :: flag, periods(2)
  character(len=512) :: dir
  character(len=MPI_MAX_INFO_VAL) :: value
  integer(kind=MPI_OFFSET_KIND) :: fsize, disp
  integer :: every(3), all3(3 * 16)
  double precision :: x

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call check(ierr == MPI_SUCCESS .and. np >= 1, 'MPI_Comm_size with ierror')

  ! handles compare by value
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call check(dup /= MPI_COMM_WORLD .and. .not. (dup == MPI_COMM_NULL), 'handle == and /=')

  ! point to point around a ring, statuses and the ignore sentinels
  left = mod(rank + np - 1, np)
  right = mod(rank + 1, np)
  call MPI_Irecv(v, 1, MPI_INTEGER, left, 7, dup, reqs(1))
  call MPI_Isend(rank * 10, 1, MPI_INTEGER, right, 7, dup, reqs(2))
  call MPI_Waitall(2, reqs, sts)
  call check(v == left * 10, 'MPI_Waitall value')
  call check(sts(1)%MPI_SOURCE == left .and. sts(1)%MPI_TAG == 7, 'TYPE(MPI_Status) fields')
  call check(reqs(1) == MPI_REQUEST_NULL, 'completed requests become MPI_REQUEST_NULL')
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, right, 8, v, 1, MPI_INTEGER, left, 8, dup, st)
  call MPI_Get_count(st, MPI_INTEGER, n)
  call check(v == left .and. n == 1, 'MPI_Sendrecv and MPI_Get_count')
  call MPI_Irecv(v, 1, MPI_INTEGER, left, 9, dup, reqs(1))
  call MPI_Send(rank + 100, 1, MPI_INTEGER, right, 9, dup)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  call check(v == left + 100, 'MPI_STATUS_IGNORE')
  call MPI_Irecv(v, 1, MPI_INTEGER, left, 10, dup, reqs(1))
  call MPI_Isend(rank, 1, MPI_INTEGER, right, 10, dup, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call check(v == left, 'MPI_STATUSES_IGNORE')

  ! collectives
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(total == np * (np - 1) / 2, 'MPI_Allreduce')
  v = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  call check(v == np, 'MPI_IN_PLACE')
  v = 0
  if (rank == 0) v = 42
  call MPI_Bcast(v, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call check(v == 42, 'MPI_Bcast')
  call MPI_Iallreduce(1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req)
  call MPI_Test(req, flag, st)
  call MPI_Wait(req, st)
  call check(total == np, 'MPI_Iallreduce')
  call MPI_Barrier(MPI_COMM_WORLD)

  ! a derived datatype
  buf = [(i, i = 1, 8)]
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, pair)
  call MPI_Type_commit(pair)
  got = 0
  call MPI_Sendrecv(buf, 1, pair, 0, 1, got, 2, MPI_INTEGER, 0, 1, MPI_COMM_SELF, st)
  call check(got(1) == 1 .and. got(2) == 3, 'MPI_Type_vector')
  call MPI_Type_free(pair)
  call check(pair == MPI_DATATYPE_NULL, 'MPI_Type_free')

  ! communicators and a Cartesian topology
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half)
  call MPI_Comm_size(half, n)
  call check(n == (np + 1 - mod(rank, 2)) / 2, 'MPI_Comm_split')
  call MPI_Comm_free(half)
  dims = 0
  call MPI_Dims_create(np, 2, dims)
  periods = .true.
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart)
  call MPI_Cart_coords(cart, rank, 2, coords)
  call check(coords(1) * dims(2) + coords(2) == rank, 'MPI_Cart_coords')
  call MPI_Comm_group(cart, g)
  call MPI_Group_size(g, n)
  call check(n == np, 'MPI_Comm_group')
  call MPI_Group_free(g)
  call MPI_Comm_free(cart)

  ! errors come back through the optional IERROR
  call MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)
  call MPI_Send(v, 1, MPI_INTEGER, np + 5, 0, dup, ierr)
  call check(ierr == MPI_ERR_RANK, 'an invalid rank returns MPI_ERR_RANK')
  call MPI_Comm_free(dup)

  ! info
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'colour', 'green')
  call MPI_Info_get(info, 'colour', MPI_MAX_INFO_VAL, value, flag)
  call check(flag .and. trim(value) == 'green', 'MPI_Info_get')
  call MPI_Info_free(info)
  call check(info == MPI_INFO_NULL, 'MPI_Info_free')

  ! a file: each rank's four integers at its offset
  call get_environment_variable('FILE_TEST_DIR', dir)
  call MPI_File_open(MPI_COMM_WORLD, trim(dir)//'/f08.bin', &
       MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, fh)
  vals = rank
  call MPI_File_write_at_all(fh, int(16 * rank, MPI_OFFSET_KIND), vals, 4, MPI_INTEGER, st)
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_File_get_size(fh, fsize)
  call check(fsize == 16 * np, 'MPI_File_get_size')
  call MPI_File_read_at(fh, int(16 * left, MPI_OFFSET_KIND), vals, 4, MPI_INTEGER, MPI_STATUS_IGNORE)
  call check(all(vals == left), 'MPI_File_read_at')
  call MPI_File_close(fh)
  call check(fh == MPI_FILE_NULL, 'MPI_File_close')

  ! a view: each rank sees every np-th integer, from its own
  call MPI_File_open(MPI_COMM_WORLD, trim(dir)//'/view.bin', &
       MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, fh)
  call MPI_Type_create_resized(MPI_INTEGER, 0_MPI_ADDRESS_KIND, int(4 * np, MPI_ADDRESS_KIND), strided)
  call MPI_Type_commit(strided)
  disp = 4 * rank
  call MPI_File_set_view(fh, disp, MPI_INTEGER, strided, 'native', MPI_INFO_NULL)
  every = [(100 * rank + i, i = 1, 3)]
  call MPI_File_write_all(fh, every, 3, MPI_INTEGER, MPI_STATUS_IGNORE)
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_File_set_view(fh, 0_MPI_OFFSET_KIND, MPI_INTEGER, MPI_INTEGER, 'native', MPI_INFO_NULL)
  if (np <= 16) then
    call MPI_File_read_at(fh, 0_MPI_OFFSET_KIND, all3, 3 * np, MPI_INTEGER, MPI_STATUS_IGNORE)
    call check(all([(all3(i + 1) == 100 * mod(i, np) + i / np + 1, i = 0, 3 * np - 1)]), &
         'MPI_File_set_view: integers interleaved by rank')
  end if
  ! non-blocking collective read and a split collective one of the same
  every = -1
  call MPI_File_iread_at_all(fh, int(rank, MPI_OFFSET_KIND), every, 3, MPI_INTEGER, req)
  call MPI_Wait(req, st)
  call MPI_Get_count(st, MPI_INTEGER, n)
  call check(n == 3 .and. every(1) == 100 * rank + 1, 'MPI_File_iread_at_all')
  call MPI_File_read_at_all_begin(fh, 0_MPI_OFFSET_KIND, every, 3, MPI_INTEGER)
  call MPI_File_read_at_all_end(fh, every, st)
  call check(every(1) == 1 .and. (np == 1 .or. every(2) == 101), 'MPI_File_read_at_all_begin/end')
  call MPI_File_close(fh)
  call MPI_Type_free(strided)

  ! one-sided: everyone puts its rank into slot rank+1 of everyone's
  ! window and adds 1 to slot 16; a fetch-and-op under a lock; attributes
  slots = 0
  call MPI_Win_create(slots, int(4 * 16, MPI_ADDRESS_KIND), 4, MPI_INFO_NULL, MPI_COMM_WORLD, win)
  call MPI_Win_fence(0, win)
  one = 1
  do i = 0, min(np, 15) - 1
    tdisp = rank
    if (rank < 15) call MPI_Put(rank, 1, MPI_INTEGER, i, tdisp, 1, MPI_INTEGER, win)
    call MPI_Accumulate(one, 1, MPI_INTEGER, i, 15_MPI_ADDRESS_KIND, 1, MPI_INTEGER, MPI_SUM, win)
  end do
  call MPI_Win_fence(0, win)
  if (rank < 15) then
    call check(all([(slots(i + 1) == i, i = 0, min(np, 15) - 1)]) .and. slots(16) == min(np, 15), &
         'MPI_Put and MPI_Accumulate under MPI_Win_fence')
  end if
  ! everyone has looked before anyone changes rank 0's window again
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win)
  call MPI_Fetch_and_op(one, old, MPI_INTEGER, 0, 15_MPI_ADDRESS_KIND, MPI_SUM, win)
  call MPI_Win_unlock(0, win)
  call check(old >= min(np, 15) .and. old < min(np, 15) + np, 'MPI_Fetch_and_op')
  call MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, attr, flag)
  call check(flag .and. attr == 4, 'MPI_Win_get_attr')
  call MPI_Win_free(win)
  call check(win == MPI_WIN_NULL, 'MPI_Win_free')

  call MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, session)
  call MPI_Session_get_num_psets(session, MPI_INFO_NULL, nsets)
  call MPI_Group_from_session_pset(session, 'mpi://SELF', sg)
  call MPI_Group_size(sg, n)
  call check(nsets == 2 .and. n == 1, 'a session, its sets and the SELF group')
  call MPI_Group_free(sg)
  call MPI_Session_finalize(session)
  call check(session == MPI_SESSION_NULL, 'MPI_Session_finalize')

  x = MPI_Wtime()
  call check(x > 0d0 .and. MPI_Wtick() > 0d0, 'MPI_Wtime and MPI_Wtick')
  call checks_done('f08')
  call MPI_Finalize()
end program f08
