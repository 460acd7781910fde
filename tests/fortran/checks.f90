! Shared by the Fortran test programs: count checks, report failures, and
! end with "OK <name> (<n> checks)" from rank 0 only if every rank passed.
module checks
  use mpi, only: MPI_COMM_WORLD, MPI_INTEGER, MPI_SUM, MPI_ALLREDUCE, &
                 MPI_COMM_RANK, MPI_ABORT
  implicit none
  private
  public :: check, check_rc, checks_done
  integer, save :: nchecks = 0, nfailed = 0
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: rank, ierr
    nchecks = nchecks + 1
    if (.not. ok) then
      nfailed = nfailed + 1
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      write(*, '(a,i0,a,a)') 'FAIL rank ', rank, ': ', what
    end if
  end subroutine check

  ! An MPI return code that must be MPI_SUCCESS.
  subroutine check_rc(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    call check(ierr == 0, what)
  end subroutine check_rc

  subroutine checks_done(name)
    character(len=*), intent(in) :: name
    integer :: rank, ierr, counts(2), total(2)
    counts = (/ nfailed, nchecks /)
    call MPI_ALLREDUCE(counts, total, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    if (total(1) /= 0) then
      if (rank == 0) write(*, '(a,i0,a)') 'FAILED: ', total(1), ' checks'
      call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
    end if
    if (rank == 0) write(*, '(a,a,a,i0,a)') 'OK ', name, ' (', total(2), ' checks)'
  end subroutine checks_done
end module checks
