! ULFM from Fortran (mpif.h names through `use mpi`, and `use mpi_ext`
! as codes written for Open MPI's ULFM have it) under
! `mpiexec --with-ft ulfm`, 4 ranks: a revoked communicator, then the
! last rank dies (a real SIGKILL) and the survivors agree, acknowledge
! and shrink. Each survivor prints "ulfm fortran ok <rank>" if every
! check held, else "FAIL ...".
program ulfm
  use mpi
  use mpi_ext
  use iso_c_binding, only: c_int
  implicit none
  interface
    function c_raise(sig) bind(C, name='raise')
      import :: c_int
      integer(c_int), value :: sig
      integer(c_int) :: c_raise
    end function c_raise
  end interface
  integer :: rank, size, ierr, rc, dup, shrunk, flag, n, failed, cls, sum, ssize
  logical :: revoked, ok

  ok = .true.
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)

  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  if (rank == 0) then
    call MPIX_COMM_REVOKE(dup, ierr)
    call expect(ierr == MPI_SUCCESS, 'revoke')
  end if
  call MPI_BARRIER(dup, rc)
  if (rank /= 0) then
    call MPI_ERROR_CLASS(rc, cls, ierr)
    call expect(cls == MPIX_ERR_REVOKED, 'a barrier on a revoked communicator')
  end if
  call MPIX_COMM_IS_REVOKED(dup, revoked, ierr)
  call expect(revoked, 'is_revoked')
  call MPI_COMM_FREE(dup, ierr)

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == size - 1) rc = c_raise(9_c_int)

  flag = 7
  if (rank == 0) flag = 5
  call MPIX_COMM_AGREE(MPI_COMM_WORLD, flag, rc)
  call MPI_ERROR_CLASS(rc, cls, ierr)
  call expect(cls == MPIX_ERR_PROC_FAILED, 'agree with an unacknowledged failure')
  call expect(flag == 5, 'the agreed flag')
  call MPIX_COMM_FAILURE_ACK(MPI_COMM_WORLD, ierr)
  call MPIX_COMM_FAILURE_GET_ACKED(MPI_COMM_WORLD, failed, ierr)
  call MPI_GROUP_SIZE(failed, n, ierr)
  call expect(n == 1, 'one acknowledged failure')
  call MPI_GROUP_FREE(failed, ierr)
  call MPIX_COMM_ACK_FAILED(MPI_COMM_WORLD, size, n, ierr)
  call expect(ierr == MPI_SUCCESS .and. n == 1, 'ack_failed')
  flag = 1
  call MPIX_COMM_AGREE(MPI_COMM_WORLD, flag, ierr)
  call expect(ierr == MPI_SUCCESS .and. flag == 1, 'agree after the ack')
  call MPIX_COMM_GET_FAILED(MPI_COMM_WORLD, failed, ierr)
  call MPI_GROUP_SIZE(failed, n, ierr)
  call expect(n == 1, 'get_failed')
  call MPI_GROUP_FREE(failed, ierr)

  call MPIX_COMM_SHRINK(MPI_COMM_WORLD, shrunk, ierr)
  call expect(ierr == MPI_SUCCESS, 'shrink')
  call MPI_COMM_SIZE(shrunk, ssize, ierr)
  call expect(ssize == size - 1, 'the shrunk size')
  call MPI_ALLREDUCE(rank, sum, 1, MPI_INTEGER, MPI_SUM, shrunk, ierr)
  call expect(ierr == MPI_SUCCESS .and. sum == (size - 1) * (size - 2) / 2, 'allreduce after the shrink')
  call MPI_COMM_FREE(shrunk, ierr)

  if (ok) write(*, '(a,i0)') 'ulfm fortran ok ', rank
  call MPI_FINALIZE(ierr)
contains
  subroutine expect(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      ok = .false.
      write(*, '(a,i0,a,a)') 'FAIL rank ', rank, ': ', what
    end if
  end subroutine expect
end program ulfm
