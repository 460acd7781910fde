! The heat solver of heat.f90 written against `use mpi`, with its halo
! exchange in a small library module that keeps its own communicator (an
! MPI_COMM_DUP of MPI_COMM_WORLD). A library handle is MPI state the
! application does not know about; the MPI Stages handle registries bring
! it back after a failure: the library registers two Fortran procedures,
! MPIX_SERIALIZE_HANDLES (before each checkpoint) hands its communicator
! to the checkpoint, MPIX_DESERIALIZE_HANDLES (after a restore) gives it
! back. The solver state is protected with MPIX_PROTECT as in heat.f90.
!
!   mpifort -O2 heat_lib.f90 -o heat_lib
!   mpiexec -n 4 --recovery stages ./heat_lib [N] [ITERS] [EVERY]
module halo
  use mpi
  implicit none
  private
  public :: halo_register, halo_start, halo_exchange
  integer, save :: comm = MPI_COMM_NULL
contains
  ! Once per process, after MPI_INIT.
  subroutine halo_register(ierr)
    integer, intent(out) :: ierr
    call MPIX_SERIALIZE_HANDLER_REGISTER(save_handles, ierr)
    if (ierr == MPI_SUCCESS) call MPIX_DESERIALIZE_HANDLER_REGISTER(load_handles, ierr)
  end subroutine halo_register

  subroutine save_handles(comms, ncomms, groups, ngroups)
    integer :: comms(MPIX_MAX_HANDLES), ncomms, groups(MPIX_MAX_HANDLES), ngroups
    comms(1) = comm
    ncomms = 1
    ngroups = 0
  end subroutine save_handles

  subroutine load_handles(comms, ncomms, groups, ngroups)
    integer :: comms(MPIX_MAX_HANDLES), ncomms, groups(MPIX_MAX_HANDLES), ngroups
    comm = MPI_COMM_NULL
    if (ncomms >= 1) comm = comms(1)
  end subroutine load_handles

  ! A fresh start (epoch 0): the library's own communicator.
  subroutine halo_start(ierr)
    integer, intent(out) :: ierr
    call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)
    if (ierr == MPI_SUCCESS) call MPI_COMM_SET_ERRHANDLER(comm, MPI_ERRORS_RETURN, ierr)
  end subroutine halo_start

  ! Swaps the edge columns of u(0:n+1, 0:ny+1) with the neighbour ranks.
  subroutine halo_exchange(u, n, ny, ierr)
    integer, intent(in) :: n, ny
    double precision, intent(inout) :: u(0:n + 1, 0:ny + 1)
    integer, intent(out) :: ierr
    integer :: rank, np, left, right
    if (comm == MPI_COMM_NULL) then
      ierr = MPI_ERR_COMM
      return
    end if
    call MPI_COMM_RANK(comm, rank, ierr)
    call MPI_COMM_SIZE(comm, np, ierr)
    left = merge(MPI_PROC_NULL, rank - 1, rank == 0)
    right = merge(MPI_PROC_NULL, rank + 1, rank == np - 1)
    call MPI_SENDRECV(u(1:n, 1), n, MPI_DOUBLE_PRECISION, left, 0, u(1:n, ny + 1), n, &
                      MPI_DOUBLE_PRECISION, right, 0, comm, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) return
    call MPI_SENDRECV(u(1:n, ny), n, MPI_DOUBLE_PRECISION, right, 1, u(1:n, 0), n, &
                      MPI_DOUBLE_PRECISION, left, 1, comm, MPI_STATUS_IGNORE, ierr)
  end subroutine halo_exchange
end module halo

program heat_lib
  use mpi
  use halo
  use iso_fortran_env, only: error_unit
  implicit none
  integer :: n = 128, iters = 200, every = 10
  integer :: rank, np, ny, y0, ierr, code, epoch, rollbacks, iter
  double precision, allocatable :: u(:, :), v(:, :)
  double precision :: result(2), residual

  call int_arg(1, n)
  call int_arg(2, iters)
  call int_arg(3, every)
  call MPI_INIT(ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  if (n < np .or. every < 1) then
    if (rank == 0) write(error_unit, '(a)') 'heat_lib: need N >= ranks and EVERY >= 1'
    call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
  end if
  ny = n / np
  y0 = rank * ny + min(rank, mod(n, np))
  if (rank < mod(n, np)) ny = ny + 1
  allocate(u(0:n + 1, 0:ny + 1), v(0:n + 1, 0:ny + 1))
  call halo_register(ierr)
  call MPIX_PROTECT(1, u, size(u), MPI_DOUBLE_PRECISION, ierr)
  call MPIX_PROTECT(2, iter, 1, MPI_INTEGER, ierr)
  if (ierr /= MPI_SUCCESS) call give_up(ierr)

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

  if (rank == 0) write(*, '(a,2es25.16,a,es12.4)') 'heat_lib: checksum', result, '  residual', residual
  if (rollbacks > 0) write(error_unit, '(a,i0,a,i0,a)') 'heat_lib: rank ', rank, ' rolled back ', rollbacks, ' time(s)'
  call MPI_FINALIZE(ierr)

contains

  subroutine solve(epoch, code)
    integer, intent(in) :: epoch
    integer, intent(out) :: code
    integer :: i, j
    double precision :: local(2), change(1), total(1)

    if (epoch == 0) then
      u = 0d0
      iter = 0
      call halo_start(code)
    else
      call MPIX_CHECKPOINT_RESTORE(code)
      if (code == MPI_SUCCESS) call MPIX_DESERIALIZE_HANDLES(code)
    end if
    if (code /= MPI_SUCCESS) return
    u(0, :) = 1d0
    do while (iter < iters)
      call halo_exchange(u, n, ny, code)
      if (code /= MPI_SUCCESS) return
      change = 0d0
      do j = 1, ny
        do i = 1, n
          v(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
          change(1) = change(1) + (v(i, j) - u(i, j))**2
        end do
      end do
      u(1:n, 1:ny) = v(1:n, 1:ny)
      call MPI_ALLREDUCE(change, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, code)
      if (code /= MPI_SUCCESS) return
      residual = sqrt(total(1))
      iter = iter + 1
      if (mod(iter, every) == 0) then
        call MPIX_SERIALIZE_HANDLES(code)
        if (code == MPI_SUCCESS) call MPIX_CHECKPOINT_WRITE(code)
        if (code /= MPI_SUCCESS) return
      end if
    end do
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
    write(error_unit, '(a,i0,a,a)') 'heat_lib: rank ', rank, ': ', msg(1:len)
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
      write(error_unit, '(a,a)') 'heat_lib: not a number: ', trim(arg)
      stop 1
    end if
  end subroutine int_arg
end program heat_lib
