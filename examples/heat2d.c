/* heat2d: explicit 2D heat diffusion on a global N x N grid split into
 * row blocks, halo rows exchanged with Isend/Irecv/Waitall, the global
 * residual from MPI_Allreduce every step. Prints a checksum that does not
 * depend on the number of ranks. Usage: heat2d [N] [steps] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 512;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    if (n < size) {
        if (rank == 0) fprintf(stderr, "heat2d: the grid (%d rows) needs at least one row per rank (%d)\n", n, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int first = (int)((long)n * rank / size), rows = (int)((long)n * (rank + 1) / size) - first;
    /* rows + 2 halo rows, n columns */
    double *u = calloc((size_t)(rows + 2) * n, sizeof(double)), *v = calloc((size_t)(rows + 2) * n, sizeof(double));
    for (int i = 1; i <= rows; i++)
        for (int j = 0; j < n; j++) {
            int gi = first + i - 1;
            u[(size_t)i * n + j] = (gi > n / 4 && gi < n / 2 && j > n / 3 && j < 2 * n / 3) ? 100.0 : 0.0;
        }
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double t0 = MPI_Wtime(), residual = 0;
    for (int s = 0; s < steps; s++) {
        MPI_Request rq[4];
        MPI_Irecv(&u[0], n, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&u[(size_t)(rows + 1) * n], n, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(&u[(size_t)n], n, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &rq[2]);
        MPI_Isend(&u[(size_t)rows * n], n, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        double local = 0;
        for (int i = 1; i <= rows; i++) {
            int gi = first + i - 1;
            for (int j = 0; j < n; j++) {
                size_t k = (size_t)i * n + j;
                if (gi == 0 || gi == n - 1 || j == 0 || j == n - 1) { v[k] = u[k]; continue; }
                v[k] = u[k] + 0.2 * (u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4 * u[k]);
                local += (v[k] - u[k]) * (v[k] - u[k]);
            }
        }
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double *t = u; u = v; v = t;
    }
    double sum = 0, total;
    for (int i = 1; i <= rows; i++)
        for (int j = 0; j < n; j++) { double x = u[(size_t)i * n + j]; sum += x * x * (1 + ((first + i - 1) * 31 + j) % 7); }
    MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("heat2d: %d ranks, %dx%d grid, %d steps in %.3f s; residual %.6e; checksum %.10e\n", size, n, n, steps,
               MPI_Wtime() - t0, residual, total);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
