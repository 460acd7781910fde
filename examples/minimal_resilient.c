/* The shortest complete MPI Stages program: its state is registered with
 * MPIX_Protect, checkpointed with MPIX_Checkpoint_write, and a failure of
 * any rank costs only the steps since the last checkpoint.
 *
 *   mpiexec -n 4 --recovery stages ./minimal_resilient
 *   mpiexec -n 4 --recovery stages --inject rank=2,checkpoint=3 ./minimal_resilient
 *
 * Both print the same sum. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 100000   /* values per rank */
#define STEPS 60
#define EVERY 10   /* steps between checkpoints */

static double field[N];
static double sum;
static int step;

/* One step: compute, then combine with the other ranks. */
static int compute_step(int rank)
{
    for (int i = 0; i < N; i++) field[i] += rank + 0.001 * step;
    double mine = field[step % N], all;
    int rc = MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) {
        sum += all;
        step++;
    }
    return rc;
}

/* The data of the fault epoch back into the protected regions, or the
 * start again if no checkpoint had committed (epoch 0). */
static void reload(void)
{
    int epoch;
    MPIX_Get_fault_epoch(&epoch);
    if (epoch > 0) {
        if (MPIX_Checkpoint_restore() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 2);
    } else {
        memset(field, 0, sizeof field);
        sum = 0;
        step = 0;
    }
}

int main(int argc, char **argv)
{
    int rank, rc;
    MPI_Init(&argc, &argv);
    /* Failures come back as return codes (MPIX_TRY_RELOAD). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPIX_Protect(0, field, N, MPI_DOUBLE);
    MPIX_Protect(1, &sum, 1, MPI_DOUBLE);
    MPIX_Protect(2, &step, 1, MPI_INT);
    /* A replacement of a failed rank starts here too, at fault epoch > 0. */
    reload();
    while (step < STEPS) {
        rc = compute_step(rank);
        if (rc == MPI_SUCCESS && step % EVERY == 0) rc = MPIX_Checkpoint_write();
        if (rc == MPIX_TRY_RELOAD) {
            /* Another rank failed: every rank rolls back its MPI state
             * (waiting for the replacement), then its data. */
            while ((rc = MPIX_Checkpoint_read()) == MPIX_TRY_RELOAD) {
            }
            if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
            reload();
        } else if (rc != MPI_SUCCESS) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) printf("minimal_resilient: %d steps, sum %.6f\n", step, sum);
    MPI_Finalize();
    return 0;
}
