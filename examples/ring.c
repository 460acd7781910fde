/* The MPI Stages ring microbenchmark: a value goes around N ranks, RINGS
 * times. Each rank checkpoints right after its part of a ring (MPI state
 * with MPIX_Checkpoint_write, its own data as a file). A failure during
 * ring k rolls everyone back to the last ring all ranks completed.
 *
 *   mpiexec -n 4 --recovery stages ./ring [RINGS] [DELAY_MS] [DIR]
 *
 * Prints a checksum that is the same with and without failures. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "appckpt.h"

struct state {
    int next_ring;       /* first ring not yet done by this rank */
    long long value;     /* rank 0: the value that goes around */
    long long acc;       /* sum of every value this rank passed on */
};

static int rank, size, rings = 20, delay_ms = 0;
static const char *dir = ".";

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One attempt at the whole run, from `epoch`. Returns MPI_SUCCESS when
 * done, MPIX_TRY_RELOAD after a failure. */
static int main_loop(int epoch, long long result[2])
{
    struct state s = {0, 1, 0};
    int rc;
    if (epoch > 0 && appckpt_load(dir, "ring", rank, epoch, &s, sizeof s) != 0) {
        fprintf(stderr, "ring: rank %d cannot read its data for epoch %d\n", rank, epoch);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int k = s.next_ring; k < rings; k++) {
        if (delay_ms) pause_ms(delay_ms);
        if (rank == 0) {
            if (size > 1) {
                if ((rc = MPI_Send(&s.value, 1, MPI_LONG_LONG, next, k, MPI_COMM_WORLD))) return rc;
                if ((rc = MPI_Recv(&s.value, 1, MPI_LONG_LONG, prev, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE))) return rc;
            }
            s.value = (s.value * 31 + k) % 1000003;
            s.acc += s.value;
        } else {
            long long v;
            if ((rc = MPI_Recv(&v, 1, MPI_LONG_LONG, prev, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE))) return rc;
            v = (v + (long long)rank * (k + 1)) % 1000003;
            s.acc += v;
            if ((rc = MPI_Send(&v, 1, MPI_LONG_LONG, next, k, MPI_COMM_WORLD))) return rc;
        }
        s.next_ring = k + 1;
        int e;
        MPIX_Get_fault_epoch(&e);
        if (appckpt_save(dir, "ring", rank, e + 1, &s, sizeof s) != 0) {
            fprintf(stderr, "ring: rank %d cannot write its data\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if ((rc = MPIX_Checkpoint_write())) return rc;
    }
    long long acc_sum = 0;
    if ((rc = MPI_Allreduce(&s.acc, &acc_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD))) return rc;
    if ((rc = MPI_Bcast(&s.value, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD))) return rc;
    /* No rank may finalize before every rank is through (Listing 5.4). */
    if ((rc = MPI_Barrier(MPI_COMM_WORLD))) return rc;
    result[0] = s.value;
    result[1] = acc_sum;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    if (argc > 1) rings = atoi(argv[1]);
    if (argc > 2) delay_ms = atoi(argv[2]);
    if (argc > 3) dir = argv[3];
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long result[2];
    int code = MPI_SUCCESS, epoch = 0, rollbacks = 0;
    for (;;) { /* the resilient loop */
        if (code == MPIX_TRY_RELOAD) {
            rollbacks++;
            if ((code = MPIX_Checkpoint_read()) != MPI_SUCCESS) {
                if (code == MPIX_TRY_RELOAD) continue;
                fprintf(stderr, "ring: rank %d: MPIX_Checkpoint_read failed (%d)\n", rank, code);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else if (code != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(code, msg, &len);
            fprintf(stderr, "ring: rank %d: %s\n", rank, msg);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPIX_Get_fault_epoch(&epoch);
        code = main_loop(epoch, result);
        if (code == MPI_SUCCESS) break;
    }
    if (rank == 0)
        printf("ring: %d ranks, %d rings, checksum %lld %lld\n", size, rings, result[0], result[1]);
    if (rollbacks) fprintf(stderr, "ring: rank %d rolled back %d time(s)\n", rank, rollbacks);
    int last;
    MPIX_Get_fault_epoch(&last);
    appckpt_clean(dir, "ring", rank, last);
    MPI_Finalize();
    return 0;
}
