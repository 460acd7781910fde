#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int token = rank == 0 ? 42 : -1;
    if (size > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += 1;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
        }
    }
    double sum = 0, mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: token %d sum %.0f\n", rank, size, token, sum);
    MPI_Finalize();
    return 0;
}
