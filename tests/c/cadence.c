/* MPIX_Checkpoint_needed, run as `cadence MODE` under mpiexec options that
 * set its policy (tests/stages.rs):
 * - every mode: 1 on every rank before the first checkpoint, and the same
 *   answer on every rank at every call;
 * - interval (--ckpt-interval 0.2), default (no option: checkpoints keep
 *   to 5% of the time) and mtbf (--mtbf 0.5, Daly's interval): while the
 *   ranks compute, 1 only once the interval for the cost this rank
 *   measured has passed since its last checkpoint (a lower bound, with
 *   margins for the clocks of the library and of this program), and 1
 *   again and again (3 checkpoints within 20 s);
 *   interval also: 1 after every rank slept longer than the interval;
 * - long (--ckpt-interval 1000): 0 right after a checkpoint;
 * - badenv (MPISTAGES_MTBF=soon): MPI_ERR_ARG (its detail, naming the
 *   variable, is checked on stderr by the test). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"

#define N (1 << 16)

static double state[N];

static void nap(double secs)
{
    struct timespec t = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&t, NULL);
}

/* The flag, checked to be the same on every rank. */
static int needed(void)
{
    int flag = -1, lo, hi;
    CHECK_RC(MPIX_Checkpoint_needed(&flag));
    CHECK(flag == 0 || flag == 1, "flag %d", flag);
    MPI_Allreduce(&flag, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&flag, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "ranks disagree: min %d max %d", lo, hi);
    return flag;
}

/* The interval the library should keep for checkpoints of `cost` s. */
static double interval(const char *mode, double cost)
{
    if (!strcmp(mode, "interval")) return 0.2;
    if (!strcmp(mode, "mtbf")) {
        double m = 0.5, x = cost / (2 * m);
        if (cost >= 2 * m) return m;
        return sqrt(2 * cost * m) * (1 + sqrt(x) / 3 + x / 9) - cost;
    }
    return cost * (1 / 0.05 - 1);
}

int main(int argc, char **argv)
{
    int rank;
    const char *mode = argc > 1 ? argv[1] : "default";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < N; i++) state[i] = rank + i;

    if (!strcmp(mode, "badenv")) {
        int flag = 7, class, len;
        char msg[MPI_MAX_ERROR_STRING];
        int rc = MPIX_Checkpoint_needed(&flag);
        MPI_Error_class(rc, &class);
        MPI_Error_string(rc, msg, &len);
        CHECK(class == MPI_ERR_ARG, "class %d: %s", class, msg);
        CHECK(flag == 7, "flag written on an error: %d", flag);
        pass("cadence");
        MPI_Finalize();
        return 0;
    }

    CHECK_RC(MPIX_Protect(1, state, N, MPI_DOUBLE));
    CHECK(needed() == 1, "no checkpoint needed before the first one");
    double t0 = MPI_Wtime();
    CHECK_RC(MPIX_Checkpoint_write());
    double last = MPI_Wtime(), costs = last - t0;
    int written = 1;

    if (!strcmp(mode, "long")) {
        for (int i = 0; i < 10; i++)
            CHECK(needed() == 0, "a checkpoint needed %.3f s after one, interval 1000 s",
                  MPI_Wtime() - last);
        pass("cadence");
        MPI_Finalize();
        return 0;
    }

    double start = MPI_Wtime();
    while (written < 4 && MPI_Wtime() - start < 20) {
        for (int i = 0; i < N; i++) state[i] += 1; /* the work */
        nap(0.002);
        if (!needed()) continue;
        double now = MPI_Wtime(), want = interval(mode, costs / written);
        /* The library measures a little less cost and a little more time
         * since the checkpoint than this program does. */
        CHECK(now - last >= 0.8 * want - 0.002,
              "%s: checkpoint needed %.4f s after the last, interval %.4f s (cost %.5f s)",
              mode, now - last, want, costs / written);
        t0 = MPI_Wtime();
        CHECK_RC(MPIX_Checkpoint_write());
        last = MPI_Wtime();
        costs += last - t0;
        written++;
    }
    CHECK(written >= 4, "%s: %d checkpoints in 20 s", mode, written);

    if (!strcmp(mode, "interval")) {
        nap(0.25);
        CHECK(needed() == 1, "no checkpoint needed 0.25 s after one, interval 0.2 s");
    }
    if (rank == 0) printf("%s: %d checkpoints, %.5f s each\n", mode, written, costs / written);
    pass("cadence");
    MPI_Finalize();
    return 0;
}
