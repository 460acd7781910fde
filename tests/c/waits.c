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

    /* A request's error goes to its own communicator's handler: on a
     * duplicate that returns errors, while MPI_COMM_WORLD keeps
     * MPI_ERRORS_ARE_FATAL, a truncated receive is reported by each of
     * the wait and test calls, never fatal. */
    {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        int big[4] = {1, 2, 3, 4}, small[2] = {0, 0};
        MPI_Request rq[3];
        MPI_Status st, sts[3];
        for (int t = 0; t < 3; t++) MPI_Isend(big, 4, MPI_INT, right, 40 + t, dup, &rq[t]);
        CHECK_RC(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
        MPI_Irecv(small, 2, MPI_INT, left, 40, dup, &rq[0]);
        CHECK(MPI_Wait(&rq[0], &st) == MPI_ERR_TRUNCATE && st.MPI_ERROR == MPI_ERR_TRUNCATE,
              "truncation by MPI_Wait");
        MPI_Irecv(small, 2, MPI_INT, left, 41, dup, &rq[0]);
        int flag = 0, rc;
        do rc = MPI_Test(&rq[0], &flag, &st);
        while (!flag && rc == MPI_SUCCESS);
        CHECK(rc == MPI_ERR_TRUNCATE && rq[0] == MPI_REQUEST_NULL, "truncation by MPI_Test");
        int in = 0, one = 7;
        MPI_Irecv(small, 2, MPI_INT, left, 42, dup, &rq[0]);
        MPI_Irecv(&in, 1, MPI_INT, left, 43, dup, &rq[1]);
        rq[2] = MPI_REQUEST_NULL;
        MPI_Send(&one, 1, MPI_INT, right, 43, dup);
        CHECK(MPI_Waitall(3, rq, sts) == MPI_ERR_IN_STATUS, "MPI_Waitall: MPI_ERR_IN_STATUS");
        CHECK(sts[0].MPI_ERROR == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS && in == 7,
              "waitall statuses %d %d, in %d", sts[0].MPI_ERROR, sts[1].MPI_ERROR, in);
        CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "waitall handles");
        MPI_Comm_free(&dup);
    }

    /* A window of small sends, most complete as they are posted: each
     * handle is a request until a wait or test takes it, the messages
     * arrive in order, and a cancel of a send already complete leaves
     * it complete and not cancelled. */
    {
        enum { W = 64 };
        int out[W], in[W];
        MPI_Request s[W], r[W];
        for (int i = 0; i < W; i++) {
            out[i] = rank * 1000 + i;
            in[i] = -1;
            MPI_Irecv(&in[i], 1, MPI_INT, left, 50, MPI_COMM_WORLD, &r[i]);
        }
        for (int i = 0; i < W; i++) MPI_Isend(&out[i], 1, MPI_INT, right, 50, MPI_COMM_WORLD, &s[i]);
        for (int i = 0; i < W; i++) CHECK(s[i] != MPI_REQUEST_NULL, "send handle %d", i);
        int flag = 0;
        MPI_Status st;
        CHECK_RC(MPI_Request_get_status(s[0], &flag, &st));
        CHECK_RC(MPI_Cancel(&s[0]));
        CHECK_RC(MPI_Wait(&s[0], &st));
        int c = 1;
        MPI_Test_cancelled(&st, &c);
        CHECK(!c && s[0] == MPI_REQUEST_NULL, "a complete send cancelled");
        CHECK_RC(MPI_Waitall(W, s, MPI_STATUSES_IGNORE));
        CHECK_RC(MPI_Waitall(W, r, MPI_STATUSES_IGNORE));
        for (int i = 0; i < W; i++) {
            CHECK(s[i] == MPI_REQUEST_NULL && r[i] == MPI_REQUEST_NULL, "handles %d", i);
            CHECK(in[i] == left * 1000 + i, "message %d: %d", i, in[i]);
        }
    }

    /* One MPI_Waitall over receives of any tag and length, a persistent
     * receive and null handles (all ending without an error: the quick
     * path): each status says its message's source, tag and count, a
     * null handle's is empty, one-shot handles become null and the
     * persistent one stays, ready to start again. */
    {
        enum { N = 6 };
        int out[N][N], in[N][N], pin = -1, pout = rank + 500;
        MPI_Request rq[N + 2], p;
        MPI_Status sts[N + 2];
        rq[0] = MPI_REQUEST_NULL;
        for (int i = 0; i < N; i++) {
            for (int k = 0; k < N; k++) out[i][k] = rank * 100 + i * 10 + k;
            MPI_Irecv(in[i], N, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i + 1]);
        }
        MPI_Recv_init(&pin, 1, MPI_INT, left, 61, MPI_COMM_WORLD, &p);
        MPI_Start(&p);
        rq[N + 1] = p;
        for (int i = 0; i < N; i++) MPI_Send(out[i], i + 1, MPI_INT, right, 70 + i, MPI_COMM_WORLD);
        MPI_Send(&pout, 1, MPI_INT, right, 61, MPI_COMM_WORLD);
        CHECK_RC(MPI_Waitall(N + 2, rq, sts));
        CHECK(sts[0].MPI_SOURCE == MPI_ANY_SOURCE && sts[0].MPI_TAG == MPI_ANY_TAG, "null handle's status");
        for (int i = 0; i < N; i++) {
            int count = -1;
            MPI_Get_count(&sts[i + 1], MPI_INT, &count);
            CHECK(sts[i + 1].MPI_SOURCE == left && sts[i + 1].MPI_TAG == 70 + i && count == i + 1,
                  "status %d: source %d tag %d count %d", i, sts[i + 1].MPI_SOURCE, sts[i + 1].MPI_TAG, count);
            CHECK(rq[i + 1] == MPI_REQUEST_NULL && in[i][i] == left * 100 + i * 10 + i, "receive %d", i);
        }
        CHECK(rq[N + 1] == p && pin == left + 500 && sts[N + 1].MPI_TAG == 61, "persistent receive");
        MPI_Start(&p);
        MPI_Send(&pout, 1, MPI_INT, right, 61, MPI_COMM_WORLD);
        CHECK_RC(MPI_Wait(&p, MPI_STATUS_IGNORE));
        MPI_Request_free(&p);
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
