/* Every rank finalizes at once; rank 1 then goes on without MPI for a
 * while (post-processing, say), so a test can kill it after its
 * MPI_Finalize. */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    pass("after_finalize"); /* a collective: every rank */
    MPI_Finalize();
    if (rank == 1) sleep(20);
    return 0;
}
