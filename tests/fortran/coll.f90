! Collectives from Fortran (`use mpi`): MPI_IN_PLACE at the root and
! everywhere, Fortran types in reductions (LOGICAL with MPI_LAND/MPI_LOR,
! COMPLEX sums, MPI_2DOUBLE_PRECISION and MPI_2INTEGER with MAXLOC/MINLOC),
! a user operation written in Fortran, and the v-variants.
module user_ops
  implicit none
contains
  ! inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i))) on DOUBLE PRECISION
  subroutine absmax(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    double precision, intent(in) :: invec(len)
    double precision, intent(inout) :: inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine absmax
end module user_ops

program coll
  use mpi
  use checks
  use user_ops
  implicit none
  integer :: rank, np, ierr, i, j, root, op, expect
  integer :: ib(4), ib2(4), counts(64), displs(64)
  integer, allocatable :: whole(:), part(:)
  double precision :: d(3), d2(3), pair(2, 2), pair2(2, 2)
  integer :: ipair(2), ipair2(2)
  complex :: c(2), c2(2)
  logical :: l(2), l2(2), commute

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  allocate(whole(4 * np), part(4 * np))

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call check_rc(ierr, 'MPI_BARRIER')

  do root = 0, np - 1
    ib = -1
    if (rank == root) ib = (/ 1, 2, 3, root /)
    call MPI_BCAST(ib, 4, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
    call check(all(ib == (/ 1, 2, 3, root /)), 'MPI_BCAST')
  end do

  ! Sums, plain and MPI_IN_PLACE.
  d = (/ dble(rank), 1d0, 0.5d0 * rank /)
  call MPI_ALLREDUCE(d, d2, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(d2(1) == dble(np * (np - 1) / 2) .and. d2(2) == dble(np), 'MPI_ALLREDUCE sum')
  call MPI_ALLREDUCE(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(d == d2), 'MPI_ALLREDUCE with MPI_IN_PLACE')
  ib = rank + 1
  root = np - 1
  if (rank == root) then
    call MPI_REDUCE(MPI_IN_PLACE, ib, 4, MPI_INTEGER, MPI_PROD, root, MPI_COMM_WORLD, ierr)
    expect = 1
    do i = 1, np
      expect = expect * i
    end do
    call check(all(ib == expect), 'MPI_REDUCE MPI_PROD with MPI_IN_PLACE at the root')
  else
    call MPI_REDUCE(ib, ib2, 4, MPI_INTEGER, MPI_PROD, root, MPI_COMM_WORLD, ierr)
    call check_rc(ierr, 'MPI_REDUCE at a non-root')
  end if

  ! LOGICAL reductions.
  l = (/ .true., rank == 0 /)
  call MPI_ALLREDUCE(l, l2, 2, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  call check(l2(1) .and. (l2(2) .eqv. (np == 1)), 'MPI_LAND on MPI_LOGICAL')
  call MPI_ALLREDUCE(l, l2, 2, MPI_LOGICAL, MPI_LOR, MPI_COMM_WORLD, ierr)
  call check(l2(1) .and. l2(2), 'MPI_LOR on MPI_LOGICAL')

  ! COMPLEX sum.
  c = (/ cmplx(1.0, 2.0), cmplx(real(rank), -1.0) /)
  call MPI_ALLREDUCE(c, c2, 2, MPI_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(c2(1) == cmplx(real(np), 2.0 * np) .and. c2(2) == cmplx(real(np * (np - 1) / 2), -real(np)), &
             'MPI_SUM on MPI_COMPLEX')

  ! MAXLOC / MINLOC on pairs (value, index).
  pair(:, 1) = (/ dble(mod(rank * 7, np + 1)), dble(rank) /)
  pair(:, 2) = (/ -dble(rank), dble(rank) /)
  call MPI_ALLREDUCE(pair, pair2, 2, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  call check(pair2(1, 2) == 0d0 .and. pair2(2, 2) == 0d0, 'MPI_MAXLOC on MPI_2DOUBLE_PRECISION')
  ipair = (/ 10 - rank, rank /)
  call MPI_ALLREDUCE(ipair, ipair2, 1, MPI_2INTEGER, MPI_MINLOC, MPI_COMM_WORLD, ierr)
  call check(ipair2(1) == 11 - np .and. ipair2(2) == np - 1, 'MPI_MINLOC on MPI_2INTEGER')

  ! A user operation written in Fortran.
  call MPI_OP_CREATE(absmax, .true., op, ierr)
  call check_rc(ierr, 'MPI_OP_CREATE')
  call MPI_OP_COMMUTATIVE(op, commute, ierr)
  call check(commute, 'MPI_OP_COMMUTATIVE')
  d = (/ dble(rank) * (-1d0)**rank, 2d0, -3d0 /)
  call MPI_ALLREDUCE(d, d2, 3, MPI_DOUBLE_PRECISION, op, MPI_COMM_WORLD, ierr)
  call check(d2(1) == dble(np - 1) .and. d2(2) == 2d0 .and. d2(3) == merge(-3d0, 3d0, np == 1), &
             'user operation in Fortran')
  call MPI_OP_FREE(op, ierr)
  call check(op == MPI_OP_NULL, 'MPI_OP_FREE')

  ! Gather / scatter / allgather / alltoall, with MPI_IN_PLACE forms.
  ib = (/ (rank * 4 + i, i = 0, 3) /)
  call MPI_GATHER(ib, 4, MPI_INTEGER, whole, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(all(whole == (/ (i, i = 0, 4 * np - 1) /)), 'MPI_GATHER')
  call MPI_SCATTER(whole, 4, MPI_INTEGER, ib2, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(ib2 == ib), 'MPI_SCATTER')
  whole = -1
  whole(rank * 4 + 1:rank * 4 + 4) = ib
  call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, whole, 4, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(whole == (/ (i, i = 0, 4 * np - 1) /)), 'MPI_ALLGATHER with MPI_IN_PLACE')
  do i = 1, np
    counts(i) = i
    displs(i) = (i - 1) * 4
  end do
  part = -1
  call MPI_ALLGATHERV(ib, rank + 1, MPI_INTEGER, part, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 1, np
    call check(all(part(displs(i) + 1:displs(i) + i) == (/ ((i - 1) * 4 + j, j = 0, i - 1) /)), 'MPI_ALLGATHERV')
  end do
  call MPI_GATHERV(ib, rank + 1, MPI_INTEGER, part, counts, displs, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check_rc(ierr, 'MPI_GATHERV')
  ib2 = -1
  call MPI_SCATTERV(whole, counts, displs, MPI_INTEGER, ib2, rank + 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(ib2(1:rank + 1) == ib(1:rank + 1)), 'MPI_SCATTERV')
  do i = 1, np
    whole(i) = rank * 100 + (i - 1)
  end do
  call MPI_ALLTOALL(whole, 1, MPI_INTEGER, part, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(part(1:np) == (/ (i * 100 + rank, i = 0, np - 1) /)), 'MPI_ALLTOALL')

  ! Reduce_scatter_block, scan, exscan.
  whole(1:np) = rank + 1
  call MPI_REDUCE_SCATTER_BLOCK(whole, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(i == np * (np + 1) / 2, 'MPI_REDUCE_SCATTER_BLOCK')
  counts(1:np) = 1
  call MPI_REDUCE_SCATTER(whole, i, counts, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(i == np, 'MPI_REDUCE_SCATTER')
  call MPI_SCAN(rank + 1, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(i == (rank + 1) * (rank + 2) / 2, 'MPI_SCAN')
  i = -7
  call MPI_EXSCAN(rank + 1, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank > 0) call check(i == rank * (rank + 1) / 2, 'MPI_EXSCAN')

  call checks_done('coll')
  call MPI_FINALIZE(ierr)
end program coll
