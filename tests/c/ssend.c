/* A synchronous send must not complete before the receiver matched it.
 * Rank 1 posts its receive only after rank 0 has watched its Issend stay
 * incomplete for a while and then told rank 1 to go; so completion before
 * the "go" message would be a bug, whatever the timing. Tested for an
 * eager-sized and a rendezvous-sized message. */
#include "check.h"
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int sizes[2] = {4, 300000};
    for (int k = 0; k < 2 && size >= 2; k++) {
        int n = sizes[k];
        int *buf = malloc(sizeof(int) * n);
        if (rank == 0) {
            for (int i = 0; i < n; i++) buf[i] = i + k;
            MPI_Request rq;
            MPI_Issend(buf, n, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
            for (int i = 0; i < 50; i++) {
                int flag = 1;
                MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
                CHECK(!flag, "Issend of %d ints completed before the receive was posted", n);
                usleep(4000);
            }
            MPI_Send(NULL, 0, MPI_INT, 1, 6, MPI_COMM_WORLD); /* go */
            CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else if (rank == 1) {
            MPI_Recv(NULL, 0, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(buf, n, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; i++) CHECK(buf[i] == i + k, "ssend data %d", i);
        }
        free(buf);
    }
    /* Blocking Ssend to oneself needs the matching receive posted first. */
    {
        int x = 3, y = 0;
        MPI_Request rq;
        MPI_Irecv(&y, 1, MPI_INT, rank, 8, MPI_COMM_WORLD, &rq);
        CHECK_RC(MPI_Ssend(&x, 1, MPI_INT, rank, 8, MPI_COMM_WORLD));
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        CHECK(y == 3, "self ssend");
    }
    pass("ssend");
    MPI_Finalize();
    return 0;
}
