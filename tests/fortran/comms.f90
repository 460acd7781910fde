! Communicators, groups, attributes and strings from Fortran, through the
! legacy header in free form (`include 'mpif.h'`).
program comms
  use checks
  implicit none
  include 'mpif.h'
  integer :: rank, np, ierr, dup, half, sub, res, wgroup, g1, g2, gu, gi, gd, n, r
  integer :: ranks(64), ranks2(64), hrank, hsize, i, sum
  integer(kind=MPI_ADDRESS_KIND) :: tag_ub
  integer :: old_style_value
  logical :: flag
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  character(len=MPI_MAX_ERROR_STRING) :: msg
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
  character(len=4) :: short

  call MPI_INIT(ierr)
  call MPI_INITIALIZED(flag, ierr)
  call check(flag, 'MPI_INITIALIZED')
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  call MPI_COMM_SIZE(MPI_COMM_SELF, n, ierr)
  call check(n == 1, 'MPI_COMM_SELF has one rank')

  ! Dup, compare, split, free.
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  call MPI_COMM_COMPARE(MPI_COMM_WORLD, dup, res, ierr)
  call check(res == MPI_CONGRUENT, 'MPI_COMM_COMPARE of a dup')
  call MPI_COMM_COMPARE(dup, dup, res, ierr)
  call check(res == MPI_IDENT, 'MPI_COMM_COMPARE with itself')
  call MPI_ALLREDUCE(rank, sum, 1, MPI_INTEGER, MPI_SUM, dup, ierr)
  call check(sum == np * (np - 1) / 2, 'MPI_ALLREDUCE on a dup')
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), -rank, half, ierr)
  call MPI_COMM_RANK(half, hrank, ierr)
  call MPI_COMM_SIZE(half, hsize, ierr)
  call check(hsize == (np + 1 - mod(rank, 2)) / 2, 'MPI_COMM_SPLIT size')
  call check(hrank == hsize - 1 - rank / 2, 'MPI_COMM_SPLIT orders by key')
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, MPI_UNDEFINED, 0, sub, ierr)
  call check(sub == MPI_COMM_NULL, 'MPI_COMM_SPLIT with MPI_UNDEFINED')
  call MPI_COMM_FREE(half, ierr)
  call check(half == MPI_COMM_NULL, 'MPI_COMM_FREE')

  ! Groups: incl, excl, union, intersection, difference, translate.
  call MPI_COMM_GROUP(MPI_COMM_WORLD, wgroup, ierr)
  call MPI_GROUP_SIZE(wgroup, n, ierr)
  call MPI_GROUP_RANK(wgroup, r, ierr)
  call check(n == np .and. r == rank, 'MPI_GROUP_SIZE / MPI_GROUP_RANK')
  n = 0
  do i = np - 1, 0, -2
    n = n + 1
    ranks(n) = i
  end do
  call MPI_GROUP_INCL(wgroup, n, ranks, g1, ierr)
  call MPI_GROUP_EXCL(wgroup, n, ranks, g2, ierr)
  call MPI_GROUP_UNION(g1, g2, gu, ierr)
  call MPI_GROUP_INTERSECTION(g1, g2, gi, ierr)
  call MPI_GROUP_DIFFERENCE(wgroup, g2, gd, ierr)
  call MPI_GROUP_SIZE(gu, r, ierr)
  call check(r == np, 'MPI_GROUP_UNION size')
  call MPI_GROUP_SIZE(gi, r, ierr)
  call check(r == 0, 'MPI_GROUP_INTERSECTION is empty')
  call MPI_GROUP_COMPARE(gd, g1, res, ierr)
  ! The same ranks; in another order (world's) once there are two or more.
  call check(res == merge(MPI_IDENT, MPI_SIMILAR, n == 1), 'MPI_GROUP_DIFFERENCE vs the included group')
  call MPI_GROUP_TRANSLATE_RANKS(g1, n, (/ (i, i = 0, n - 1) /), wgroup, ranks2, ierr)
  call check(all(ranks2(1:n) == ranks(1:n)), 'MPI_GROUP_TRANSLATE_RANKS')
  call MPI_COMM_CREATE(MPI_COMM_WORLD, g1, sub, ierr)
  if (mod(np - 1 - rank, 2) == 0) then
    call MPI_COMM_SIZE(sub, r, ierr)
    call check(r == n, 'MPI_COMM_CREATE size')
    call MPI_COMM_FREE(sub, ierr)
  else
    call check(sub == MPI_COMM_NULL, 'MPI_COMM_CREATE outside the group')
  end if
  call MPI_GROUP_FREE(g1, ierr)
  call MPI_GROUP_FREE(g2, ierr)
  call MPI_GROUP_FREE(gu, ierr)
  call MPI_GROUP_FREE(gi, ierr)
  call MPI_GROUP_FREE(gd, ierr)
  call MPI_GROUP_FREE(wgroup, ierr)
  call check(wgroup == MPI_GROUP_NULL, 'MPI_GROUP_FREE')

  ! Attributes: the value itself, in an address-sized INTEGER.
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag, ierr)
  call check(flag .and. tag_ub >= 32767, 'MPI_COMM_GET_ATTR MPI_TAG_UB')
  call MPI_ATTR_GET(dup, MPI_TAG_UB, old_style_value, flag, ierr)
  call check(flag .and. old_style_value == tag_ub, 'MPI_ATTR_GET MPI_TAG_UB')
  call MPI_COMM_FREE(dup, ierr)

  ! Strings: blank padded, lengths returned.
  host = '?'
  call MPI_GET_PROCESSOR_NAME(host, n, ierr)
  call check(ierr == MPI_SUCCESS .and. n > 0 .and. len_trim(host) == n, 'MPI_GET_PROCESSOR_NAME')
  call MPI_ERROR_STRING(MPI_ERR_RANK, msg, n, ierr)
  call check(n > 0 .and. index(msg, 'MPI_ERR_RANK') > 0 .and. len_trim(msg) == n, 'MPI_ERROR_STRING')
  call MPI_ERROR_STRING(MPI_ERR_COMM, short, n, ierr)
  call check(n == 4 .and. short == 'MPI_', 'MPI_ERROR_STRING into a short string is cut, not overrun')
  call MPI_GET_LIBRARY_VERSION(version, n, ierr)
  call check(index(version, 'mpistages') == 1, 'MPI_GET_LIBRARY_VERSION')
  call MPI_GET_VERSION(n, r, ierr)
  call check(n == MPI_VERSION .and. r == MPI_SUBVERSION, 'MPI_GET_VERSION')
  call check(MPI_WTIME() > 0d0 .and. MPI_WTICK() > 0d0, 'MPI_WTIME / MPI_WTICK')

  ! A protected scalar through this header: MPI_F_SYNC_REG after the
  ! restore makes the compiler read it again (it cannot see the restore
  ! change it; without the call, -O1 already keeps the old value).
  n = 40 + rank
  call MPIX_PROTECT(7, n, 1, MPI_INTEGER, ierr)
  call MPIX_CHECKPOINT_WRITE(ierr)
  n = -1
  call MPIX_CHECKPOINT_RESTORE(ierr)
  call MPI_F_SYNC_REG(n)
  call check(ierr == MPI_SUCCESS .and. n == 40 + rank, 'protected scalar restored, seen after MPI_F_SYNC_REG')
  call MPIX_UNPROTECT(7, ierr)

  call checks_done('comms')
  call MPI_FINALIZE(ierr)
  call MPI_FINALIZED(flag, ierr)
  if (.not. flag) stop 1
end program comms
