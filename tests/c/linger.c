/* Keeps communicating for a while (ring messages checked every round) so a
 * test can poke the ranks' sockets from outside meanwhile. */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int round = 0; round < 40; round++) {
        int out[2] = {rank, round}, in[2] = {-1, -1};
        MPI_Sendrecv(out, 2, MPI_INT, right, 0, in, 2, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(in[0] == left && in[1] == round, "round %d got %d/%d", round, in[0], in[1]);
        usleep(50000);
    }
    pass("linger");
    MPI_Finalize();
    return 0;
}
