/* A 1D ring of blocks whose halo comes by one-sided communication (each
 * rank puts its edge values into its neighbours' window between two
 * fences) and whose state goes, every K iterations, to one shared file by
 * a collective write (MPI_File_write_at_all), in the resilient-loop shape
 * of the MPI Stages paper: the block is protected (MPIX_Protect), saved
 * by MPIX_Checkpoint_write, and after MPIX_TRY_RELOAD every rank rolls
 * back and enters the attempt again.
 *
 *   mpiexec -n 4 --recovery stages ./halo_rma [N] [ITERS] [K] [DIR]
 *
 * Windows and open files are not part of the MPI state a rollback
 * restores: the rollback releases them in every rank, and the attempt
 * creates them again, as every rank (the replacement too) runs it from
 * its start. The file's contents after the run are the same with and
 * without failures: writes of rolled-back iterations are written again.
 *
 * Prints a checksum of the final blocks and of the file that is identical
 * with and without failures; the file is deleted at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resilient.h"

static int rank, size, n = 64, iters = 100, every = 10;
static const char *dir = ".";
static char path[4096];

struct header {
    int iter;
};

static int attempt(int epoch, void *ctx)
{
    double *result = ctx;
    size_t bytes = sizeof(struct header) + (size_t)n * sizeof(double);
    char *blob = calloc(1, bytes);
    struct header *h = (struct header *)blob;
    double *u = (double *)(blob + sizeof(struct header));
    double ghost[2] = {0, 0}; /* from the left and from the right */
    MPI_Win win = MPI_WIN_NULL;
    MPI_File fh = MPI_FILE_NULL;
    int rc;
    for (int i = 0; i < n; i++) u[i] = rank * n + i;
    if ((rc = MPIX_Protect(0, blob, (MPI_Count)bytes, MPI_BYTE))) goto out;
    if (epoch > 0 && (rc = MPIX_Checkpoint_restore())) goto out;
    if ((rc = MPI_Win_create(ghost, sizeof ghost, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win))) goto out;
    if ((rc = MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN))) goto out;
    if ((rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))) goto out;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int it = h->iter; it < iters; it++) {
        if ((rc = MPI_Win_fence(MPI_MODE_NOPRECEDE, win))) goto out;
        /* My first value is my left neighbour's right ghost, my last the
         * right neighbour's left ghost. */
        if ((rc = MPI_Put(&u[0], 1, MPI_DOUBLE, left, 1, 1, MPI_DOUBLE, win))) goto out;
        if ((rc = MPI_Put(&u[n - 1], 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, win))) goto out;
        if ((rc = MPI_Win_fence(MPI_MODE_NOSUCCEED, win))) goto out;
        double prev = ghost[0];
        for (int i = 0; i < n; i++) {
            double next = i + 1 < n ? u[i + 1] : ghost[1];
            double v = 0.5 * u[i] + 0.25 * (prev + next) + 0.001 * it;
            prev = u[i];
            u[i] = v;
        }
        if ((it + 1) % every == 0) {
            int e;
            h->iter = it + 1;
            MPI_Offset at = (MPI_Offset)rank * n * sizeof(double);
            if ((rc = MPI_File_write_at_all(fh, at, u, n, MPI_DOUBLE, MPI_STATUS_IGNORE))) goto out;
            MPIX_Get_fault_epoch(&e);
            if ((rc = MPIX_Checkpoint_write())) goto out;
        }
    }
    if ((rc = MPI_File_sync(fh))) goto out;
    if ((rc = MPI_Barrier(MPI_COMM_WORLD))) goto out;
    /* The whole file, read back by everyone collectively. */
    double *all = malloc((size_t)size * n * sizeof(double));
    rc = MPI_File_read_at_all(fh, 0, all, size * n, MPI_DOUBLE, MPI_STATUS_IGNORE);
    double local[2] = {0, 0}, global[2], file = 0;
    for (int i = 0; i < n; i++) {
        local[0] += u[i];
        local[1] += u[i] * (rank * n + i + 1);
    }
    for (int i = 0; i < size * n; i++) file += all[i] * ((i % 7) + 1);
    free(all);
    if (rc) goto out;
    if ((rc = MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD))) goto out;
    result[0] = global[0];
    result[1] = global[1];
    result[2] = file;
    if ((rc = MPI_Win_free(&win))) goto out;
    rc = MPI_File_close(&fh);
out:
    /* After MPIX_TRY_RELOAD the window and the file are the rollback's to
     * release: no collective call can complete now. */
    MPIX_Unprotect(0);
    free(blob);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) n = atoi(argv[1]);
    if (argc > 2) iters = atoi(argv[2]);
    if (argc > 3) every = atoi(argv[3]);
    if (argc > 4) dir = argv[4];
    if (n < 1) n = 1;
    if (every < 1) every = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(path, sizeof path, "%s/halo_rma.out", dir);
    double result[3];
    resilient_run("halo_rma", attempt, result);
    if (rank == 0) {
        printf("halo_rma: %d ranks, N=%d, %d iterations, checksum %.15e %.15e file %.15e\n", size, n, iters, result[0],
               result[1], result[2]);
        MPI_File_delete(path, MPI_INFO_NULL);
    }
    MPI_Finalize();
    return 0;
}
