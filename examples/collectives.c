/* Collectives beyond the proxies, in the resilient loop of examples/
 * resilient.h: every iteration runs non-blocking collectives together
 * (MPI_Iallreduce on MPI_COMM_WORLD, on a dup of it and on a split of it,
 * made anew by each attempt, and an MPI_Ialltoallv on the dup), a
 * persistent MPI_Allreduce_init started again, and a blocking
 * MPI_Alltoallv whose counts vary by rank and iteration. With K > 0 a
 * checkpoint every K iterations, with 0 none (a failure then rolls back to
 * epoch 0: the reset of the MPI state Reinit always does). A rank killed
 * anywhere must leave a job that prints the failure-free total.
 *
 *   mpiexec -n 4 --recovery stages ./collectives [ITERS] [K] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "resilient.h"

static int rank, size, iters = 30, every = 0;

struct state {
    int iter;
    long sum;
};

static void fail(const char *what, int iter, long got, long want)
{
    fprintf(stderr, "collectives: rank %d, iteration %d: %s %ld, wanted %ld\n", rank, iter, what, got, want);
    MPI_Abort(MPI_COMM_WORLD, 4);
}

/* The all-to-all-v of iteration `it`: rank r sends (r + peer + it) % 3 + 1
 * longs to each peer, each the value 1000 * r + peer. Blocking, `*got` is
 * the sum of what came in, checked value by value; non-blocking, the
 * request is `*rq`, the buffers `bufs` and `*got` the longs coming in.
 * Returns the MPI call's code. */
static int exchange(MPI_Comm comm, int it, MPI_Request *rq, long **bufs, long *got)
{
    int n = size;
    int *sc = malloc(4 * sizeof(int) * n), *sd = sc + n, *rc = sd + n, *rd = rc + n;
    int st = 0, rt = 0;
    for (int p = 0; p < n; p++) {
        sc[p] = (rank + p + it) % 3 + 1;
        rc[p] = (p + rank + it) % 3 + 1;
        sd[p] = st;
        rd[p] = rt;
        st += sc[p];
        rt += rc[p];
    }
    long *out = malloc(sizeof(long) * st), *in = malloc(sizeof(long) * rt);
    for (int p = 0; p < n; p++)
        for (int j = 0; j < sc[p]; j++) out[sd[p] + j] = 1000L * rank + p;
    int code;
    if (rq) {
        /* The arrays go at once: the call has copied them. */
        code = MPI_Ialltoallv(out, sc, sd, MPI_LONG, in, rc, rd, MPI_LONG, comm, rq);
        free(sc);
        bufs[0] = out;
        bufs[1] = in;
        *got = rt;
        return code;
    }
    *got = 0;
    code = MPI_Alltoallv(out, sc, sd, MPI_LONG, in, rc, rd, MPI_LONG, comm);
    if (code == MPI_SUCCESS)
        for (int p = 0; p < n; p++)
            for (int j = 0; j < rc[p]; j++) {
                if (in[rd[p] + j] != 1000L * p + rank) fail("alltoallv", it, in[rd[p] + j], 1000L * p + rank);
                *got += in[rd[p] + j];
            }
    free(sc);
    free(out);
    free(in);
    return code;
}

static int attempt(int epoch, void *ctx)
{
    struct state *s = ctx;
    MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
    MPI_Request pr = MPI_REQUEST_NULL;
    long *bufs[2] = {NULL, NULL};
    int rc;
    s->iter = 0;
    s->sum = 0;
    if ((rc = MPIX_Protect(0, s, sizeof *s, MPI_BYTE))) goto done;
    if (epoch > 0 && (rc = MPIX_Checkpoint_restore())) goto done;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup))) goto done;
    if ((rc = MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half))) goto done;
    int hsize;
    MPI_Comm_size(half, &hsize);
    long pin = 0, pout = 0;
    if ((rc = MPI_Allreduce_init(&pin, &pout, 1, MPI_LONG, MPI_SUM, dup, MPI_INFO_NULL, &pr))) goto done;
    for (; s->iter < iters; s->iter++) {
        int it = s->iter;
        long one = it + 1, w = 0, d = 0, h = 0;
        MPI_Request rq[4];
        if ((rc = MPI_Iallreduce(&one, &w, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &rq[0]))) goto done;
        if ((rc = MPI_Iallreduce(&one, &d, 1, MPI_LONG, MPI_SUM, dup, &rq[1]))) goto done;
        if ((rc = MPI_Iallreduce(&one, &h, 1, MPI_LONG, MPI_SUM, half, &rq[2]))) goto done;
        long incoming = 0;
        if ((rc = exchange(dup, it, &rq[3], bufs, &incoming))) goto done;
        if ((rc = MPI_Waitall(4, rq, MPI_STATUSES_IGNORE))) goto done;
        long in_sum = 0;
        for (long j = 0; j < incoming; j++) in_sum += bufs[1][j];
        free(bufs[0]);
        free(bufs[1]);
        bufs[0] = bufs[1] = NULL;
        pin = rank + it;
        if ((rc = MPI_Start(&pr))) goto done;
        if ((rc = MPI_Wait(&pr, MPI_STATUS_IGNORE))) goto done;
        long blocking = 0;
        if ((rc = exchange(MPI_COMM_WORLD, it + 1, NULL, NULL, &blocking))) goto done;
        long want = (long)size * (it + 1);
        if (w != want) fail("iallreduce on MPI_COMM_WORLD", it, w, want);
        if (d != want) fail("iallreduce on a dup", it, d, want);
        if (h != (long)hsize * (it + 1)) fail("iallreduce on a split", it, h, (long)hsize * (it + 1));
        if (pout != (long)size * (size - 1) / 2 + (long)size * it)
            fail("persistent allreduce", it, pout, (long)size * (size - 1) / 2 + (long)size * it);
        s->sum += w + d + h + in_sum % 1000 + blocking % 1000;
        if (every > 0 && (s->iter + 1) % every == 0) {
            s->iter++;
            rc = MPIX_Checkpoint_write();
            s->iter--;
            if (rc) goto done;
        }
    }
    long total = 0;
    if ((rc = MPI_Allreduce(&s->sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD))) goto done;
    if (rank == 0) printf("collectives: %d ranks, %d iterations, total %ld\n", size, iters, total);
done:
    free(bufs[0]);
    free(bufs[1]);
    if (pr != MPI_REQUEST_NULL) MPI_Request_free(&pr);
    if (dup != MPI_COMM_NULL) MPI_Comm_free(&dup);
    if (half != MPI_COMM_NULL) MPI_Comm_free(&half);
    MPIX_Unprotect(0);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) iters = atoi(argv[1]);
    if (argc > 2) every = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct state s;
    resilient_run("collectives", attempt, &s);
    MPI_Finalize();
    return 0;
}
