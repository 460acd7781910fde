! Errors from Fortran, in fixed form with the legacy header: under
! MPI_ERRORS_RETURN every bad argument comes back as its error class
! (with MPI_ERROR_STRING text); under MPI_ERRORS_ARE_FATAL (run with the
! argument "fatal") the first one ends the job.
      PROGRAM ERRORS
      USE CHECKS
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INCLUDE 'mpif-ext.h'
      INTEGER IERR, IERR2, LEN, RANK, NP, ICLASS, IEH, N, IBUF(10)
      INTEGER ST(MPI_STATUS_SIZE)
      INTEGER REQS(2), STS(MPI_STATUS_SIZE, 2), IOP
      DOUBLE PRECISION D, D2
      CHARACTER*(MPI_MAX_ERROR_STRING) MSG
      CHARACTER*16 ARG
      CHARACTER*8 SHORT
      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NP, IERR)
      CALL GET_COMMAND_ARGUMENT(1, ARG)
      IF (ARG .EQ. 'fatal') THEN
         CALL MPI_SEND(IBUF, 1, MPI_INTEGER, NP, 0, MPI_COMM_WORLD,
     &        IERR)
         WRITE(*,*) 'NOT REACHED'
         STOP
      END IF
!
      CALL MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN,
     &     IERR)
      CALL MPI_COMM_GET_ERRHANDLER(MPI_COMM_WORLD, IEH, IERR)
      CALL CHECK(IEH .EQ. MPI_ERRORS_RETURN, 'GET_ERRHANDLER')
      CALL MPI_SEND(IBUF, 1, MPI_INTEGER, NP, 0, MPI_COMM_WORLD, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_RANK, 'send to rank NP')
      CALL MPI_ERROR_CLASS(IERR, ICLASS, IERR)
      CALL CHECK(ICLASS .EQ. MPI_ERR_RANK, 'MPI_ERROR_CLASS')
      CALL MPI_ERROR_STRING(MPI_ERR_RANK, MSG, N, IERR)
      CALL CHECK(N .GT. 0 .AND. INDEX(MSG, 'rank') .GT. 0,
     &     'MPI_ERROR_STRING text')
      CALL MPI_SEND(IBUF, 1, MPI_INTEGER, 0, 0, 12345, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_COMM, 'send on a bad communicator')
      CALL MPI_SEND(IBUF, 1, 999, 0, 0, MPI_COMM_WORLD, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_TYPE, 'send of a bad datatype')
      CALL MPI_SEND(IBUF, -1, MPI_INTEGER, 0, 0, MPI_COMM_WORLD, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_COUNT, 'send of a negative count')
      CALL MPI_SEND(IBUF, 1, MPI_INTEGER, 0, -5, MPI_COMM_WORLD, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_TAG, 'send with a negative tag')
      D = 1D0
      CALL MPI_ALLREDUCE(D, D2, 1, MPI_DOUBLE_PRECISION, MPI_LAND,
     &     MPI_COMM_WORLD, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_OP, 'MPI_LAND on DOUBLE PRECISION')
      CALL MPI_OP_FREE(MPI_SUM, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_OP, 'freeing a predefined op')
!
! A truncated receive: the error class, and MPI_ERR_IN_STATUS from
! MPI_WAITALL with the status of the failed request.
      CALL MPI_ISEND(IBUF, 10, MPI_INTEGER, RANK, 1, MPI_COMM_WORLD,
     &     REQS(1), IERR)
      CALL MPI_RECV(IBUF, 5, MPI_INTEGER, RANK, 1, MPI_COMM_WORLD, ST,
     &     IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_TRUNCATE, 'truncated receive')
      CALL MPI_WAIT(REQS(1), ST, IERR)
      CALL MPI_ISEND(IBUF, 10, MPI_INTEGER, RANK, 2, MPI_COMM_WORLD,
     &     REQS(1), IERR)
      CALL MPI_IRECV(IBUF, 5, MPI_INTEGER, RANK, 2, MPI_COMM_WORLD,
     &     REQS(2), IERR)
      CALL MPI_WAITALL(2, REQS, STS, IERR)
      CALL CHECK(IERR .EQ. MPI_ERR_IN_STATUS, 'WAITALL IN_STATUS')
      CALL CHECK(STS(MPI_ERROR, 1) .EQ. MPI_SUCCESS, 'send status')
      CALL CHECK(STS(MPI_ERROR, 2) .EQ. MPI_ERR_TRUNCATE,
     &     'receive status has MPI_ERR_TRUNCATE')
!
! The MPIX calls check their arguments too; their error codes are of
! their own (MPI_ERROR_STRING says the cause), of the class checked.
      CALL MPIX_CHECKPOINT_RESTORE(IERR)
      CALL CHECK(IERR .NE. MPI_SUCCESS, 'restore before a checkpoint')
      CALL MPI_ERROR_STRING(IERR, MSG, LEN, IERR2)
      CALL CHECK(INDEX(MSG, 'no checkpoint has been written') .GT. 0,
     &     'the error string says why')
      CALL MPIX_PROTECT(-1, IBUF, 10, MPI_INTEGER, IERR)
      CALL MPI_ERROR_CLASS(IERR, ICLASS, IERR2)
      CALL CHECK(ICLASS .EQ. MPI_ERR_ARG, 'MPIX_PROTECT with id -1')
      CALL MPIX_PROTECT(1, IBUF, 10, 999, IERR)
      CALL MPI_ERROR_CLASS(IERR, ICLASS, IERR2)
      CALL CHECK(ICLASS .EQ. MPI_ERR_TYPE, 'MPIX_PROTECT bad datatype')
      CALL MPIX_CHECKPOINT_ROUTE('a/b', MSG, IERR)
      CALL MPI_ERROR_CLASS(IERR, ICLASS, IERR2)
      CALL CHECK(ICLASS .EQ. MPI_ERR_ARG, 'route a name with a slash')
      CALL MPIX_CHECKPOINT_ROUTE('data.bin', SHORT, IERR)
      CALL MPI_ERROR_CLASS(IERR, ICLASS, IERR2)
      CALL CHECK(ICLASS .EQ. MPI_ERR_ARG, 'route into a short string')
      CALL MPIX_CHECKPOINT_ROUTE('data.bin', MSG, IERR)
      CALL CHECK(IERR .EQ. MPI_SUCCESS .AND.
     &     INDEX(MSG, '/data.bin ') .GT. 0, 'route into a long string')
!
      CALL CHECKS_DONE('errors')
      CALL MPI_FINALIZE(IERR)
      END
