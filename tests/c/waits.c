/* The wait/test families, MPI_Cancel of a receive, MPI_Request_free of an
 * active request, MPI_REQUEST_NULL handling. */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Waitany / Waitsome over receives completed in a known order. */
    {
        int in[4] = {0}, out[4] = {10, 11, 12, 13};
        MPI_Request rq[5];
        rq[0] = MPI_REQUEST_NULL;
        for (int i = 0; i < 4; i++) MPI_Irecv(&in[i], 1, MPI_INT, left, 20 + i, MPI_COMM_WORLD, &rq[i + 1]);
        MPI_Send(&out[2], 1, MPI_INT, right, 22, MPI_COMM_WORLD);
        int idx;
        MPI_Status st;
        CHECK_RC(MPI_Waitany(5, rq, &idx, &st));
        CHECK(idx == 3 && in[2] == 12 && st.MPI_TAG == 22, "waitany idx=%d", idx);
        CHECK(rq[3] == MPI_REQUEST_NULL, "waitany resets the handle");
        int flag = 1;
        CHECK_RC(MPI_Testany(5, rq, &idx, &flag, &st));
        CHECK(!flag && idx == MPI_UNDEFINED, "testany with nothing ready");
        MPI_Barrier(MPI_COMM_WORLD); /* every rank checked before more messages go */
        MPI_Send(&out[0], 1, MPI_INT, right, 20, MPI_COMM_WORLD);
        MPI_Send(&out[3], 1, MPI_INT, right, 23, MPI_COMM_WORLD);
        int done = 0, indices[5];
        MPI_Status sts[5];
        while (done < 2) {
            int outcount;
            CHECK_RC(MPI_Waitsome(5, rq, &outcount, indices, sts));
            CHECK(outcount >= 1, "waitsome outcount %d", outcount);
            for (int k = 0; k < outcount; k++) CHECK(indices[k] == 1 || indices[k] == 4, "waitsome index %d", indices[k]);
            done += outcount;
        }
        CHECK(in[0] == 10 && in[3] == 13, "waitsome data");
        int outcount;
        CHECK_RC(MPI_Testsome(5, rq, &outcount, indices, sts));
        CHECK(outcount == 0, "testsome with one pending: %d", outcount);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Send(&out[1], 1, MPI_INT, right, 21, MPI_COMM_WORLD);
        flag = 0;
        while (!flag) CHECK_RC(MPI_Testall(5, rq, &flag, sts));
        CHECK(in[1] == 11, "testall data");
        CHECK_RC(MPI_Waitall(5, rq, MPI_STATUSES_IGNORE));
        CHECK_RC(MPI_Waitany(5, rq, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED, "waitany over null requests");
        CHECK_RC(MPI_Waitsome(5, rq, &outcount, indices, MPI_STATUSES_IGNORE));
        CHECK(outcount == MPI_UNDEFINED, "waitsome over null requests");
    }

    /* Cancel a receive nobody will match. */
    {
        int x;
        MPI_Request rq;
        MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &rq);
        CHECK_RC(MPI_Cancel(&rq));
        MPI_Status st;
        CHECK_RC(MPI_Wait(&rq, &st));
        int c;
        MPI_Test_cancelled(&st, &c);
        CHECK(c, "receive not cancelled");
    }

    /* Request_free on an active send: the message still arrives. */
    {
        int x = rank + 100, y = 0;
        MPI_Request rq;
        MPI_Isend(&x, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &rq);
        CHECK_RC(MPI_Request_free(&rq));
        CHECK(rq == MPI_REQUEST_NULL, "freed handle");
        MPI_Recv(&y, 1, MPI_INT, left, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(y == left + 100, "freed send delivered");
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* Test on MPI_REQUEST_NULL: flag set, empty status. */
    {
        MPI_Request rq = MPI_REQUEST_NULL;
        int flag = 0;
        MPI_Status st;
        CHECK_RC(MPI_Test(&rq, &flag, &st));
        CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE, "test on null request");
    }
    pass("waits");
    MPI_Finalize();
    return 0;
}
