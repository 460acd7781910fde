! mpif-ext.h - mpistages: the MPI extensions for Fortran codes that use
! mpif.h, as Open MPI's file of that name. ULFM's names (MPIX_ERR_PROC_FAILED,
! MPIX_ERR_REVOKED, MPIX_COMM_REVOKE, MPIX_COMM_SHRINK, MPIX_COMM_AGREE,
! MPIX_COMM_FAILURE_ACK, ...) are already in mpif.h, so this file declares
! nothing of its own: codes written for Open MPI include it and build.
