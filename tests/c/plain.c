/* An unmodified MPI program: no checkpoints, no resilient loop. With the
 * argument "return" it sets MPI_ERRORS_RETURN and ignores every error code
 * (as careless programs do); otherwise it keeps the default
 * MPI_ERRORS_ARE_FATAL. Prints the sum of 400 allreduces. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "return") == 0)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long sum = 0;
    for (int i = 0; i < 400; i++) {
        long x = i * (long)(rank + 1), y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        sum += y;
        usleep(1000);
    }
    if (rank == 0) printf("plain: sum %ld\n", sum);
    MPI_Finalize();
    return 0;
}
