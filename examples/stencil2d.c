/* A 2D heat stencil (Jacobi) on a px x py grid of ranks, with halo
 * exchange by Isend/Irecv/Waitall and an Allreduce of the residual, in the
 * resilient-loop shape of the MPI Stages paper (Listing 5.4): every K
 * iterations the rank saves its block (epoch e+1) and calls
 * MPIX_Checkpoint_write; on MPIX_TRY_RELOAD it calls MPIX_Checkpoint_read
 * and restarts from MPIX_Get_fault_epoch.
 *
 *   mpiexec -n 4 --recovery stages ./stencil2d [N] [ITERS] [K] [STORE]
 *
 * K `auto`: checkpoint when MPIX_Checkpoint_needed says it pays (with
 * mpiexec --mtbf SECS, Daly's interval for the measured cost).
 *
 * STORE says how the block is saved: a directory (default ".") for the
 * application's own files; `protect` registers it with MPIX_Protect and
 * restores it with MPIX_Checkpoint_restore (FTI / VeloC style); `route`
 * writes it to the file MPIX_Checkpoint_route names and reads it back from
 * MPIX_Checkpoint_locate (SCR style). The last two put it on the levels
 * of MPISTAGES_CKPT / mpiexec --ckpt.
 *
 * Prints a checksum that is identical with and without failures. */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "appckpt.h"
#include "resilient.h"

static int rank, size, px, py, cx, cy, nx, ny, n = 256, iters = 200, every = 10;
static const char *dir = ".";
/* Time spent in MPIX_Checkpoint_write (reported with STENCIL2D_TIME). */
static double ckpt_s;
enum { OWN_FILES, PROTECT, ROUTE } store = OWN_FILES;

#define U(a, i, j) (a)[(size_t)(i) * (nx + 2) + (j)]

struct header {
    int iter;
    int nx, ny;
};

static int neighbour(int dx, int dy)
{
    int x = cx + dx, y = cy + dy;
    if (x < 0 || x >= px || y < 0 || y >= py) return MPI_PROC_NULL;
    return y * px + x;
}

/* Fixed boundary: the global top edge is hot (1.0), the others cold. */
static void set_boundary(double *u)
{
    if (cy == 0)
        for (int j = 0; j < nx + 2; j++) U(u, 0, j) = 1.0;
}

