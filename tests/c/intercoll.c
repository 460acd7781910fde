/* Collectives on an inter-communicator (the even ranks and the odd ranks
 * of MPI_COMM_WORLD): barrier, bcast and reduce with MPI_ROOT /
 * MPI_PROC_NULL, gather, scatter, allgather, allreduce, alltoall and
 * reduce-scatter, each value checked against what the other group sent;
 * also as non-blocking collectives. Needs 2 ranks or more. */
#include "check.h"
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 2) {
        pass("intercoll");
        MPI_Finalize();
        return 0;
    }
    int side = rank % 2;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, side, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - side, 3, &inter);
    int me, mine_n, theirs_n;
    MPI_Comm_rank(inter, &me);
    MPI_Comm_size(inter, &mine_n);
    MPI_Comm_remote_size(inter, &theirs_n);
    /* World rank of remote rank r: the other side's r-th member. */
#define REMOTE(r) (2 * (r) + (1 - side))

    CHECK_RC(MPI_Barrier(inter));

    /* Bcast from the evens' rank 0 to the odds. */
    int v = -1;
    if (side == 0) {
        if (me == 0) v = 77;
        CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        CHECK(v == (me == 0 ? 77 : -1), "bcast root side %d", v);
    } else {
        CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, 0, inter));
        CHECK(v == 77, "bcast received %d", v);
    }

    /* Reduce: the sum of the odds' world ranks lands at the evens' 0. */
    int odd_sum = 0, even_sum = 0;
    for (int r = 0; r < n; r++) *(r % 2 ? &odd_sum : &even_sum) += r;
    int red = -1;
    if (side == 0) {
        /* MPI_PROC_NULL's members ignore the other arguments: mpi4py
         * passes MPI_DATATYPE_NULL there (it returned MPI_ERR_OP, and the
         * next collective hung). */
        if (me == 0)
            CHECK_RC(MPI_Reduce(NULL, &red, 1, MPI_INT, MPI_SUM, MPI_ROOT, inter));
        else
            CHECK_RC(MPI_Reduce(NULL, NULL, 0, MPI_DATATYPE_NULL, MPI_SUM, MPI_PROC_NULL, inter));
        if (me == 0) CHECK(red == odd_sum, "reduce at the root %d want %d", red, odd_sum);
    } else {
        CHECK_RC(MPI_Reduce(&rank, NULL, 1, MPI_INT, MPI_SUM, 0, inter));
    }

    /* Allreduce: each side gets the other side's sum. */
    CHECK_RC(MPI_Allreduce(&rank, &red, 1, MPI_INT, MPI_SUM, inter));
    CHECK(red == (side ? even_sum : odd_sum), "allreduce %d", red);

    /* Allgather: each side gets the other side's world ranks in order. */
    int *all = malloc(sizeof(int) * theirs_n);
    CHECK_RC(MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, inter));
    for (int r = 0; r < theirs_n; r++) CHECK(all[r] == REMOTE(r), "allgather[%d] %d", r, all[r]);

    /* Gather at the odds' rank 0 of the evens' ranks; scatter back. */
    if (side == 1) {
        int *g = me == 0 ? malloc(sizeof(int) * theirs_n) : NULL;
        CHECK_RC(MPI_Gather(NULL, 0, MPI_INT, g, 1, MPI_INT, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        if (me == 0) {
            for (int r = 0; r < theirs_n; r++) {
                CHECK(g[r] == REMOTE(r), "gather[%d] %d", r, g[r]);
                g[r] = 1000 + r;
            }
        }
        CHECK_RC(MPI_Scatter(g, 1, MPI_INT, NULL, 0, MPI_INT, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        free(g);
    } else {
        CHECK_RC(MPI_Gather(&rank, 1, MPI_INT, NULL, 0, MPI_INT, 0, inter));
        int s = -1;
        CHECK_RC(MPI_Scatter(NULL, 0, MPI_INT, &s, 1, MPI_INT, 0, inter));
        CHECK(s == 1000 + me, "scatter %d", s);
    }

    /* Alltoall: to remote rank r, 100 * my world rank + r. */
    int *out = malloc(sizeof(int) * theirs_n), *in = malloc(sizeof(int) * theirs_n);
    for (int r = 0; r < theirs_n; r++) out[r] = 100 * rank + r;
    CHECK_RC(MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, inter));
    for (int r = 0; r < theirs_n; r++) CHECK(in[r] == 100 * REMOTE(r) + me, "alltoall from %d: %d", r, in[r]);

    /* Reduce_scatter_block: each gets one element of the other side's sum
     * of vectors (element k of rank x's vector is x + k). */
    int *vec = malloc(sizeof(int) * mine_n);
    for (int k = 0; k < mine_n; k++) vec[k] = rank + k;
    int rs = -1;
    /* Both sides scatter mine_n... the sums of the counts must agree, so use
     * blocks of one on the smaller side's size only when equal. */
    if (mine_n == theirs_n) {
        CHECK_RC(MPI_Reduce_scatter_block(vec, &rs, 1, MPI_INT, MPI_SUM, inter));
        int want = (side ? even_sum : odd_sum) + theirs_n * me;
        CHECK(rs == want, "reduce_scatter_block %d want %d", rs, want);
    }

    /* The same as non-blocking collectives, two in flight. */
    MPI_Request rq[2];
    int v2 = -1;
    CHECK_RC(MPI_Iallreduce(&rank, &red, 1, MPI_INT, MPI_MAX, inter, &rq[0]));
    if (side == 0)
        CHECK_RC(MPI_Ibcast(&v2, 1, MPI_INT, 0, inter, &rq[1]));
    else {
        v2 = 55;
        CHECK_RC(MPI_Ibcast(&v2, 1, MPI_INT, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter, &rq[1]));
    }
    CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    int maxr = side ? (n % 2 ? n - 1 : n - 2) : (n % 2 ? n - 2 : n - 1);
    CHECK(red == maxr, "iallreduce max %d want %d", red, maxr);
    if (side == 0) CHECK(v2 == 55, "ibcast %d", v2);

    free(all); free(out); free(in); free(vec);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    pass("intercoll");
    MPI_Finalize();
    return 0;
}
