/* Non-blocking and persistent collectives: several in flight at once on
 * one communicator and on two, completed in another order than started,
 * beside a blocking collective and point-to-point traffic; values
 * checked. Also MPI_Isendrecv, MPI_Comm_idup, matched probe and
 * MPI_Alltoallw. */
#include "check.h"
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm other;
    MPI_Request idup;
    CHECK_RC(MPI_Comm_idup(MPI_COMM_WORLD, &other, &idup));
    CHECK_RC(MPI_Wait(&idup, MPI_STATUS_IGNORE));

    /* Five collectives in flight, waited for in reverse. */
    int bval = rank == 0 ? 42 : -1, sum = -1, mx = -1, scan = -1;
    int *all = malloc(sizeof(int) * n);
    MPI_Request rq[5];
    CHECK_RC(MPI_Ibcast(&bval, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[0]));
    CHECK_RC(MPI_Iallreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[1]));
    CHECK_RC(MPI_Iallreduce(&rank, &mx, 1, MPI_INT, MPI_MAX, other, &rq[2]));
    CHECK_RC(MPI_Iallgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &rq[3]));
    CHECK_RC(MPI_Iscan(&rank, &scan, 1, MPI_INT, MPI_SUM, other, &rq[4]));
    /* A blocking collective and a message while they are in flight. */
    int b2 = -1, one = 1;
    MPI_Allreduce(&one, &b2, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(b2 == n, "blocking allreduce beside non-blocking ones: %d", b2);
    for (int i = 4; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
    CHECK(bval == 42 && sum == n * (n - 1) / 2 && mx == n - 1, "ibcast %d iallreduce %d %d", bval, sum, mx);
    CHECK(scan == rank * (rank + 1) / 2, "iscan %d", scan);
    for (int i = 0; i < n; i++) CHECK(all[i] == i, "iallgather[%d] %d", i, all[i]);

    /* Ibarrier: nobody passes it before everyone started it. */
    MPI_Request b;
    CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &b));
    int flag = 0;
    while (!flag) MPI_Test(&b, &flag, MPI_STATUS_IGNORE);

    /* A persistent allreduce, started three times. */
    int in = 0, out = -1;
    MPI_Request p;
    CHECK_RC(MPI_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p));
    for (int round = 1; round <= 3; round++) {
        in = round * (rank + 1);
        CHECK_RC(MPI_Start(&p));
        CHECK_RC(MPI_Wait(&p, MPI_STATUS_IGNORE));
        CHECK(out == round * n * (n + 1) / 2, "persistent allreduce round %d: %d", round, out);
    }
    MPI_Request_free(&p);

    /* Isendrecv around a ring, and the replace variant back. */
    int right = (rank + 1) % n, left = (rank + n - 1) % n, got = -1;
    MPI_Request sr;
    MPI_Status st;
    CHECK_RC(MPI_Isendrecv(&rank, 1, MPI_INT, right, 9, &got, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &sr));
    CHECK_RC(MPI_Wait(&sr, &st));
    CHECK(got == left && st.MPI_SOURCE == left && st.MPI_TAG == 9, "isendrecv %d from %d", got, st.MPI_SOURCE);
    CHECK_RC(MPI_Isendrecv_replace(&got, 1, MPI_INT, left, 10, right, 10, MPI_COMM_WORLD, &sr));
    CHECK_RC(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    CHECK(got == rank, "isendrecv_replace %d", got);

    /* Matched probe: the message probed is the one received, even with a
     * second one of the same envelope behind it. */
    if (n > 1) {
        if (rank == 1) {
            int a = 11, c = 22;
            MPI_Send(&a, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
            MPI_Send(&c, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Message msg;
            int count, v = -1, w = -1;
            CHECK_RC(MPI_Mprobe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &msg, &st));
            MPI_Get_count(&st, MPI_INT, &count);
            CHECK(st.MPI_SOURCE == 1 && count == 1, "mprobe");
            int fl = 0;
            MPI_Message m2;
            while (!fl) MPI_Improbe(1, 3, MPI_COMM_WORLD, &fl, &m2, MPI_STATUS_IGNORE);
            CHECK_RC(MPI_Mrecv(&v, 1, MPI_INT, &msg, MPI_STATUS_IGNORE));
            CHECK(msg == MPI_MESSAGE_NULL, "mrecv resets the handle");
            MPI_Request r2;
            CHECK_RC(MPI_Imrecv(&w, 1, MPI_INT, &m2, &r2));
            MPI_Wait(&r2, MPI_STATUS_IGNORE);
            CHECK(v == 11 && w == 22, "matched probe order %d %d", v, w);
        }
    }

    /* Alltoallw: to rank r, r+1 ints (as ints) at byte offset; a double
     * back from each, different types per peer. */
    int *sc = calloc(n, sizeof(int)), *sd = calloc(n, sizeof(int)), *rc = calloc(n, sizeof(int)), *rd = calloc(n, sizeof(int));
    MPI_Datatype *stp = calloc(n, sizeof(MPI_Datatype)), *rtp = calloc(n, sizeof(MPI_Datatype));
    int *sbuf = calloc(n * n, sizeof(int)), *rbuf = calloc(n * n, sizeof(int));
    for (int r = 0, off = 0; r < n; r++) {
        sc[r] = r + 1;
        sd[r] = off * (int)sizeof(int);
        stp[r] = MPI_INT;
        for (int k = 0; k < r + 1; k++) sbuf[off + k] = 1000 * rank + r;
        off += r + 1;
        rc[r] = rank + 1;
        rd[r] = r * (rank + 1) * (int)sizeof(int);
        rtp[r] = MPI_INT;
    }
    CHECK_RC(MPI_Alltoallw(sbuf, sc, sd, stp, rbuf, rc, rd, rtp, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++)
        for (int k = 0; k < rank + 1; k++)
            CHECK(rbuf[r * (rank + 1) + k] == 1000 * r + rank, "alltoallw from %d", r);

    /* Only with the next rank, through MPI_Ialltoallw: the other peers
     * get a count of 0 and MPI_DATATYPE_NULL, which MPICH (and the
     * Advanced MPI tutorial's stencils) take. */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n, wout = 7 * rank + 1, win = -1;
    for (int r = 0; r < n; r++) {
        sc[r] = rc[r] = 0;
        sd[r] = rd[r] = 0;
        stp[r] = rtp[r] = MPI_DATATYPE_NULL;
    }
    sc[next] = 1; stp[next] = MPI_INT;
    rc[prev] = 1; rtp[prev] = MPI_INT;
    MPI_Request wreq;
    CHECK_RC(MPI_Ialltoallw(&wout, sc, sd, stp, &win, rc, rd, rtp, MPI_COMM_WORLD, &wreq));
    CHECK_RC(MPI_Wait(&wreq, MPI_STATUS_IGNORE));
    CHECK(win == 7 * prev + 1, "ialltoallw with empty blocks: %d from %d", win, prev);

    free(all); free(sc); free(sd); free(rc); free(rd); free(stp); free(rtp); free(sbuf); free(rbuf);
    MPI_Comm_free(&other);
    pass("nonblocking_coll");
    MPI_Finalize();
    return 0;
}
