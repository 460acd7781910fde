/* Large exchanges with computation between post and wait, each followed
 * by a barrier, as a benchmark of overlap runs them. In poll mode
 * (MPISTAGES_PROGRESS=poll) nothing but the ranks' own MPI calls moves
 * data and acknowledgements: a rank that waits in a barrier must go on
 * answering its peers, or a peer still waiting for the acknowledgement of
 * its send never reaches that barrier (over UDP: both waited until the
 * peer's silence ended the job). */
#include "check.h"
#include <stdlib.h>
#include <time.h>

static void compute_ms(double ms) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 < ms);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = 4 << 20, peer = rank ^ 1;
    unsigned char *out = malloc(n), *in = malloc(n);
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < n; i++) out[i] = (unsigned char)(rank * 31 + round + i);
        if (peer < size) {
            MPI_Request rq[2];
            MPI_Irecv(in, n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &rq[0]);
            MPI_Isend(out, n, MPI_BYTE, peer, round, MPI_COMM_WORLD, &rq[1]);
            /* One side of each pair computes, in turn. */
            if ((rank + round) % 2 == 0) compute_ms(20);
            CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            for (int i = 0; i < n; i += 4099)
                CHECK(in[i] == (unsigned char)(peer * 31 + round + i), "round %d byte %d", round, i);
        }
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(out);
    free(in);
    pass("poll_exchange");
    MPI_Finalize();
    return 0;
}