static int exchange(double *u, double *sendbuf, double *recvbuf)
{
    /* Rows are contiguous; columns are packed by hand. */
    MPI_Request req[8];
    int k = 0, rc;
    int up = neighbour(0, -1), down = neighbour(0, 1), left = neighbour(-1, 0), right = neighbour(1, 0);
    double *sl = sendbuf, *sr = sendbuf + ny, *rl = recvbuf, *rr = recvbuf + ny;
    for (int i = 0; i < ny; i++) {
        sl[i] = U(u, i + 1, 1);
        sr[i] = U(u, i + 1, nx);
    }
    if ((rc = MPI_Irecv(&U(u, 0, 1), nx, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Irecv(&U(u, ny + 1, 1), nx, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Irecv(rl, ny, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Irecv(rr, ny, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Isend(&U(u, 1, 1), nx, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Isend(&U(u, ny, 1), nx, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Isend(sl, ny, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Isend(sr, ny, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &req[k++]))) return rc;
    if ((rc = MPI_Waitall(k, req, MPI_STATUSES_IGNORE))) return rc;
    if (left != MPI_PROC_NULL)
        for (int i = 0; i < ny; i++) U(u, i + 1, 0) = rl[i];
    if (right != MPI_PROC_NULL)
        for (int i = 0; i < ny; i++) U(u, i + 1, nx + 1) = rr[i];
    return MPI_SUCCESS;
}

/* Saves the block as epoch `epoch` (protected regions need nothing: the
 * checkpoint copies them); 0 on success. */
static int save(int epoch, const void *blob, size_t bytes)
{
    if (store == OWN_FILES) return appckpt_save(dir, "stencil2d", rank, epoch, blob, bytes);
    if (store == ROUTE) {
        char path[4096];
        if (MPIX_Checkpoint_route("block", path, sizeof path) != MPI_SUCCESS) return -1;
        FILE *f = fopen(path, "wb");
        if (!f) return -1;
        size_t w = fwrite(blob, 1, bytes, f);
        return (fclose(f) != 0 || w != bytes) ? -1 : 0;
    }
    return 0;
}

/* Loads the block of the fault epoch and checks its shape: 0 on success,
 * MPIX_TRY_RELOAD if another failure interrupted, -1 otherwise. */
static int load(int epoch, void *blob, size_t bytes)
{
    struct header *h = blob;
    int ok = -1, rc = MPI_SUCCESS;
    if (store == OWN_FILES) ok = appckpt_load(dir, "stencil2d", rank, epoch, blob, bytes);
    if (store == PROTECT) ok = (rc = MPIX_Checkpoint_restore()) == MPI_SUCCESS ? 0 : -1;
    if (store == ROUTE) {
        char path[4096];
        FILE *f = (rc = MPIX_Checkpoint_locate("block", path, sizeof path)) == MPI_SUCCESS ? fopen(path, "rb") : NULL;
        if (f) {
            ok = fread(blob, 1, bytes, f) == bytes ? 0 : -1;
            fclose(f);
        }
    }
    if (rc == MPIX_TRY_RELOAD) return rc;
    return (ok != 0 || h->nx != nx || h->ny != ny) ? -1 : 0;
}

static int main_loop(int epoch, void *ctx)
{
    double *result = ctx;
    size_t cells = (size_t)(nx + 2) * (ny + 2);
    size_t bytes = sizeof(struct header) + cells * sizeof(double);
    char *blob = calloc(1, bytes);
    double *u = (double *)(blob + sizeof(struct header)), *v = calloc(cells, sizeof(double));
    double *sendbuf = calloc(2 * (size_t)ny, sizeof(double)), *recvbuf = calloc(2 * (size_t)ny, sizeof(double));
    struct header *h = (struct header *)blob;
    int rc = MPI_SUCCESS;
    h->iter = 0;
    h->nx = nx;
    h->ny = ny;
    if (store == PROTECT && (rc = MPIX_Protect(0, blob, (MPI_Count)bytes, MPI_BYTE))) goto out;
    if (epoch > 0 && (rc = load(epoch, blob, bytes)) == MPIX_TRY_RELOAD) goto out;
    if (rc) {
        fprintf(stderr, "stencil2d: rank %d cannot read its data for epoch %d\n", rank, epoch);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    set_boundary(u);
    double residual = 0;
    for (int it = h->iter; it < iters; it++) {
        if ((rc = exchange(u, sendbuf, recvbuf))) goto out;
        memcpy(v, u, cells * sizeof(double));
        double local = 0;
        for (int i = 1; i <= ny; i++)
            for (int j = 1; j <= nx; j++) {
                double x = 0.25 * (U(u, i - 1, j) + U(u, i + 1, j) + U(u, i, j - 1) + U(u, i, j + 1));
                local += (x - U(u, i, j)) * (x - U(u, i, j));
                U(v, i, j) = x;
            }
        memcpy(u, v, cells * sizeof(double));
        if ((rc = MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD))) goto out;
        int due;
        if ((rc = resilient_checkpoint_due(it + 1, every, &due))) goto out;
        if (due) {
            int e;
            h->iter = it + 1;
            MPIX_Get_fault_epoch(&e);
            if (save(e + 1, blob, bytes) != 0) {
                fprintf(stderr, "stencil2d: rank %d cannot write its data\n", rank);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            double c0 = MPI_Wtime();
            if ((rc = MPIX_Checkpoint_write())) goto out;
            ckpt_s += MPI_Wtime() - c0;
        }
    }
    double local[2] = {0, 0}, global[2];
    for (int i = 1; i <= ny; i++)
        for (int j = 1; j <= nx; j++) {
            local[0] += U(u, i, j);
            local[1] += U(u, i, j) * ((cy * ny + i) * 7 + (cx * nx + j));
        }
    if ((rc = MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD))) goto out;
    if ((rc = MPI_Barrier(MPI_COMM_WORLD))) goto out;
    result[0] = global[0];
    result[1] = global[1];
    result[2] = sqrt(residual);
out:
    if (store == PROTECT) MPIX_Unprotect(0);
    free(blob);
    free(v);
    free(sendbuf);
    free(recvbuf);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) n = atoi(argv[1]);
    if (argc > 2) iters = atoi(argv[2]);
    if (argc > 3) every = resilient_every(argv[3]);
    if (argc > 4) dir = argv[4];
    if (!strcmp(dir, "protect")) store = PROTECT;
    if (!strcmp(dir, "route")) store = ROUTE;
    if (every == 0) every = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (px = (int)sqrt((double)size); size % px; px--)
        ;
    py = size / px;
    cx = rank % px;
    cy = rank / px;
    nx = n / px;
    ny = n / py;
    if (nx < 1 || ny < 1 || nx * px != n || ny * py != n) {
        if (rank == 0) fprintf(stderr, "stencil2d: N=%d does not split over a %dx%d grid\n", n, px, py);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double result[3];
    int epoch;
    double t0 = MPI_Wtime();
    resilient_run("stencil2d", main_loop, result);
    /* For bench/storage: the main loop's time without start-up and without
     * MPI_Finalize (which waits for background flushes to complete). */
    if (rank == 0 && getenv("STENCIL2D_TIME")) fprintf(stderr, "stencil2d: main loop %.3f s\n", MPI_Wtime() - t0);
    if (getenv("STENCIL2D_TIME"))
        fprintf(stderr, "stencil2d: rank %d: %.3f ms in MPIX_Checkpoint_write\n", rank, ckpt_s * 1e3);
    if (rank == 0)
        printf("stencil2d: %d ranks (%dx%d), N=%d, %d iterations, checksum %.15e %.15e residual %.6e\n", size, px, py, n,
               iters, result[0], result[1], result[2]);
    MPIX_Get_fault_epoch(&epoch);
    if (store == OWN_FILES) appckpt_clean(dir, "stencil2d", rank, epoch);
    MPI_Finalize();
    return 0;
}
