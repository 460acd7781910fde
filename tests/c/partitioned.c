/* Partitioned communication (MPI 4.0) around a ring: each rank sends 8
 * partitions of 16 ints to the right and receives as many from the left,
 * three rounds on the same requests, the partitions marked ready one by
 * one in reverse order, then by ranges, then by a list; the receiver
 * polls MPI_Parrived until a partition is there. Misuse is an error:
 * Pready before MPI_Start, a partition out of range, Parrived of a send.
 * Then pairing: three partitioned sends with one tag, started and made
 * ready in another order than their init calls, pair with the receives
 * in the order of the inits, report the program's tag, and a plain
 * message with that tag sent after them goes to the plain receive. */
#include "check.h"

#define PARTS 8
#define COUNT 16

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    static int out[PARTS * COUNT], in[PARTS * COUNT];
    MPI_Request rq[2];
    CHECK_RC(MPI_Psend_init(out, PARTS, COUNT, MPI_INT, right, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    CHECK_RC(MPI_Precv_init(in, PARTS, COUNT, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Pready(0, rq[0]) != MPI_SUCCESS, "Pready before MPI_Start");
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < PARTS * COUNT; i++) in[i] = -1;
        CHECK_RC(MPI_Startall(2, rq));
        int flag = 1, cls;
        CHECK(MPI_Parrived(rq[0], 0, &flag) != MPI_SUCCESS, "Parrived of a send");
        MPI_Error_class(MPI_Pready(PARTS, rq[0]), &cls);
        CHECK(cls == MPI_ERR_ARG, "partition %d of %d: class %d", PARTS, PARTS, cls);
        for (int p = PARTS - 1; p >= 0; p--) {
            for (int i = 0; i < COUNT; i++) out[p * COUNT + i] = 100000 * round + 1000 * rank + p * COUNT + i;
            if (round == 0) CHECK_RC(MPI_Pready(p, rq[0]));
        }
        if (round == 1) {
            CHECK_RC(MPI_Pready_range(0, PARTS / 2 - 1, rq[0]));
            CHECK_RC(MPI_Pready_range(PARTS / 2, PARTS - 1, rq[0]));
        } else if (round == 2) {
            int list[PARTS];
            for (int p = 0; p < PARTS; p++) list[p] = (p * 3) % PARTS;
            CHECK_RC(MPI_Pready_list(PARTS, list, rq[0]));
        }
        int arrived = 0;
        for (long spins = 0; !arrived; spins++) {
            CHECK_RC(MPI_Parrived(rq[1], PARTS - 1, &arrived));
            CHECK(spins < 100000000L, "partition never arrived");
        }
        for (int i = 0; i < COUNT; i++)
            CHECK(in[(PARTS - 1) * COUNT + i] == 100000 * round + 1000 * left + (PARTS - 1) * COUNT + i,
                  "round %d: arrived partition holds %d", round, in[(PARTS - 1) * COUNT + i]);
        CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < PARTS * COUNT; i++)
            CHECK(in[i] == 100000 * round + 1000 * left + i, "round %d: element %d is %d", round, i, in[i]);
    }
    CHECK_RC(MPI_Request_free(&rq[0]));
    CHECK_RC(MPI_Request_free(&rq[1]));
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "freed");

    /* Pairing by the order of the init calls, apart from plain messages. */
    static int bufs[3][COUNT];
    MPI_Request ps[3], pr[3];
    MPI_Status st[3];
    for (int k = 0; k < 3; k++) {
        CHECK_RC(MPI_Psend_init(bufs[k], 1, COUNT, MPI_INT, right, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &ps[k]));
    }
    static int got[3][COUNT];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < COUNT; i++) got[k][i] = -1;
        CHECK_RC(MPI_Precv_init(got[k], 1, COUNT, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[k]));
    }
    CHECK(MPI_Precv_init(got[0], 1, COUNT, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]) == MPI_ERR_ARG,
          "a partitioned receive from MPI_ANY_SOURCE");
    CHECK_RC(MPI_Startall(3, pr));
    int order[3] = {2, 0, 1};
    for (int j = 0; j < 3; j++) {
        int k = order[j];
        CHECK_RC(MPI_Start(&ps[k]));
        for (int i = 0; i < COUNT; i++) bufs[k][i] = 10 * k + rank;
        CHECK_RC(MPI_Pready(0, ps[k]));
    }
    int plain = 1000 + rank, plain_in = -1;
    CHECK_RC(MPI_Sendrecv(&plain, 1, MPI_INT, right, 9, &plain_in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(plain_in == 1000 + left, "the plain message: %d", plain_in);
    CHECK_RC(MPI_Waitall(3, ps, MPI_STATUSES_IGNORE));
    CHECK_RC(MPI_Waitall(3, pr, st));
    for (int k = 0; k < 3; k++) {
        CHECK(got[k][0] == 10 * k + left && got[k][COUNT - 1] == 10 * k + left, "pair %d got %d", k, got[k][0]);
        CHECK(st[k].MPI_TAG == 9 && st[k].MPI_SOURCE == left, "pair %d: tag %d source %d", k, st[k].MPI_TAG, st[k].MPI_SOURCE);
        MPI_Request_free(&ps[k]);
        MPI_Request_free(&pr[k]);
    }
    /* No data: MPI_DATATYPE_NULL with a count of 0 is accepted. */
    CHECK_RC(MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, right, 10, NULL, 0, MPI_DATATYPE_NULL, left, 10, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE));
    pass("partitioned");
    MPI_Finalize();
    return 0;
}
