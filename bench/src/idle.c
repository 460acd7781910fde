/* An idle job for bench/scale's memory and CPU sample: every rank starts,
 * passes a barrier, and then all but rank 0 wait in a second barrier while
 * rank 0 sleeps (argv[1] seconds, default 5) after printing READY: what an
 * idle rank costs in memory, and whether waiting ranks sleep. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("READY\n");
        fflush(stdout);
        sleep(argc > 1 ? atoi(argv[1]) : 5);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
