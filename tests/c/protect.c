/* MPIX_Protect / MPIX_Checkpoint_restore / route / locate without failures
 * (restore and locate then give back the last checkpoint written):
 * - values come back as they were at the checkpoint, also for a derived
 *   datatype with holes (holes untouched);
 * - a size mismatch or a region missing from the checkpoint is MPI_ERR_ARG
 *   and writes nothing;
 * - argument errors: negative id, unknown id, NULL region, bad names,
 *   a path buffer too small, a name the checkpoint does not hold;
 * - a routed file that was never written makes the checkpoint fail;
 * - restore before any checkpoint is an error, not garbage;
 * - with PROTECT_WIPE, restore and locate work with every checkpoint file
 *   deleted: a live rank restores from the mem level without file I/O. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define N 1000

static int class_of(int rc)
{
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    int rank, size, rc;
    static double a[N];
    static int grid[4][4];
    char path[4096];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Nothing checkpointed yet. */
    CHECK_RC(MPIX_Protect(1, a, N, MPI_DOUBLE));
    rc = MPIX_Checkpoint_restore();
    CHECK(rc != MPI_SUCCESS, "restore before any checkpoint succeeded");
    {
        /* The code is one of our own, of its class, whose string says why;
         * the same cause gives the same code. */
        char why[MPI_MAX_ERROR_STRING];
        int len, again = MPIX_Checkpoint_restore();
        MPI_Error_string(rc, why, &len);
        CHECK(strstr(why, "MPIX_Checkpoint_restore: no checkpoint has been written") != NULL,
              "MPI_Error_string says: %s", why);
        CHECK(class_of(rc) != rc && again == rc, "codes %d, %d of class %d", rc, again, class_of(rc));
    }

    /* Column 1 of a 4x4 grid: a vector with holes. */
    MPI_Datatype col;
    CHECK_RC(MPI_Type_vector(4, 1, 4, MPI_INT, &col));
    CHECK_RC(MPI_Type_commit(&col));
    for (int i = 0; i < N; i++) a[i] = rank * 1e6 + i;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) grid[i][j] = 100 * rank + 10 * i + j;
    CHECK_RC(MPIX_Protect(2, &grid[0][1], 1, col));
    CHECK_RC(MPI_Type_free(&col)); /* the region keeps its layout */

    CHECK_RC(MPIX_Checkpoint_route("notes.txt", path, sizeof path));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write the routed path %s", path);
    fprintf(f, "rank %d epoch 1\n", rank);
    fclose(f);
    CHECK_RC(MPIX_Checkpoint_write());
    /* PROTECT_WIPE=DIR (the tmpfs level's root): every checkpoint file is
     * deleted now, so what follows must come from the mem level alone. */
    const char *wipe = getenv("PROTECT_WIPE");
    if (wipe) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'/job-*/epoch-*", wipe);
            CHECK(system(cmd) == 0, "cannot run %s", cmd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* Change everything, then restore. */
    for (int i = 0; i < N; i++) a[i] = -1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) grid[i][j] = -1;
    CHECK_RC(MPIX_Checkpoint_restore());
    for (int i = 0; i < N; i++) CHECK(a[i] == rank * 1e6 + i, "a[%d] = %g", i, a[i]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int want = j == 1 ? 100 * rank + 10 * i + j : -1;
            CHECK(grid[i][j] == want, "grid[%d][%d] = %d, want %d", i, j, grid[i][j], want);
        }

    /* The routed file comes back through locate. */
    CHECK_RC(MPIX_Checkpoint_locate("notes.txt", path, sizeof path));
    char line[64] = "";
    f = fopen(path, "r");
    CHECK(f != NULL && fgets(line, sizeof line, f), "cannot read the located file %s", path);
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "rank %d epoch 1\n", rank);
    CHECK(!strcmp(line, want), "located file holds '%s'", line);
    rc = MPIX_Checkpoint_locate("absent.txt", path, sizeof path);
    CHECK(class_of(rc) == MPI_ERR_ARG, "locate of an unknown name: %d", rc);
    rc = MPIX_Checkpoint_locate("notes.txt", path, 5);
    CHECK(class_of(rc) == MPI_ERR_ARG, "locate into 5 bytes: %d", rc);

    /* Size mismatch: MPI_ERR_ARG, and region 1 is not written either. */
    for (int i = 0; i < N; i++) a[i] = -2;
    CHECK_RC(MPIX_Protect(2, &grid[0][0], 16, MPI_INT));
    rc = MPIX_Checkpoint_restore();
    CHECK(class_of(rc) == MPI_ERR_ARG, "size mismatch: %d", rc);
    CHECK(a[0] == -2 && a[N - 1] == -2, "memory was written despite the error");
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, msg, &len);
    CHECK(len > 0, "no error string");

    /* A region protected after the checkpoint is missing from it. */
    CHECK_RC(MPIX_Unprotect(2));
    static double late[10];
    CHECK_RC(MPIX_Protect(7, late, 10, MPI_DOUBLE));
    rc = MPIX_Checkpoint_restore();
    CHECK(class_of(rc) == MPI_ERR_ARG, "missing region: %d", rc);
    CHECK(a[0] == -2, "memory was written despite the error");
    CHECK_RC(MPIX_Unprotect(7));
    CHECK_RC(MPIX_Checkpoint_restore());
    CHECK(a[5] == rank * 1e6 + 5, "region 1 not restored once valid: %g", a[5]);

    /* Argument errors. */
    CHECK(class_of(MPIX_Protect(-1, a, N, MPI_DOUBLE)) == MPI_ERR_ARG, "negative id");
    CHECK(class_of(MPIX_Unprotect(42)) == MPI_ERR_ARG, "unknown id");
    CHECK(class_of(MPIX_Protect(3, NULL, 5, MPI_DOUBLE)) == MPI_ERR_BUFFER, "NULL region");
    CHECK(class_of(MPIX_Protect(3, a, -5, MPI_DOUBLE)) == MPI_ERR_COUNT, "negative count");
    CHECK(class_of(MPIX_Protect(3, a, 5, 12345)) == MPI_ERR_TYPE, "bad datatype");
    CHECK(class_of(MPIX_Checkpoint_route("a/b", path, sizeof path)) == MPI_ERR_ARG, "name with /");
    CHECK(class_of(MPIX_Checkpoint_route("..", path, sizeof path)) == MPI_ERR_ARG, "name ..");
    CHECK(class_of(MPIX_Checkpoint_route(NULL, path, sizeof path)) == MPI_ERR_ARG, "NULL name");
    CHECK(class_of(MPIX_Checkpoint_route("x", path, 3)) == MPI_ERR_ARG, "short path buffer");

    /* A routed file never written: the checkpoint fails, and says so. */
    int before, after;
    MPIX_Get_fault_epoch(&before);
    CHECK_RC(MPIX_Checkpoint_route("never.dat", path, sizeof path));
    rc = MPIX_Checkpoint_write();
    CHECK(rc != MPI_SUCCESS, "checkpoint with an unwritten routed file succeeded");
    MPIX_Get_fault_epoch(&after);
    CHECK(before == after, "epoch moved from %d to %d", before, after);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("OK protect %d\n", size);
    MPI_Finalize();
    return 0;
}
