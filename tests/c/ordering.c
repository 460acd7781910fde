/* Matching order: messages from one source match in the order they were
 * sent (also through MPI_ANY_SOURCE / MPI_ANY_TAG receives), and receives
 * posted with the same source and tag match in the order they were posted.
 * Every rank sends a numbered stream to rank 0, which checks each source's
 * sequence. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 200

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* 1: wildcard receives see each source's messages in send order. */
    if (rank != 0) {
        for (int i = 0; i < N; i++) {
            int msg[2] = {rank, i};
            MPI_Send(msg, 2, MPI_INT, 0, i % 3, MPI_COMM_WORLD);
        }
    } else {
        int *next = calloc(size, sizeof(int));
        for (int k = 0; k < N * (size - 1); k++) {
            int msg[2];
            MPI_Status st;
            MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            CHECK(st.MPI_SOURCE == msg[0], "source %d vs payload %d", st.MPI_SOURCE, msg[0]);
            CHECK(msg[1] == next[msg[0]], "from %d got #%d, expected #%d", msg[0], msg[1], next[msg[0]]);
            CHECK(st.MPI_TAG == msg[1] % 3, "tag");
            next[msg[0]]++;
        }
        free(next);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2: same-tag receives posted first are matched in posting order, both
     * for a named source and for MPI_ANY_SOURCE mixed with it. */
    if (size >= 2) {
        if (rank == 1) {
            MPI_Recv(NULL, 0, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* receives are posted */
            for (int i = 0; i < 8; i++) MPI_Send(&i, 1, MPI_INT, 0, 42, MPI_COMM_WORLD);
        } else if (rank == 0) {
            int got[8];
            MPI_Request rq[8];
            for (int i = 0; i < 8; i++)
                MPI_Irecv(&got[i], 1, MPI_INT, i % 2 ? MPI_ANY_SOURCE : 1, 42, MPI_COMM_WORLD, &rq[i]);
            MPI_Send(NULL, 0, MPI_INT, 1, 1, MPI_COMM_WORLD);
            MPI_Waitall(8, rq, MPI_STATUSES_IGNORE);
            for (int i = 0; i < 8; i++) CHECK(got[i] == i, "posted receive %d got %d", i, got[i]);
        }
    }

    /* 3: unexpected messages (sent before any receive exists) keep order
     * per source even when received with a specific tag out of order. */
    if (size >= 2) {
        if (rank == 1) {
            for (int i = 0; i < 6; i++) {
                int v = 100 + i;
                MPI_Send(&v, 1, MPI_INT, 0, i % 2, MPI_COMM_WORLD);
            }
            MPI_Send(NULL, 0, MPI_INT, 0, 99, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Status st;
            MPI_Probe(1, 99, MPI_COMM_WORLD, &st); /* everything has arrived */
            int v;
            for (int i = 1; i < 6; i += 2) {
                MPI_Recv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &st);
                CHECK(v == 100 + i, "odd-tag order: got %d want %d", v, 100 + i);
            }
            for (int i = 0; i < 6; i += 2) {
                MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &st);
                CHECK(v == 100 + i, "even-tag order: got %d want %d", v, 100 + i);
            }
            MPI_Recv(NULL, 0, MPI_INT, 1, 99, MPI_COMM_WORLD, &st);
        }
    }
    /* 4: a stream larger than a shared-memory ring, to a receiver that
     * is not there yet: blocking sends that find room go straight into
     * the ring, the rest queue behind them, with nonblocking sends and
     * rendezvous messages mixed in; all must match in send order. */
    if (rank != 0) {
        enum { M = 6000, BIG = 300 * 1024 };
        char *big = malloc((M / 1000) * BIG);
        int small[16];
        MPI_Request rq[16], bigrq[M / 1000];
        int nrq = 0;
        for (int i = 0; i < M; i++) {
            if (i % 1000 == 999) {
                char *b = big + (i / 1000) * BIG;
                memset(b, (char)(i + rank), BIG);
                MPI_Isend(b, BIG, MPI_CHAR, 0, 7, MPI_COMM_WORLD, &bigrq[i / 1000]);
            } else if (i % 100 == 50) {
                small[i / 100 % 16] = i;
                MPI_Isend(&small[i / 100 % 16], 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &rq[nrq++]);
            } else {
                int msg[8] = {rank, i, i, i, i, i, i, i};
                MPI_Send(msg, 8, MPI_INT, 0, 7, MPI_COMM_WORLD);
            }
            if (nrq == 16) {
                MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
                nrq = 0;
            }
        }
        MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
        MPI_Waitall(M / 1000, bigrq, MPI_STATUSES_IGNORE);
        free(big);
    } else {
        enum { M = 6000, BIG = 300 * 1024 };
        usleep(200000); /* the senders fill their rings meanwhile */
        char *big = malloc(BIG);
        for (int s = 1; s < size; s++) {
            for (int i = 0; i < M; i++) {
                MPI_Status st;
                int count;
                if (i % 1000 == 999) {
                    MPI_Recv(big, BIG, MPI_CHAR, s, 7, MPI_COMM_WORLD, &st);
                    CHECK(big[0] == (char)(i + s) && big[BIG - 1] == (char)(i + s),
                          "from %d: message %d (rendezvous) out of order", s, i);
                } else if (i % 100 == 50) {
                    int v = -1;
                    MPI_Recv(&v, 1, MPI_INT, s, 7, MPI_COMM_WORLD, &st);
                    CHECK(v == i, "from %d: message %d (nonblocking) got %d", s, i, v);
                } else {
                    int msg[8] = {0};
                    MPI_Recv(msg, 8, MPI_INT, s, 7, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_INT, &count);
                    CHECK(count == 8 && msg[0] == s && msg[1] == i && msg[7] == i,
                          "from %d: message %d got #%d (count %d)", s, i, msg[1], count);
                }
            }
        }
        free(big);
    }
    pass("ordering");
    MPI_Finalize();
    return 0;
}
