! The checkpoint extensions from Fortran without failures (restore and
! locate then give back the last checkpoint written): MPIX_PROTECT of an
! array, a scalar and a column through a derived type, MPIX_PROTECT_X,
! MPIX_CHECKPOINT_ROUTE / LOCATE with a file Fortran writes and reads,
! the fault epoch, MPIX_CHECKPOINT_NEEDED before the first checkpoint,
! and a region the checkpoint does not hold.
program mpix
  use mpi
  use checks
  implicit none
  integer :: rank, ierr, ierr2, eclass, epoch, col, i, unit, value
  double precision :: field(100)
  integer :: counter, grid(4, 4)
  real :: extra(3)
  character(len=4096) :: path
  logical :: needed

  call MPI_INIT(ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPIX_GET_FAULT_EPOCH(epoch, ierr)
  call check(ierr == MPI_SUCCESS .and. epoch == 0, 'fault epoch 0 at the start')

  field = (/ (rank * 1000 + i, i = 1, 100) /)
  counter = 17 + rank
  grid = reshape((/ (rank * 100 + i, i = 1, 16) /), (/ 4, 4 /))
  extra = (/ 1.0, 2.0, 3.0 /)
  ! Row 2 of the grid (stride 4): only those four elements are saved.
  call MPI_TYPE_VECTOR(4, 1, 4, MPI_INTEGER, col, ierr)
  call MPI_TYPE_COMMIT(col, ierr)
  call MPIX_PROTECT(1, field, 100, MPI_DOUBLE_PRECISION, ierr)
  call check_rc(ierr, 'MPIX_PROTECT of an array')
  call MPIX_PROTECT(2, counter, 1, MPI_INTEGER, ierr)
  call MPIX_PROTECT(3, grid(2, 1), 1, col, ierr)
  call check_rc(ierr, 'MPIX_PROTECT through a derived type')
  call MPIX_PROTECT_X(4, extra, 3_MPI_COUNT_KIND, MPI_REAL, ierr)
  call check_rc(ierr, 'MPIX_PROTECT_X')
  call MPIX_CHECKPOINT_ROUTE('notes.txt', path, ierr)
  call check_rc(ierr, 'MPIX_CHECKPOINT_ROUTE')
  open(newunit=unit, file=trim(path), status='replace', action='write')
  write(unit, *) rank * 3 + 1
  close(unit)
  needed = .false.
  call MPIX_CHECKPOINT_NEEDED(needed, ierr)
  call check(ierr == MPI_SUCCESS .and. needed, 'a checkpoint is needed before the first one')
  call MPIX_CHECKPOINT_WRITE(ierr)
  call check_rc(ierr, 'MPIX_CHECKPOINT_WRITE')
  call MPIX_GET_FAULT_EPOCH(epoch, ierr)
  call check(epoch == 1, 'fault epoch 1 after a checkpoint')

  ! Change everything, then bring the checkpoint back.
  field = -1d0
  counter = -1
  grid = -1
  extra = -1.0
  call MPIX_CHECKPOINT_RESTORE(ierr)
  call check_rc(ierr, 'MPIX_CHECKPOINT_RESTORE')
  call check(all(field == (/ (rank * 1000d0 + i, i = 1, 100) /)), 'array restored')
  call check(counter == 17 + rank, 'scalar restored')
  call check(all(grid(2, :) == (/ (rank * 100 + 2 + 4 * i, i = 0, 3) /)), 'row restored')
  call check(all(grid(1, :) == -1) .and. all(grid(3:4, :) == -1), 'the rest of the grid untouched')
  call check(all(extra == (/ 1.0, 2.0, 3.0 /)), 'MPIX_PROTECT_X region restored')
  call MPIX_CHECKPOINT_LOCATE('notes.txt', path, ierr)
  call check_rc(ierr, 'MPIX_CHECKPOINT_LOCATE')
  open(newunit=unit, file=trim(path), status='old', action='read')
  read(unit, *) value
  close(unit)
  call check(value == rank * 3 + 1, 'routed file read back')

  ! A region the checkpoint does not hold: an error, nothing written.
  call MPIX_PROTECT(9, value, 1, MPI_INTEGER, ierr)
  field = -1d0
  call MPIX_CHECKPOINT_RESTORE(ierr)
  call MPI_ERROR_CLASS(ierr, eclass, ierr2)
  call check(eclass == MPI_ERR_ARG .and. all(field == -1d0), 'restore with an unknown region')
  call MPIX_UNPROTECT(9, ierr)
  call check_rc(ierr, 'MPIX_UNPROTECT')
  call MPIX_UNPROTECT(9, ierr)
  call MPI_ERROR_CLASS(ierr, eclass, ierr2)
  call check(eclass == MPI_ERR_ARG, 'MPIX_UNPROTECT of an unknown id')

  call MPI_TYPE_FREE(col, ierr)
  call checks_done('mpix')
  call MPI_FINALIZE(ierr)
end program mpix
