/* A checkpoint level that is full (the test mounts a 256 KiB tmpfs as the
 * only level): a small checkpoint fits, a 1 MiB one gets MPI_ERR_NO_SPACE
 * with an error string, and the job goes on (the next small one fits). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include "check.h"

#define BIG (1 << 17) /* 1 MiB of doubles */

int main(int argc, char **argv)
{
    static double small[64], big[BIG];
    int rank, rc, cls, len;
    char s[MPI_MAX_ERROR_STRING];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPIX_Protect(1, small, 64, MPI_DOUBLE));
    CHECK_RC(MPIX_Checkpoint_write());
    CHECK_RC(MPIX_Protect(2, big, BIG, MPI_DOUBLE));
    rc = MPIX_Checkpoint_write();
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_NO_SPACE, "a full level gave class %d, expected MPI_ERR_NO_SPACE", cls);
    CHECK_RC(MPI_Error_string(rc, s, &len));
    CHECK(strstr(s, "space") != NULL, "error string '%s'", s);
    CHECK_RC(MPIX_Unprotect(2));
    CHECK_RC(MPIX_Checkpoint_write());
    int e;
    MPIX_Get_fault_epoch(&e);
    CHECK(e == 2, "epochs written: %d, expected 2", e);
    pass("ckptfull.c");
    MPI_Finalize();
    return 0;
}
