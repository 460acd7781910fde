/* MPI_Finalize is a barrier among the ranks of MPI_COMM_WORLD, carried by
 * mpiexec: rank 0 comes a second late, and every other rank waits for it
 * there. The ranks never talk, so none connects to another. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        sleep(1);
    double t0 = now();
    MPI_Finalize();
    printf("rank %d waited %.3f s in MPI_Finalize\n", rank, now() - t0);
    return 0;
}
