/* 1000 rounds of persistent requests around a ring (Send_init, Ssend_init,
 * Recv_init, Startall, Waitall), data checked every round, buffers changed
 * between rounds; then Request_free of inactive persistent requests. */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out[16], in[16], out2[3], in2[3];
    MPI_Request rq[4];
    CHECK_RC(MPI_Send_init(out, 16, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[0]));
    CHECK_RC(MPI_Recv_init(in, 16, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[1]));
    CHECK_RC(MPI_Ssend_init(out2, 3, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[2]));
    CHECK_RC(MPI_Recv_init(in2, 3, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[3]));
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < 16; i++) out[i] = rank * 1000.0 + round + i * 0.25;
        for (int i = 0; i < 3; i++) out2[i] = -round - i - rank;
        CHECK_RC(MPI_Startall(4, rq));
        MPI_Status st[4];
        CHECK_RC(MPI_Waitall(4, rq, st));
        for (int k = 0; k < 4; k++) CHECK(rq[k] != MPI_REQUEST_NULL, "persistent request freed by Waitall");
        CHECK(st[1].MPI_SOURCE == left && st[1].MPI_TAG == 1, "status round %d", round);
        for (int i = 0; i < 16; i++) CHECK(in[i] == left * 1000.0 + round + i * 0.25, "round %d in[%d]=%g", round, i, in[i]);
        for (int i = 0; i < 3; i++) CHECK(in2[i] == -round - i - left, "round %d in2", round);
    }
    /* Starting an active request is an error; waiting on an inactive one is a no-op. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Start(&rq[1]);
    CHECK(MPI_Start(&rq[1]) == MPI_ERR_REQUEST, "second start of an active request");
    MPI_Start(&rq[0]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Status st;
    CHECK_RC(MPI_Wait(&rq[0], &st));
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG, "empty status for inactive request");
    for (int k = 0; k < 4; k++) {
        CHECK_RC(MPI_Request_free(&rq[k]));
        CHECK(rq[k] == MPI_REQUEST_NULL, "freed handle");
    }
    pass("persistent");
    MPI_Finalize();
    return 0;
}
