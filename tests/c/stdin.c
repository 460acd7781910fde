/* Rank 0 reads its stdin to the end (what mpiexec forwards to it) and
 * every rank prints the byte count and a checksum of it, after a
 * broadcast: each rank shows that the job, not just rank 0, saw it. */
#include "check.h"
#include <stdint.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    unsigned long long got[2] = {0, 0}; /* bytes, sum of bytes * position */
    if (rank == 0) {
        int c;
        while ((c = getchar()) != EOF) {
            got[0]++;
            got[1] += (unsigned long long)c * got[0];
        }
    }
    CHECK_RC(MPI_Bcast(got, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    printf("rank %d: bytes=%llu sum=%llu\n", rank, got[0], got[1]);
    MPI_Finalize();
    return 0;
}
