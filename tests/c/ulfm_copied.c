/* Under ULFM, the last rank dies (a SIGKILL from a thread of its own, at a
 * moment its main thread does not choose) while every rank runs large
 * collectives that copy from each other's memory (allreduce, bcast,
 * allgather of 128-512 KiB): the kill lands in a wait, in a copy from the
 * dying rank or between them. Every survivor must get MPIX_ERR_PROC_FAILED
 * or MPIX_ERR_REVOKED from a collective, never a hang, a crash or a wrong
 * value, and end. */
#include "check.h"
#include <mpi-ext.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static void *die_soon(void *arg) {
    usleep(*(int *)arg);
    raise(SIGKILL);
    return NULL;
}

int main(int argc, char **argv) {
    int me, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(size >= 3, "run with at least 3 ranks");
    int victim = size - 1, delay = argc > 1 ? atoi(argv[1]) : 300000;
    int n = 1 << 16; /* 512 KiB of doubles */
    double *v = malloc(n * sizeof(double)), *all = malloc(size * (n / 4) * sizeof(double));
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t killer;
    if (me == victim) pthread_create(&killer, NULL, die_soon, &delay);
    int rc = MPI_SUCCESS, it;
    for (it = 0; it < 1000000 && rc == MPI_SUCCESS; it++) {
        for (int i = 0; i < n; i++) v[i] = me + i;
        switch (it % 3) {
        case 0:
            rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
                CHECK(v[i] == size * (size - 1) / 2.0 + (double)size * i, "allreduce %d: [%d] = %g", it, i, v[i]);
            break;
        case 1:
            rc = MPI_Bcast(v, n, MPI_DOUBLE, it % size, MPI_COMM_WORLD);
            for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
                CHECK(v[i] == it % size + i, "bcast %d: [%d] = %g", it, i, v[i]);
            break;
        default:
            rc = MPI_Allgather(v, n / 4, MPI_DOUBLE, all, n / 4, MPI_DOUBLE, MPI_COMM_WORLD);
            for (int r = 0; rc == MPI_SUCCESS && r < size; r++)
                for (int i = 0; i < n / 4; i++)
                    CHECK(all[r * (n / 4) + i] == r + i, "allgather %d: [%d][%d]", it, r, i);
        }
    }
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED, "after %d collectives: error %d (class %d)", it, rc, cls);
    printf("survivor %d: %s after %d collectives\n", me, cls == MPIX_ERR_PROC_FAILED ? "proc failed" : "revoked", it);
    fflush(stdout);
    free(v);
    free(all);
    MPI_Finalize();
    return 0;
}
