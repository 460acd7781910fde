/* 8-byte ping-pong between ranks 0 and 1 for bench/contention: N round
 * trips in each of 9 blocks; prints "median_block_us mean_us", the half
 * round trip in microseconds, the median block and the mean over all
 * blocks. Beside a busy process the mean is the one to read: a short
 * block may fall between the other process's time slices.
 *   pingpong [N]   (default 20000) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, n;
    char buf[8] = {0};
    double t[9], sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    n = argc > 1 ? atoi(argv[1]) : 20000;
    for (int b = 0; b < 9; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        t[b] = (MPI_Wtime() - t0) / n / 2 * 1e6;
        sum += t[b];
    }
    qsort(t, 9, sizeof(double), by_value);
    if (rank == 0) printf("%.3f %.3f\n", t[4], sum / 9);
    MPI_Finalize();
    return 0;
}
