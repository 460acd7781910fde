! MPI 4.0 sessions from Fortran (`use mpi`): process sets and their names
! (PSET_LEN without C's NUL), a group and a communicator of the WORLD set
! (a CHARACTER string tag), the session's error handler, and the
! communicators made from groups alone.
program sessions
  use checks
  use mpi
  implicit none
  integer :: s, ierr, n, i, length, info, g, lib, size, rank, sum, np, wrank
  integer :: evens, half, inter, remote, eh
  integer :: ranks(64)
  character(len=MPI_MAX_PSET_NAME_LEN) :: name
  character(len=MPI_MAX_INFO_VAL) :: value
  logical :: flag, seen_world, seen_self

  call MPI_INIT(ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, wrank, ierr)
  call MPI_SESSION_INIT(MPI_INFO_NULL, MPI_ERRORS_RETURN, s, ierr)
  call check_rc(ierr, 'MPI_SESSION_INIT')
  call check(s /= MPI_SESSION_NULL, 'a session handle')

  call MPI_SESSION_GET_INFO(s, info, ierr)
  call MPI_INFO_GET(info, 'thread_level', MPI_MAX_INFO_VAL, value, flag, ierr)
  call check(flag .and. value == 'MPI_THREAD_SINGLE', 'thread_level by default')
  call MPI_INFO_FREE(info, ierr)

  call MPI_SESSION_GET_NUM_PSETS(s, MPI_INFO_NULL, n, ierr)
  call check(n == 2, 'two process sets')
  seen_world = .false.
  seen_self = .false.
  do i = 0, n - 1
    length = 0
    call MPI_SESSION_GET_NTH_PSET(s, MPI_INFO_NULL, i, length, name, ierr)
    call check_rc(ierr, 'MPI_SESSION_GET_NTH_PSET for the length')
    length = len(name)
    call MPI_SESSION_GET_NTH_PSET(s, MPI_INFO_NULL, i, length, name, ierr)
    call check(length == len_trim(name), 'PSET_LEN is the name''s length')
    if (name == 'mpi://WORLD') seen_world = .true.
    if (name == 'mpi://SELF') seen_self = .true.
    call MPI_SESSION_GET_PSET_INFO(s, name, info, ierr)
    call MPI_INFO_GET(info, 'mpi_size', MPI_MAX_INFO_VAL, value, flag, ierr)
    call check(flag, 'mpi_size of a set')
    if (name == 'mpi://SELF') call check(value == '1', 'SELF has one process')
    call MPI_INFO_FREE(info, ierr)
  end do
  call check(seen_world .and. seen_self, 'mpi://WORLD and mpi://SELF')

  call MPI_GROUP_FROM_SESSION_PSET(s, 'mpi://WORLD', g, ierr)
  call check_rc(ierr, 'MPI_GROUP_FROM_SESSION_PSET')
  call MPI_COMM_CREATE_FROM_GROUP(g, 'org.mpistages.test.fortran', MPI_INFO_NULL, &
       MPI_ERRORS_RETURN, lib, ierr)
  call check_rc(ierr, 'MPI_COMM_CREATE_FROM_GROUP')
  call MPI_GROUP_FREE(g, ierr)
  call MPI_COMM_SIZE(lib, size, ierr)
  call MPI_COMM_RANK(lib, rank, ierr)
  call MPI_ALLREDUCE(rank, sum, 1, MPI_INTEGER, MPI_SUM, lib, ierr)
  call check(size == np .and. sum == np * (np - 1) / 2, 'a reduction over the WORLD set')
  call MPI_COMM_FREE(lib, ierr)

  ! Errors of the session go to its handler (MPI_ERRORS_RETURN).
  call MPI_GROUP_FROM_SESSION_PSET(s, 'mpi://NOWHERE', g, ierr)
  call check(ierr == MPI_ERR_ARG, 'an unknown process set')
  call MPI_SESSION_GET_ERRHANDLER(s, eh, ierr)
  call check(eh == MPI_ERRORS_RETURN, 'MPI_SESSION_GET_ERRHANDLER')

  ! An inter-communicator between the even and the odd ranks.
  if (np > 1) then
    call MPI_COMM_GROUP(MPI_COMM_WORLD, g, ierr)
    n = 0
    do i = 0, np - 1, 2
      n = n + 1
      ranks(n) = i
    end do
    if (mod(wrank, 2) == 0) then
      call MPI_GROUP_INCL(g, n, ranks, evens, ierr)
      call MPI_GROUP_EXCL(g, n, ranks, half, ierr)
    else
      call MPI_GROUP_EXCL(g, n, ranks, evens, ierr)
      call MPI_GROUP_INCL(g, n, ranks, half, ierr)
    end if
    call MPI_INTERCOMM_CREATE_FROM_GROUPS(evens, 0, half, 0, 'org.mpistages.test.pair', &
         MPI_INFO_NULL, MPI_ERRORS_RETURN, inter, ierr)
    call check_rc(ierr, 'MPI_INTERCOMM_CREATE_FROM_GROUPS')
    call MPI_COMM_REMOTE_SIZE(inter, remote, ierr)
    if (mod(wrank, 2) == 0) then
      call check(remote == np - n, 'the remote group is the odd ranks')
    else
      call check(remote == n, 'the remote group is the even ranks')
    end if
    call MPI_COMM_FREE(inter, ierr)
    call MPI_GROUP_FREE(evens, ierr)
    call MPI_GROUP_FREE(half, ierr)
    call MPI_GROUP_FREE(g, ierr)
  end if

  call MPI_SESSION_FINALIZE(s, ierr)
  call check(ierr == 0 .and. s == MPI_SESSION_NULL, 'MPI_SESSION_FINALIZE')
  call checks_done('sessions')
  call MPI_FINALIZE(ierr)
end program sessions
