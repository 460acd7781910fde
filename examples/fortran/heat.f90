! A 2D heat solver (Jacobi iterations on an N x N plate, hot top edge) in
! the style of a legacy Fortran code: the legacy header, arrays in the main
! program, explicit loops. It survives process failures under MPI Stages
! without setjmp/longjmp -- which Fortran does not have -- because the
! rollback is an ordinary loop: when a call returns MPIX_TRY_RELOAD, the
! solver returns to the main loop, which calls MPIX_CHECKPOINT_READ and
! runs the solver again from the fault epoch. The grid and the iteration
! count are registered with MPIX_PROTECT, so MPIX_CHECKPOINT_WRITE saves
! them and MPIX_CHECKPOINT_RESTORE brings them back (MPI_F_SYNC_REG then
! tells the compiler they changed: it cannot see that from the call).
!
!   mpifort -O2 heat.f90 -o heat
!   mpiexec -n 4 --recovery stages ./heat [N] [ITERS] [EVERY]
!
! Each rank owns a block of whole columns (contiguous in Fortran), and
! exchanges its edge columns with MPI_SENDRECV. Rank 0 prints a checksum
! that is the same with and without failures.
program heat
  use iso_fortran_env, only: error_unit
  implicit none
  include 'mpif.h'
  integer :: n, iters, every, rank, np, ny, y0, left, right, ierr, code, epoch, rollbacks, iter
  double precision, allocatable :: u(:, :), v(:, :)
  double precision :: result(2), residual

  n = 128
  iters = 200
  every = 10
  call int_arg(1, n)
  call int_arg(2, iters)
  call int_arg(3, every)
  call MPI_INIT(ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  if (n < np .or. every < 1) then
    if (rank == 0) write(error_unit, '(a)') 'heat: need N >= ranks and EVERY >= 1'
    call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
  end if
  ! Columns y0+1 .. y0+ny of the plate; the first mod(n, np) ranks take one more.
  ny = n / np
  y0 = rank * ny + min(rank, mod(n, np))
  if (rank < mod(n, np)) ny = ny + 1
  left = rank - 1
  right = rank + 1
  if (rank == 0) left = MPI_PROC_NULL
  if (rank == np - 1) right = MPI_PROC_NULL
  allocate(u(0:n + 1, 0:ny + 1), v(0:n + 1, 0:ny + 1))

  ! What a checkpoint holds besides the MPI state.
  call MPIX_PROTECT(1, u, size(u), MPI_DOUBLE_PRECISION, ierr)
  call MPIX_PROTECT(2, iter, 1, MPI_INTEGER, ierr)
  if (ierr /= MPI_SUCCESS) call give_up(ierr)

  ! The resilient loop: one attempt from the fault epoch, again after a rollback.
  code = MPI_SUCCESS
  rollbacks = 0
  do
    if (code == MPIX_TRY_RELOAD) then
      rollbacks = rollbacks + 1
      call MPIX_CHECKPOINT_READ(code)
      if (code == MPIX_TRY_RELOAD) cycle
    end if
    if (code /= MPI_SUCCESS) call give_up(code)
    call MPIX_GET_FAULT_EPOCH(epoch, ierr)
    call solve(epoch, code)
    if (code == MPI_SUCCESS) exit
  end do

  if (rank == 0) write(*, '(a,2es25.16,a,es12.4)') 'heat: checksum', result, '  residual', residual
  if (rollbacks > 0) write(error_unit, '(a,i0,a,i0,a)') 'heat: rank ', rank, ' rolled back ', rollbacks, ' time(s)'
  call MPIX_UNPROTECT(1, ierr)
  call MPIX_UNPROTECT(2, ierr)
  call MPI_FINALIZE(ierr)

contains

  ! Runs the iterations from `epoch` (0: a fresh start); `code` is
  ! MPI_SUCCESS, or the error (MPIX_TRY_RELOAD after a failure) that
  ! stopped it.
  subroutine solve(epoch, code)
    integer, intent(in) :: epoch
    integer, intent(out) :: code
    integer :: i, j
    double precision :: local(2), change

    if (epoch == 0) then
      u = 0d0
      iter = 0
    else
      call MPIX_CHECKPOINT_RESTORE(code)
      if (code /= MPI_SUCCESS) return
      call MPI_F_SYNC_REG(u)
      call MPI_F_SYNC_REG(iter)
    end if
    u(0, :) = 1d0
    do while (iter < iters)
      call MPI_SENDRECV(u(1, 1), n, MPI_DOUBLE_PRECISION, left, 0, u(1, ny + 1), n, MPI_DOUBLE_PRECISION, &
                        right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, code)
      if (code /= MPI_SUCCESS) return
      call MPI_SENDRECV(u(1, ny), n, MPI_DOUBLE_PRECISION, right, 1, u(1, 0), n, MPI_DOUBLE_PRECISION, &
                        left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, code)
      if (code /= MPI_SUCCESS) return
      change = 0d0
      do j = 1, ny
        do i = 1, n
          v(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
          change = change + (v(i, j) - u(i, j))**2
        end do
      end do
      u(1:n, 1:ny) = v(1:n, 1:ny)
      call MPI_ALLREDUCE(change, residual, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, code)
      if (code /= MPI_SUCCESS) return
      iter = iter + 1
      if (mod(iter, every) == 0) then
        call MPIX_CHECKPOINT_WRITE(code)
        if (code /= MPI_SUCCESS) return
      end if
    end do
    residual = sqrt(residual)
    local = 0d0
    do j = 1, ny
      do i = 1, n
        local(1) = local(1) + u(i, j)
        local(2) = local(2) + u(i, j) * (i * 7 + y0 + j)
      end do
    end do
    call MPI_ALLREDUCE(local, result, 2, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, code)
  end subroutine solve

  subroutine give_up(code)
    integer, intent(in) :: code
    character(len=MPI_MAX_ERROR_STRING) :: msg
    integer :: len, e
    call MPI_ERROR_STRING(code, msg, len, e)
    write(error_unit, '(a,i0,a,a)') 'heat: rank ', rank, ': ', msg(1:len)
    call MPI_ABORT(MPI_COMM_WORLD, 2, e)
  end subroutine give_up

  subroutine int_arg(k, value)
    integer, intent(in) :: k
    integer, intent(inout) :: value
    character(len=32) :: arg
    integer :: stat
    if (command_argument_count() < k) return
    call get_command_argument(k, arg)
    read(arg, *, iostat=stat) value
    if (stat /= 0) then
      write(error_unit, '(a,a)') 'heat: not a number: ', trim(arg)
      stop 1
    end if
  end subroutine int_arg
end program heat
