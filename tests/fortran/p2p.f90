! Point-to-point from Fortran (`use mpi`): status fields, MPI_STATUS_IGNORE,
! MPI_STATUSES_IGNORE, 1-based indices from WAITANY/TESTSOME, every
! Fortran datatype through SENDRECV, probe, persistent and buffered sends.
program p2p
  use mpi
  use checks
  implicit none
  integer :: rank, np, ierr, right, left, i, n, idx, outcount
  integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 4), reqs(4), idxs(4)
  integer :: ibuf(10), ibuf2(10)
  real :: r(3), r2(3)
  double precision :: d(3), d2(3)
  complex :: c(2), c2(2)
  double complex :: z(2), z2(2)
  logical :: l(3), l2(3), flag
  character(len=8) :: s, s2
  integer(kind=8) :: i8, i8b
  integer, allocatable :: bsendbuf(:)

  call MPI_INIT(ierr)
  call check_rc(ierr, 'MPI_INIT')
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  right = mod(rank + 1, np)
  left = mod(rank - 1 + np, np)

  ! Blocking send/recv between 0 and 1, with the status read back.
  if (np >= 2 .and. rank <= 1) then
    if (rank == 0) then
      ibuf = (/ (i * 3, i = 1, 10) /)
      call MPI_SEND(ibuf, 7, MPI_INTEGER, 1, 42, MPI_COMM_WORLD, ierr)
      call check_rc(ierr, 'MPI_SEND')
    else
      ibuf = -1
      ! A single-completion call leaves MPI_ERROR alone (the standard sets
      ! it only in the multiple-completion calls).
      st(MPI_ERROR) = -5
      call MPI_RECV(ibuf, 10, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
      call check_rc(ierr, 'MPI_RECV')
      call check(st(MPI_SOURCE) == 0, 'status MPI_SOURCE')
      call check(st(MPI_TAG) == 42, 'status MPI_TAG')
      call check(st(MPI_ERROR) == -5, 'status MPI_ERROR left alone')
      call MPI_GET_COUNT(st, MPI_INTEGER, n, ierr)
      call check(n == 7, 'MPI_GET_COUNT after MPI_RECV')
      call MPI_GET_ELEMENTS(st, MPI_INTEGER, n, ierr)
      call check(n == 7, 'MPI_GET_ELEMENTS')
      call check(all(ibuf(1:7) == (/ (i * 3, i = 1, 7) /)) .and. all(ibuf(8:10) == -1), 'MPI_RECV data')
    end if
  end if

  ! MPI_STATUS_IGNORE, and a ring through SENDRECV with every type.
  ibuf = rank
  call MPI_SENDRECV(ibuf, 10, MPI_INTEGER, right, 1, ibuf2, 10, MPI_INTEGER, left, 1, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS .and. all(ibuf2 == left), 'SENDRECV INTEGER with MPI_STATUS_IGNORE')
  r = (/ 1.5, 2.5, real(rank) /)
  call MPI_SENDRECV(r, 3, MPI_REAL, right, 2, r2, 3, MPI_REAL, left, 2, MPI_COMM_WORLD, st, ierr)
  call check(r2(3) == real(left) .and. r2(1) == 1.5, 'SENDRECV MPI_REAL')
  call check(st(MPI_SOURCE) == left .and. st(MPI_TAG) == 2, 'SENDRECV status')
  d = (/ 1d0 / 3d0, -2d0, dble(rank) /)
  call MPI_SENDRECV(d, 3, MPI_DOUBLE_PRECISION, right, 3, d2, 3, MPI_DOUBLE_PRECISION, left, 3, &
                    MPI_COMM_WORLD, st, ierr)
  call check(d2(1) == 1d0 / 3d0 .and. d2(3) == dble(left), 'SENDRECV MPI_DOUBLE_PRECISION')
  c = (/ cmplx(1.0, real(rank)), cmplx(-1.0, 2.0) /)
  call MPI_SENDRECV(c, 2, MPI_COMPLEX, right, 4, c2, 2, MPI_COMPLEX, left, 4, MPI_COMM_WORLD, st, ierr)
  call check(c2(1) == cmplx(1.0, real(left)) .and. c2(2) == cmplx(-1.0, 2.0), 'SENDRECV MPI_COMPLEX')
  call MPI_GET_COUNT(st, MPI_COMPLEX, n, ierr)
  call check(n == 2, 'MPI_GET_COUNT of MPI_COMPLEX')
  z = (/ dcmplx(0.25d0, dble(rank)), dcmplx(1d300, -1d-300) /)
  call MPI_SENDRECV(z, 2, MPI_DOUBLE_COMPLEX, right, 5, z2, 2, MPI_DOUBLE_COMPLEX, left, 5, &
                    MPI_COMM_WORLD, st, ierr)
  call check(z2(1) == dcmplx(0.25d0, dble(left)) .and. z2(2) == z(2), 'SENDRECV MPI_DOUBLE_COMPLEX')
  l = (/ .true., mod(rank, 2) == 0, .false. /)
  call MPI_SENDRECV(l, 3, MPI_LOGICAL, right, 6, l2, 3, MPI_LOGICAL, left, 6, MPI_COMM_WORLD, st, ierr)
  call check(l2(1) .and. (l2(2) .eqv. (mod(left, 2) == 0)) .and. .not. l2(3), 'SENDRECV MPI_LOGICAL')
  write(s, '(a,i3.3)') 'rank', rank
  call MPI_SENDRECV(s, 8, MPI_CHARACTER, right, 7, s2, 8, MPI_CHARACTER, left, 7, MPI_COMM_WORLD, st, ierr)
  write(s, '(a,i3.3)') 'rank', left
  call check(s2 == s, 'SENDRECV MPI_CHARACTER')
  i8 = 3000000000_8 + rank
  call MPI_SENDRECV(i8, 1, MPI_INTEGER8, right, 8, i8b, 1, MPI_INTEGER8, left, 8, MPI_COMM_WORLD, st, ierr)
  call check(i8b == 3000000000_8 + left, 'SENDRECV MPI_INTEGER8')

  ! MPI_PROC_NULL: an empty status from MPI_PROC_NULL.
  call MPI_RECV(ibuf, 10, MPI_INTEGER, MPI_PROC_NULL, 0, MPI_COMM_WORLD, st, ierr)
  call MPI_GET_COUNT(st, MPI_INTEGER, n, ierr)
  call check(st(MPI_SOURCE) == MPI_PROC_NULL .and. st(MPI_TAG) == MPI_ANY_TAG .and. n == 0, &
             'status of a receive from MPI_PROC_NULL')

  ! Nonblocking ring: statuses array, then MPI_STATUSES_IGNORE.
  ibuf = rank * 10
  call MPI_IRECV(ibuf2, 10, MPI_INTEGER, left, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(ibuf, 10, MPI_INTEGER, right, 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, sts, ierr)
  call check(ierr == MPI_SUCCESS .and. all(ibuf2 == left * 10), 'ISEND/IRECV/WAITALL data')
  call check(sts(MPI_SOURCE, 1) == left .and. sts(MPI_TAG, 1) == 9, 'WAITALL statuses(:,1)')
  call check(all(reqs(1:2) == MPI_REQUEST_NULL), 'WAITALL frees the requests')
  call MPI_IRECV(ibuf2, 10, MPI_INTEGER, left, 10, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISSEND(ibuf, 10, MPI_INTEGER, right, 10, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS .and. all(ibuf2 == left * 10), 'WAITALL with MPI_STATUSES_IGNORE')

  ! WAITANY / TESTANY / TESTSOME give 1-based indices.
  call MPI_IRECV(ibuf, 1, MPI_INTEGER, rank, 21, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IRECV(ibuf2, 1, MPI_INTEGER, rank, 22, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_SEND(5, 1, MPI_INTEGER, rank, 22, MPI_COMM_WORLD, ierr)
  call MPI_WAITANY(2, reqs, idx, st, ierr)
  call check(idx == 2 .and. ibuf2(1) == 5 .and. st(MPI_TAG) == 22, 'WAITANY index is 1-based')
  call MPI_TESTANY(2, reqs, idx, flag, st, ierr)
  call check(.not. flag, 'TESTANY with nothing arrived')
  call MPI_SEND(6, 1, MPI_INTEGER, rank, 21, MPI_COMM_WORLD, ierr)
  outcount = 0
  do while (outcount == 0)
    call MPI_TESTSOME(2, reqs, outcount, idxs, sts, ierr)
  end do
  call check(outcount == 1 .and. idxs(1) == 1 .and. ibuf(1) == 6, 'TESTSOME indices are 1-based')
  call MPI_WAITANY(2, reqs, idx, st, ierr)
  call check(idx == MPI_UNDEFINED, 'WAITANY on null requests gives MPI_UNDEFINED')
  call MPI_WAITSOME(2, reqs, outcount, idxs, sts, ierr)
  call check(outcount == MPI_UNDEFINED, 'WAITSOME on null requests gives MPI_UNDEFINED')

  ! Probe, then receive what it announced.
  call MPI_ISEND(ibuf, 4, MPI_INTEGER, rank, 30, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_PROBE(rank, 30, MPI_COMM_WORLD, st, ierr)
  call MPI_GET_COUNT(st, MPI_INTEGER, n, ierr)
  call check(n == 4 .and. st(MPI_SOURCE) == rank, 'MPI_PROBE status')
  call MPI_IPROBE(rank, 30, MPI_COMM_WORLD, flag, st, ierr)
  call check(flag, 'MPI_IPROBE flag')
  call MPI_RECV(ibuf2, n, MPI_INTEGER, rank, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(reqs(1), st, ierr)
  call check(reqs(1) == MPI_REQUEST_NULL, 'MPI_WAIT frees the request')
  call MPI_IPROBE(rank, 30, MPI_COMM_WORLD, flag, MPI_STATUS_IGNORE, ierr)
  call check(.not. flag, 'MPI_IPROBE after the receive')

  ! Persistent requests, started twice.
  call MPI_RECV_INIT(ibuf2, 10, MPI_INTEGER, left, 40, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_SEND_INIT(ibuf, 10, MPI_INTEGER, right, 40, MPI_COMM_WORLD, reqs(2), ierr)
  do i = 1, 2
    ibuf = rank + 100 * i
    call MPI_STARTALL(2, reqs, ierr)
    call MPI_WAITALL(2, reqs, sts, ierr)
    call check(all(ibuf2 == left + 100 * i), 'persistent round')
  end do
  call check(reqs(1) /= MPI_REQUEST_NULL, 'an inactive persistent request stays')
  call MPI_REQUEST_FREE(reqs(1), ierr)
  call MPI_REQUEST_FREE(reqs(2), ierr)
  call check(reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL, 'MPI_REQUEST_FREE')

  ! Buffered send through an attached buffer; SENDRECV_REPLACE.
  allocate(bsendbuf((10 * 4 + MPI_BSEND_OVERHEAD) / 4 + 1))
  call MPI_BUFFER_ATTACH(bsendbuf, size(bsendbuf) * 4, ierr)
  call check_rc(ierr, 'MPI_BUFFER_ATTACH')
  ibuf = rank + 7
  call MPI_BSEND(ibuf, 10, MPI_INTEGER, right, 50, MPI_COMM_WORLD, ierr)
  call MPI_RECV(ibuf2, 10, MPI_INTEGER, left, 50, MPI_COMM_WORLD, st, ierr)
  call check(all(ibuf2 == left + 7), 'MPI_BSEND')
  call MPI_BUFFER_DETACH(bsendbuf, n, ierr)
  call check(ierr == MPI_SUCCESS .and. n == size(bsendbuf) * 4, 'MPI_BUFFER_DETACH size')
  ibuf = rank
  call MPI_SENDRECV_REPLACE(ibuf, 10, MPI_INTEGER, right, 60, left, 60, MPI_COMM_WORLD, st, ierr)
  call check(all(ibuf == left) .and. st(MPI_SOURCE) == left, 'MPI_SENDRECV_REPLACE')

  ! TEST on a completed request, TEST_CANCELLED.
  call MPI_ISEND(ibuf, 1, MPI_INTEGER, rank, 70, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_RECV(ibuf2, 1, MPI_INTEGER, rank, 70, MPI_COMM_WORLD, st, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_TEST(reqs(1), flag, st, ierr)
  end do
  call MPI_TEST_CANCELLED(st, flag, ierr)
  call check(.not. flag, 'MPI_TEST_CANCELLED')

  call checks_done('p2p')
  call MPI_FINALIZE(ierr)
end program p2p
