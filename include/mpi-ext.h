/* mpi-ext.h — mpistages: MPI extensions. User-Level Failure Mitigation
 * (ULFM), with the names Open MPI 5 gives it: run with
 * `mpiexec --with-ft ulfm` (or `--recovery ulfm`) and a failed process is
 * not fatal: the survivors get MPIX_ERR_PROC_FAILED from what involves
 * it, revoke communicators to interrupt each other, agree, and shrink
 * to the live processes. Codes test OMPI_HAVE_MPI_EXT_FTMPI or
 * MPIX_ERR_PROC_FAILED, as for Open MPI. */
#ifndef MPISTAGES_MPI_EXT_H
#define MPISTAGES_MPI_EXT_H

#include "mpi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OMPI_HAVE_MPI_EXT_FTMPI 1
#define MPIX_ERR_PROC_FAILED         MPI_ERR_PROC_FAILED
#define MPIX_ERR_PROC_FAILED_PENDING MPI_ERR_PROC_FAILED_PENDING
#define MPIX_ERR_REVOKED             MPI_ERR_REVOKED
/* Attribute of MPI_COMM_WORLD: 1 under --with-ft ulfm, else 0. */
#define MPIX_FT (8)
/* What Open MPI 5's ftmpi extension says it has (codes and mpi4py test
 * these names). */
#define MPI_HAVE_MPIX_COMM_ISHRINK 1
#define OMPI_HAVE_MPIX_COMM_ISHRINK 1
#define OMPI_HAVE_MPIX_COMM_GET_FAILED 1
#define OMPI_HAVE_MPIX_COMM_ACK_FAILED 1

int MPIX_Comm_revoke(MPI_Comm comm);
int PMPIX_Comm_revoke(MPI_Comm comm);
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int PMPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
int PMPIX_Comm_agree(MPI_Comm comm, int *flag);
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);
int PMPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);
int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int PMPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int PMPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int MPIX_Comm_failure_ack(MPI_Comm comm);
int PMPIX_Comm_failure_ack(MPI_Comm comm);
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);

#ifdef __cplusplus
}
#endif

#endif /* MPISTAGES_MPI_EXT_H */
