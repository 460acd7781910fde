/* Spare processes (mpiexec --spares): every process prints its pid before
 * MPI_Init, so the test sees which processes became ranks (a spare's line
 * must appear once it replaces a rank, and never for a spare that was not
 * needed). The ranks sum a value with Allreduce 40 times, 10 ms apart
 * (so that a failure in the middle comes after the spare is waiting),
 * checkpointing every 5, and roll back on MPIX_TRY_RELOAD; each prints
 * its pid and sum.
 *
 *   mpiexec -n 3 --recovery stages ./spare */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

static long long acc;
static int it;

/* After a failure: the fault epoch's data, or the start. */
static void roll_back(void)
{
    int epoch;
    MPIX_Get_fault_epoch(&epoch);
    if (epoch > 0) {
        if (MPIX_Checkpoint_restore() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 2);
    } else {
        acc = 0;
        it = 0;
    }
}

int main(int argc, char **argv)
{
    printf("before MPI_Init: pid %d\n", (int)getpid());
    fflush(stdout);
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPIX_Protect(0, &acc, 1, MPI_LONG_LONG);
    MPIX_Protect(1, &it, 1, MPI_INT);
    roll_back();
    while (it < 40) {
        usleep(10000);
        long long v = rank + it, s;
        int rc = MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) {
            acc += s;
            it++;
            if (it % 5 == 0) rc = MPIX_Checkpoint_write();
        }
        if (rc == MPIX_TRY_RELOAD) {
            while ((rc = MPIX_Checkpoint_read()) == MPIX_TRY_RELOAD) {
            }
            if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
            roll_back();
        } else if (rc != MPI_SUCCESS) {
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
    }
    printf("rank %d pid %d sum %lld\n", rank, (int)getpid(), acc);
    MPI_Finalize();
    return 0;
}
