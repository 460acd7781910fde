/* Partitioned communication (MPI 4.0) around a ring: each rank sends 8
 * partitions of 16 ints to the right and receives as many from the left,
 * three rounds on the same requests, the partitions marked ready one by
 * one in reverse order, then by ranges, then by a list; the receiver
 * polls MPI_Parrived until a partition is there. Misuse is an error:
 * Pready before MPI_Start, a partition out of range, Parrived of a send. */
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
    pass("partitioned");
    MPI_Finalize();
    return 0;
}
