/* A checkpoint level that is full (the test mounts a 256 KiB tmpfs as the
 * only level): a small checkpoint fits, a 1 MiB one gets MPI_ERR_NO_SPACE
 * with an error string, and the job goes on (the next small one fits).
 * With CKPTFULL_ONLY_RANK=R only rank R has the big region: the others'
 * second checkpoint returns (success, or MPI_ERR_NO_SPACE when rank R's
 * write filled the shared level at that moment), and a partner or set
 * exchange must not leave them waiting for rank R's part. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define BIG (1 << 17) /* 1 MiB of doubles */

int main(int argc, char **argv)
{
    static double small[64], big[BIG];
    int rank, rc, cls, len, small_failed = 0;
    char s[MPI_MAX_ERROR_STRING];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPIX_Protect(1, small, 64, MPI_DOUBLE));
    CHECK_RC(MPIX_Checkpoint_write());
    /* Both small checkpoints are written before any rank starts its big
     * one: a big write that fills the shared tmpfs must not catch a slow
     * rank's small one (seen beside two CPU hogs). */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    const char *only = getenv("CKPTFULL_ONLY_RANK");
    int has_big = !only || atoi(only) == rank;
    if (has_big) CHECK_RC(MPIX_Protect(2, big, BIG, MPI_DOUBLE));
    rc = MPIX_Checkpoint_write();
    if (has_big) {
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NO_SPACE, "a full level gave class %d, expected MPI_ERR_NO_SPACE", cls);
        CHECK_RC(MPI_Error_string(rc, s, &len));
        CHECK(strstr(s, "space") != NULL, "error string '%s'", s);
        CHECK_RC(MPIX_Unprotect(2));
    } else if (rc != MPI_SUCCESS) {
        /* The level is shared: the big write may fill it while this small
         * one is being written, and then this one fails for want of space
         * too, which is right. What matters is that it returns. */
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NO_SPACE, "a small checkpoint beside a full one gave class %d", cls);
        small_failed = 1;
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPIX_Checkpoint_write());
    int e;
    MPIX_Get_fault_epoch(&e);
    int want = has_big || small_failed ? 2 : 3;
    CHECK(e == want, "epochs written: %d, expected %d", e, want);
    pass("ckptfull.c");
    MPI_Finalize();
    return 0;
}
