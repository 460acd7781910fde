/* Non-blocking and persistent collectives whose count, displacement and
 * datatype arrays the program frees (here: scribbles over, then frees)
 * right after the call returns, as mpi4py's large-count fallbacks do.
 * Open MPI and MPICH read those arrays at the call; so must we (mpi4py's
 * test_cco_pr_vec crashed the worker thread reading freed arrays).
 * Also: in-place all-to-all-v/w, zero counts, and vector collectives on
 * MPI_COMM_SELF. */
#include "check.h"
#include <string.h>
#include <unistd.h>

static int *ints(int n, int v) {
    int *a = malloc(sizeof(int) * (n ? n : 1));
    for (int i = 0; i < n; i++) a[i] = v;
    return a;
}

/* Overwrites an array with nonsense, then frees it. */
static void scribble(int *a, int n) {
    for (int i = 0; i < n; i++) a[i] = -7777;
    free(a);
}

/* Alltoallv: each rank sends `k` ints to every rank (k = 1 + its rank). */
static void alltoallv(MPI_Comm comm, int persistent) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *sc = ints(n, rank + 1), *sd = ints(n, 0), *rc = ints(n, 0), *rd = ints(n, 0);
    int stot = 0, rtot = 0;
    for (int r = 0; r < n; r++) {
        sd[r] = stot;
        stot += sc[r];
        rc[r] = r + 1;
        rd[r] = rtot;
        rtot += rc[r];
    }
    int *sbuf = ints(stot, 0), *rbuf = ints(rtot, -1);
    for (int r = 0, i = 0; r < n; r++)
        for (int j = 0; j < sc[r]; j++) sbuf[i++] = 1000 * rank + r;
    MPI_Request rq;
    if (persistent)
        CHECK_RC(MPI_Alltoallv_init(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, comm, MPI_INFO_NULL, &rq));
    else
        CHECK_RC(MPI_Ialltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, comm, &rq));
    scribble(sc, n);
    scribble(sd, n);
    scribble(rc, n);
    scribble(rd, n);
    for (int round = 0; round < (persistent ? 2 : 1); round++) {
        if (persistent) CHECK_RC(MPI_Start(&rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        for (int r = 0, i = 0; r < n; r++)
            for (int j = 0; j <= r; j++, i++)
                CHECK(rbuf[i] == 1000 * r + rank, "alltoallv (persistent %d) from %d: %d", persistent, r, rbuf[i]);
    }
    if (persistent) MPI_Request_free(&rq);
    free(sbuf);
    free(rbuf);
}

/* In place: block r of the buffer goes to rank r and is replaced by rank
 * r's block for us; `k` ints per block, some ranks with k = 0. */
static void alltoallv_in_place(MPI_Comm comm, int k) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *c = ints(n, k), *d = ints(n, 0);
    for (int r = 0; r < n; r++) d[r] = r * (k + 1);
    int *buf = ints(n * (k + 1), -1);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++) buf[r * (k + 1) + j] = rank;
    MPI_Request rq;
    CHECK_RC(MPI_Alltoallv_init(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, buf, c, d, MPI_INT, comm, MPI_INFO_NULL, &rq));
    scribble(c, n);
    scribble(d, n);
    CHECK_RC(MPI_Start(&rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    MPI_Request_free(&rq);
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < k; j++) CHECK(buf[r * (k + 1) + j] == r, "in place, block %d: %d", r, buf[r * (k + 1) + j]);
        CHECK(buf[r * (k + 1) + k] == -1, "in place wrote past block %d", r);
    }
    free(buf);
}

/* Alltoallw with its type arrays freed, and Igatherv / Iscatterv whose
 * root-only arrays are freed (and NULL elsewhere). */
