/* An application using a small parallel library ("mmlib") that keeps its
 * own communicator (MPI_Comm_dup) and survives a recovery through the MPI
 * Stages handle registries: its serialize handler hands its communicator to
 * MPIX_Serialize_handles (saved with the next MPIX_Checkpoint_write), its
 * deserialize handler takes it back in MPIX_Deserialize_handles.
 *
 * The application repeats A <- normalize(A * B) on an N x N matrix whose
 * rows are spread over the ranks; the library gathers B and multiplies.
 *
 *   mpiexec -n 4 --recovery stages ./matmul_lib [N] [ITERS] [DIR]        */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "appckpt.h"
#include "resilient.h"

/* ---------------- the library ---------------- */
static MPI_Comm mm_comm = MPI_COMM_NULL;
static MPI_Comm mm_saved[1];

static void mm_serialize(MPIX_Handles *h)
{
    mm_saved[0] = mm_comm;
    h->comms = mm_saved;
    h->comm_size = 1;
    h->grps = NULL;
    h->group_size = 0;
}

static void mm_deserialize(MPIX_Handles h)
{
    mm_comm = h.comm_size > 0 ? h.comms[0] : MPI_COMM_NULL;
}

/* Once per process, right after MPI_Init. */
static void mm_register(void)
{
    MPIX_Serialize_handler_register(mm_serialize);
    MPIX_Deserialize_handler_register(mm_deserialize);
}

/* A fresh start: the library's own communicator. */
static int mm_init(MPI_Comm comm)
{
    int rc = MPI_Comm_dup(comm, &mm_comm);
    if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(mm_comm, MPI_ERRORS_RETURN);
    return rc;
}

/* C(rows x n) = A(rows x n) * B, B given as this rank's rows of it. */
static int mm_multiply(const double *a, const double *b_rows, double *c, int n, int rows, double *b_full)
{
    int rc = MPI_Allgather(b_rows, rows * n, MPI_DOUBLE, b_full, rows * n, MPI_DOUBLE, mm_comm);
    if (rc != MPI_SUCCESS) return rc;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b_full[k * n + j];
            c[i * n + j] = s;
        }
    return MPI_SUCCESS;
}

/* ---------------- the application ---------------- */
static int rank, size, n = 64, iters = 40;
static const char *dir = ".";

struct head {
    int iter;
    int n;
};

static int main_loop(int epoch, void *ctx)
{
    double *result = ctx;
    int rows = n / size, rc;
    size_t cnt = (size_t)rows * n;
    size_t bytes = sizeof(struct head) + cnt * sizeof(double);
    char *blob = calloc(1, bytes);
    struct head *h = (struct head *)blob;
    double *a = (double *)(blob + sizeof *h);
    double *b = malloc(cnt * sizeof(double)), *c = malloc(cnt * sizeof(double));
    double *full = malloc((size_t)n * n * sizeof(double));
    if (epoch == 0) {
        /* Fresh start (or a rollback to before the first checkpoint). */
        if ((rc = mm_init(MPI_COMM_WORLD))) goto out;
        h->iter = 0;
        h->n = n;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < n; j++) a[i * n + j] = 1.0 / (1 + ((rank * rows + i) * 7 + j * 3) % 11);
    } else {
        if ((rc = MPIX_Deserialize_handles())) goto out;
        if (mm_comm == MPI_COMM_NULL || appckpt_load(dir, "matmul", rank, epoch, blob, bytes) != 0 || h->n != n) {
            fprintf(stderr, "matmul_lib: rank %d cannot restore epoch %d\n", rank, epoch);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) b[i * n + j] = ((rank * rows + i) == j ? 0.5 : 0.0) + 0.01 * (((rank * rows + i) + 2 * j) % 5);
    for (int it = h->iter; it < iters; it++) {
        if ((rc = mm_multiply(a, b, c, n, rows, full))) goto out;
        double local = 0, norm;
        for (size_t k = 0; k < cnt; k++) local += c[k] * c[k];
        if ((rc = MPI_Allreduce(&local, &norm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD))) goto out;
        norm = sqrt(norm);
        for (size_t k = 0; k < cnt; k++) a[k] = c[k] / norm * n;
        h->iter = it + 1;
        int e;
        MPIX_Get_fault_epoch(&e);
        if (appckpt_save(dir, "matmul", rank, e + 1, blob, bytes) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
        if ((rc = MPIX_Serialize_handles())) goto out;
        if ((rc = MPIX_Checkpoint_write())) goto out;
    }
    double local[2] = {0, 0};
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) {
            local[0] += a[i * n + j];
            local[1] += a[i * n + j] * (rank * rows + i + 1) * (j + 1);
        }
    if ((rc = MPI_Allreduce(local, result, 2, MPI_DOUBLE, MPI_SUM, mm_comm))) goto out;
    rc = MPI_Barrier(MPI_COMM_WORLD);
out:
    free(blob);
    free(b);
    free(c);
    free(full);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) n = atoi(argv[1]);
    if (argc > 2) iters = atoi(argv[2]);
    if (argc > 3) dir = argv[3];
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mm_register();
    if (n % size) {
        if (rank == 0) fprintf(stderr, "matmul_lib: N=%d is not a multiple of %d ranks\n", n, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double result[2];
    int epoch;
    resilient_run("matmul_lib", main_loop, result);
    if (rank == 0) printf("matmul_lib: %d ranks, N=%d, %d iterations, checksum %.15e %.15e\n", size, n, iters, result[0], result[1]);
    MPIX_Get_fault_epoch(&epoch);
    appckpt_clean(dir, "matmul", rank, epoch);
    MPI_Finalize();
    return 0;
}
