! The shortest complete MPI Stages program in Fortran, the twin of
! examples/minimal_resilient.c: its state is registered with MPIX_PROTECT,
! checkpointed with MPIX_CHECKPOINT_WRITE, and a failure of any rank costs
! only the steps since the last checkpoint.
!
!   mpiexec -n 4 --recovery stages ./minimal_resilient
!   mpiexec -n 4 --recovery stages --inject rank=2,checkpoint=3 ./minimal_resilient
!
! Both print the same sum (the C program's).
program minimal_resilient
  use mpi
  implicit none
  integer, parameter :: n = 100000, steps = 60, every = 10
  double precision, target :: field(n), total
  integer, target :: step
  integer :: rank, rc, ierr

  call MPI_INIT(ierr)
  ! Failures come back as return codes (MPIX_TRY_RELOAD).
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPIX_PROTECT(0, field, n, MPI_DOUBLE_PRECISION, ierr)
  call MPIX_PROTECT(1, total, 1, MPI_DOUBLE_PRECISION, ierr)
  call MPIX_PROTECT(2, step, 1, MPI_INTEGER, ierr)
  ! A replacement of a failed rank starts here too, at fault epoch > 0.
  call reload()
  do while (step < steps)
    call compute_step(rc)
    if (rc == MPI_SUCCESS .and. mod(step, every) == 0) call MPIX_CHECKPOINT_WRITE(rc)
    if (rc == MPIX_TRY_RELOAD) then
      ! Another rank failed: every rank rolls back its MPI state (waiting
      ! for the replacement), then its data.
      do
        call MPIX_CHECKPOINT_READ(rc)
        if (rc /= MPIX_TRY_RELOAD) exit
      end do
      if (rc /= MPI_SUCCESS) call MPI_ABORT(MPI_COMM_WORLD, 3, ierr)
      call reload()
    else if (rc /= MPI_SUCCESS) then
      call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
    end if
  end do
  if (rank == 0) write(*, '(a,i0,a,f0.6)') 'minimal_resilient: ', step, ' steps, sum ', total
  call MPI_FINALIZE(ierr)

contains

  ! One step: compute, then combine with the other ranks.
  subroutine compute_step(rc)
    integer, intent(out) :: rc
    double precision :: mine, all
    field = field + rank + 0.001d0 * step
    mine = field(mod(step, n) + 1)
    call MPI_ALLREDUCE(mine, all, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, rc)
    if (rc == MPI_SUCCESS) then
      total = total + all
      step = step + 1
    end if
  end subroutine compute_step

  ! The data of the fault epoch back into the protected regions, or the
  ! start again if no checkpoint had committed (epoch 0).
  subroutine reload()
    integer :: epoch, rc
    call MPIX_GET_FAULT_EPOCH(epoch, rc)
    if (epoch > 0) then
      call MPIX_CHECKPOINT_RESTORE(rc)
      if (rc /= MPI_SUCCESS) call MPI_ABORT(MPI_COMM_WORLD, 2, rc)
      ! The compiler cannot see that the call changed them.
      call MPI_F_SYNC_REG(field)
      call MPI_F_SYNC_REG(total)
      call MPI_F_SYNC_REG(step)
    else
      field = 0d0
      total = 0d0
      step = 0
    end if
  end subroutine reload
end program minimal_resilient