static void typed_and_rooted(MPI_Comm comm) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *c = ints(n, 1), *d = ints(n, 0), *t = ints(n, 0);
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * n);
    for (int r = 0; r < n; r++) {
        d[r] = r * (int)sizeof(int);
        ty[r] = MPI_INT;
    }
    int *sbuf = ints(n, rank), *rbuf = ints(n, -1);
    MPI_Request rq;
    CHECK_RC(MPI_Ialltoallw(sbuf, c, d, ty, rbuf, c, d, ty, comm, &rq));
    scribble(c, n);
    scribble(d, n);
    for (int r = 0; r < n; r++) ty[r] = MPI_DATATYPE_NULL;
    free(ty);
    free(t);
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int r = 0; r < n; r++) CHECK(rbuf[r] == r, "alltoallw from %d: %d", r, rbuf[r]);

    int root = n - 1;
    int *gc = rank == root ? ints(n, 1) : NULL, *gd = rank == root ? ints(n, 0) : NULL;
    if (rank == root)
        for (int r = 0; r < n; r++) gd[r] = n - 1 - r; /* reversed */
    int mine = 10 * rank;
    for (int r = 0; r < n; r++) rbuf[r] = -1;
    CHECK_RC(MPI_Igatherv(&mine, 1, MPI_INT, rbuf, gc, gd, MPI_INT, root, comm, &rq));
    if (rank == root) {
        scribble(gc, n);
        scribble(gd, n);
    }
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    if (rank == root)
        for (int r = 0; r < n; r++) CHECK(rbuf[n - 1 - r] == 10 * r, "igatherv from %d: %d", r, rbuf[n - 1 - r]);

    int *scc = rank == root ? ints(n, 1) : NULL, *sdd = rank == root ? ints(n, 0) : NULL;
    if (rank == root)
        for (int r = 0; r < n; r++) {
            sdd[r] = r;
            sbuf[r] = 7 * r;
        }
    int got = -1;
    CHECK_RC(MPI_Iscatterv(sbuf, scc, sdd, MPI_INT, &got, 1, MPI_INT, root, comm, &rq));
    if (rank == root) {
        scribble(scc, n);
        scribble(sdd, n);
    }
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(got == 7 * rank, "iscatterv: %d", got);
    free(sbuf);
    free(rbuf);
}

/* Reduce_scatter with its counts freed; zero counts allowed. */
static void reduce_scatter(MPI_Comm comm, int zero) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int k = zero ? 0 : 2;
    int *rc = ints(n, k);
    int *sbuf = ints(n * k, rank + 1), rbuf[2] = {-1, -1};
    MPI_Request rq;
    CHECK_RC(MPI_Ireduce_scatter(sbuf, rbuf, rc, MPI_INT, MPI_SUM, comm, &rq));
    scribble(rc, n);
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < k; j++) CHECK(rbuf[j] == n * (n + 1) / 2, "ireduce_scatter: %d", rbuf[j]);
    if (zero) CHECK(rbuf[0] == -1, "a zero-count ireduce_scatter wrote");
    free(sbuf);
}

/* Allgatherv on MPI_COMM_SELF, non-blocking, with a displacement. */
static void self_allgatherv(void) {
    int c = 2, d = 1, s[2] = {4, 5}, r[3] = {-1, -1, -1};
    MPI_Request rq;
    CHECK_RC(MPI_Iallgatherv(s, 2, MPI_INT, r, &c, &d, MPI_INT, MPI_COMM_SELF, &rq));
    c = d = -7777;
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(r[0] == -1 && r[1] == 4 && r[2] == 5, "self iallgatherv: %d %d %d", r[0], r[1], r[2]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Keep the worker busy in an Ibarrier that rank 0 joins late, so the
     * collectives after it run after their arrays were scribbled over. */
    MPI_Request late;
    if (rank == 0) usleep(100000);
    CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &late));
    alltoallv(MPI_COMM_WORLD, 0);
    CHECK_RC(MPI_Wait(&late, MPI_STATUS_IGNORE));
    pass("ialltoallv with its arrays freed");
    alltoallv(MPI_COMM_WORLD, 1);
    alltoallv(MPI_COMM_SELF, 1);
    pass("alltoallv_init with its arrays freed");
    for (int k = 0; k < 3; k++) alltoallv_in_place(MPI_COMM_WORLD, k);
    alltoallv_in_place(MPI_COMM_SELF, 1);
    pass("in-place alltoallv_init");
    typed_and_rooted(MPI_COMM_WORLD);
    pass("ialltoallw, igatherv, iscatterv with their arrays freed");
    reduce_scatter(MPI_COMM_WORLD, 0);
    reduce_scatter(MPI_COMM_WORLD, 1);
    pass("ireduce_scatter");
    self_allgatherv();
    pass("iallgatherv on MPI_COMM_SELF");
    pass("nbc_arrays");
    MPI_Finalize();
    return 0;
}
