/* Every collective, from every root, checked against values each rank can
 * compute by itself; MPI_IN_PLACE forms; a non-commutative user op whose
 * result exposes any change in combination order; MINLOC/MAXLOC. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

/* 2x2 integer matrix product (mod 2^31): associative, not commutative. */
typedef struct { int a, b, c, d; } mat;
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat r = {(x[i].a * y[i].a + x[i].b * y[i].c) & 0x7fffffff, (x[i].a * y[i].b + x[i].b * y[i].d) & 0x7fffffff,
                 (x[i].c * y[i].a + x[i].d * y[i].c) & 0x7fffffff, (x[i].c * y[i].b + x[i].d * y[i].d) & 0x7fffffff};
        y[i] = r;
    }
}
static mat mat_of(int r) { mat m = {1 + r, 2, r % 3, 1}; return m; }
static mat mat_prod(int from, int to) { /* M_from * ... * M_to */
    mat acc = mat_of(from);
    for (int r = from + 1; r <= to; r++) { mat b = mat_of(r); int one = 1; matmul(&acc, &b, &one, NULL); acc = b; }
    return acc;
}
static int mat_eq(mat x, mat y) { return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));

    for (int root = 0; root < n; root++) {
        /* Bcast, small and large (and non-contiguous). */
        int small[3] = {-1, -1, -1};
        if (rank == root) { small[0] = root; small[1] = 7; small[2] = -root; }
        CHECK_RC(MPI_Bcast(small, 3, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(small[0] == root && small[1] == 7 && small[2] == -root, "bcast root %d", root);
        int big_n = 300000;
        double *big = malloc(sizeof(double) * big_n);
        for (int i = 0; i < big_n; i++) big[i] = rank == root ? i * 0.5 + root : -1;
        CHECK_RC(MPI_Bcast(big, big_n, MPI_DOUBLE, root, MPI_COMM_WORLD));
        for (int i = 0; i < big_n; i++) CHECK(big[i] == i * 0.5 + root, "big bcast %d", i);
        free(big);

        /* Reduce: sum of ints, max of doubles, user op (ordered). */
        long v[2] = {rank + 1, (long)rank * rank}, out[2] = {0, 0};
        CHECK_RC(MPI_Reduce(v, out, 2, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank == root) {
            long s1 = 0, s2 = 0;
            for (int r = 0; r < n; r++) { s1 += r + 1; s2 += (long)r * r; }
            CHECK(out[0] == s1 && out[1] == s2, "reduce sum root %d: %ld %ld", root, out[0], out[1]);
        }
        MPI_Datatype mt;
        MPI_Type_contiguous(4, MPI_INT, &mt);
        MPI_Type_commit(&mt);
        MPI_Op op;
        MPI_Op_create(matmul, 0, &op);
        mat mine = mat_of(rank), res;
        CHECK_RC(MPI_Reduce(&mine, &res, 1, mt, op, root, MPI_COMM_WORLD));
        if (rank == root) CHECK(mat_eq(res, mat_prod(0, n - 1)), "ordered reduce root %d", root);
        /* In place at the root. */
        mat inplace = mat_of(rank);
        CHECK_RC(MPI_Reduce(rank == root ? MPI_IN_PLACE : &inplace, &inplace, 1, mt, op, root, MPI_COMM_WORLD));
        if (rank == root) CHECK(mat_eq(inplace, mat_prod(0, n - 1)), "in-place reduce root %d", root);
        MPI_Op_free(&op);
        MPI_Type_free(&mt);

        /* Gather / Scatter, small and large blocks. */
        for (int blk = 1; blk <= 20000; blk *= 20000) {
            int *mineb = malloc(sizeof(int) * blk), *all = malloc(sizeof(int) * blk * n);
            for (int i = 0; i < blk; i++) mineb[i] = rank * 100000 + i;
            CHECK_RC(MPI_Gather(mineb, blk, MPI_INT, all, blk, MPI_INT, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int r = 0; r < n; r++)
                    for (int i = 0; i < blk; i++) CHECK(all[r * blk + i] == r * 100000 + i, "gather root %d blk %d", root, blk);
            if (rank == root)
                for (int i = 0; i < blk * n; i++) all[i] = -i;
            memset(mineb, 0, sizeof(int) * blk);
            CHECK_RC(MPI_Scatter(all, blk, MPI_INT, mineb, blk, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < blk; i++) CHECK(mineb[i] == -(rank * blk + i), "scatter root %d blk %d", root, blk);
            /* In-place forms at the root. */
            if (rank == root) for (int i = 0; i < blk; i++) all[root * blk + i] = 5 + i;
            for (int i = 0; i < blk; i++) mineb[i] = 5 + i;
            CHECK_RC(MPI_Gather(rank == root ? MPI_IN_PLACE : mineb, blk, MPI_INT, all, blk, MPI_INT, root, MPI_COMM_WORLD));
            if (rank == root) for (int r = 0; r < n; r++) CHECK(all[r * blk] == 5, "in-place gather");
            CHECK_RC(MPI_Scatter(all, blk, MPI_INT, rank == root ? MPI_IN_PLACE : mineb, blk, MPI_INT, root, MPI_COMM_WORLD));
            CHECK(mineb[0] == 5, "in-place scatter");
            free(mineb);
            free(all);
        }

        /* Gatherv / Scatterv with uneven counts and gaps. */
        int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n), total = 0;
        for (int r = 0; r < n; r++) { counts[r] = r % 3 + 1; displs[r] = total + 1; total += counts[r] + 1; }
        int *vbuf = malloc(sizeof(int) * (total + 1)), mine_v[3];
        for (int i = 0; i < counts[rank]; i++) mine_v[i] = rank * 10 + i;
        for (int i = 0; i <= total; i++) vbuf[i] = -7;
        CHECK_RC(MPI_Gatherv(mine_v, counts[rank], MPI_INT, vbuf, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < counts[r]; i++) CHECK(vbuf[displs[r] + i] == r * 10 + i, "gatherv");
                CHECK(vbuf[displs[r] - 1] == -7, "gatherv wrote into a gap");
            }
        if (rank == root) for (int r = 0; r < n; r++) for (int i = 0; i < counts[r]; i++) vbuf[displs[r] + i] = r * 3 + i + root;
        memset(mine_v, 0, sizeof mine_v);
        CHECK_RC(MPI_Scatterv(vbuf, counts, displs, MPI_INT, mine_v, counts[rank], MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < counts[rank]; i++) CHECK(mine_v[i] == rank * 3 + i + root, "scatterv");
        free(counts); free(displs); free(vbuf);
    }

    /* Allreduce: every op on ints, doubles; in place; large; MINLOC/MAXLOC. */
    {
        int x = rank + 1, r;
        int ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR};
        for (unsigned k = 0; k < sizeof ops / sizeof *ops; k++) {
            CHECK_RC(MPI_Allreduce(&x, &r, 1, MPI_INT, ops[k], MPI_COMM_WORLD));
            int want = ops[k] == MPI_PROD ? 1 : ops[k] == MPI_MIN ? 1 : ops[k] == MPI_BAND ? -1 : 0;
            if (ops[k] == MPI_LAND) want = 1;
            for (int q = 0; q < n; q++) {
                int y = q + 1;
                if (ops[k] == MPI_SUM) want += y;
                if (ops[k] == MPI_PROD) want *= y;
                if (ops[k] == MPI_MAX) want = y > want ? y : want;
                if (ops[k] == MPI_MIN) want = y < want ? y : want;
                if (ops[k] == MPI_BAND) want &= y;
                if (ops[k] == MPI_BOR) want |= y;
                if (ops[k] == MPI_BXOR) want ^= y;
                if (ops[k] == MPI_LAND) want = want && y;
                if (ops[k] == MPI_LOR) want = want || y;
                if (ops[k] == MPI_LXOR) want = (!want) != (!y);
            }
            CHECK(r == want, "allreduce op %d: %d want %d", ops[k], r, want);
        }
        int m = 100000;
        double *a = malloc(sizeof(double) * m);
        for (int i = 0; i < m; i++) a[i] = rank + i * 0.5;
        CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, a, m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < m; i++) CHECK(a[i] == n * (n - 1) / 2.0 + n * i * 0.5, "large in-place allreduce %d", i);
        free(a);
        struct { double v; int i; } p = {(double)((rank * 7) % n), rank}, lo, hi;
        CHECK_RC(MPI_Allreduce(&p, &lo, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
        CHECK_RC(MPI_Allreduce(&p, &hi, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        CHECK(lo.v == 0 && lo.i == 0, "minloc %g %d", lo.v, lo.i);
        int want_hi = 0;
        for (int q = 0; q < n; q++) if ((q * 7) % n > (want_hi * 7) % n) want_hi = q;
        CHECK(hi.v == (double)((want_hi * 7) % n) && hi.i == want_hi, "maxloc %g %d", hi.v, hi.i);
        /* Ordered user op: every rank gets M_0 * ... * M_{n-1}. */
        MPI_Datatype mt;
        MPI_Type_contiguous(4, MPI_INT, &mt);
        MPI_Type_commit(&mt);
        MPI_Op op;
        MPI_Op_create(matmul, 0, &op);
        mat mine = mat_of(rank), res;
        CHECK_RC(MPI_Allreduce(&mine, &res, 1, mt, op, MPI_COMM_WORLD));
        CHECK(mat_eq(res, mat_prod(0, n - 1)), "ordered allreduce");
        /* Scan / Exscan with the ordered op. */
        CHECK_RC(MPI_Scan(&mine, &res, 1, mt, op, MPI_COMM_WORLD));
        CHECK(mat_eq(res, mat_prod(0, rank)), "ordered scan");
        mat ex = {-1, -1, -1, -1};
        CHECK_RC(MPI_Exscan(&mine, &ex, 1, mt, op, MPI_COMM_WORLD));
        if (rank > 0) CHECK(mat_eq(ex, mat_prod(0, rank - 1)), "ordered exscan");
        else CHECK(ex.a == -1, "exscan touched rank 0's buffer");
        MPI_Op_free(&op);
        MPI_Type_free(&mt);
        int s, e;
        CHECK_RC(MPI_Scan(&x, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(s == (rank + 1) * (rank + 2) / 2, "scan sum");
        e = x;
        CHECK_RC(MPI_Exscan(MPI_IN_PLACE, &e, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (rank > 0) CHECK(e == rank * (rank + 1) / 2, "in-place exscan %d", e);
    }

    /* Allgather(v), Alltoall(v), Reduce_scatter(_block). */
    {
        int *all = malloc(sizeof(int) * 2 * n);
        int mine2[2] = {rank, -rank};
        CHECK_RC(MPI_Allgather(mine2, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0; r < n; r++) CHECK(all[2 * r] == r && all[2 * r + 1] == -r, "allgather");
        for (int i = 0; i < 2 * n; i++) all[i] = i / 2 == rank ? 40 + i : -1;
        CHECK_RC(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0; r < n; r++) CHECK(all[2 * r] == 40 + 2 * r, "in-place allgather");
        free(all);

        int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n), total = 0;
        for (int r = 0; r < n; r++) { counts[r] = (r * 5) % 4; displs[r] = total; total += counts[r]; }
        int *gv = malloc(sizeof(int) * (total + 1)), mine_v[4];
        for (int i = 0; i < counts[rank]; i++) mine_v[i] = rank * 100 + i;
        CHECK_RC(MPI_Allgatherv(mine_v, counts[rank], MPI_INT, gv, counts, displs, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0; r < n; r++) for (int i = 0; i < counts[r]; i++) CHECK(gv[displs[r] + i] == r * 100 + i, "allgatherv");
        free(gv);

        int *sb = malloc(sizeof(int) * n * 3), *rb = malloc(sizeof(int) * n * 3);
        for (int d = 0; d < n; d++) for (int i = 0; i < 3; i++) sb[d * 3 + i] = rank * 1000 + d * 10 + i;
        CHECK_RC(MPI_Alltoall(sb, 3, MPI_INT, rb, 3, MPI_INT, MPI_COMM_WORLD));
        for (int s = 0; s < n; s++) for (int i = 0; i < 3; i++) CHECK(rb[s * 3 + i] == s * 1000 + rank * 10 + i, "alltoall");
        CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, sb, 3, MPI_INT, MPI_COMM_WORLD));
        for (int s = 0; s < n; s++) CHECK(sb[s * 3] == s * 1000 + rank * 10, "in-place alltoall");

        /* Alltoallv: rank s sends s+d+1 ints... capped at 3, to rank d. */
        int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n), *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
        for (int d = 0; d < n; d++) { sc[d] = (rank + d) % 3 + 1; sd[d] = d * 3; rc[d] = (d + rank) % 3 + 1; rd[d] = d * 3; }
        for (int d = 0; d < n; d++) for (int i = 0; i < 3; i++) sb[d * 3 + i] = rank * 1000 + d * 10 + i;
        for (int i = 0; i < 3 * n; i++) rb[i] = -1;
        CHECK_RC(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD));
        for (int s = 0; s < n; s++)
            for (int i = 0; i < 3; i++)
                CHECK(rb[s * 3 + i] == (i < rc[s] ? s * 1000 + rank * 10 + i : -1), "alltoallv from %d [%d]", s, i);

        int *rs_in = malloc(sizeof(int) * n * 2), rs_out[2];
        for (int i = 0; i < 2 * n; i++) rs_in[i] = rank + i;
        CHECK_RC(MPI_Reduce_scatter_block(rs_in, rs_out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < 2; i++) CHECK(rs_out[i] == n * (n - 1) / 2 + n * (2 * rank + i), "reduce_scatter_block");
        int *rcounts = malloc(sizeof(int) * n), tot = 0;
        for (int r = 0; r < n; r++) { rcounts[r] = r % 2 + 1; tot += rcounts[r]; }
        int *rsv_in = malloc(sizeof(int) * tot), rsv_out[2], off = 0;
        for (int i = 0; i < tot; i++) rsv_in[i] = i * (rank + 1);
        for (int r = 0; r < rank; r++) off += rcounts[r];
        CHECK_RC(MPI_Reduce_scatter(rsv_in, rsv_out, rcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < rcounts[rank]; i++) CHECK(rsv_out[i] == (off + i) * n * (n + 1) / 2, "reduce_scatter");
        free(counts); free(displs); free(sb); free(rb); free(sc); free(sd); free(rc); free(rd);
        free(rs_in); free(rcounts); free(rsv_in);
    }
    /* Collectives of no bytes end at once and touch nothing: the other
     * ranks finish theirs and tell rank 0, which only then calls its own
     * (were they to wait for rank 0, this would never end). */
    {
        int z[2] = {42, 43}, w[2] = {44, 45}, told = 0;
        if (rank == 0 && n > 1) CHECK_RC(MPI_Recv(&told, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int root = 0; root < n; root++) {
            CHECK_RC(MPI_Bcast(z, 0, MPI_INT, root, MPI_COMM_WORLD));
            CHECK_RC(MPI_Reduce(z, w, 0, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            CHECK_RC(MPI_Gather(z, 0, MPI_INT, w, 0, MPI_INT, root, MPI_COMM_WORLD));
            CHECK_RC(MPI_Scatter(z, 0, MPI_INT, w, 0, MPI_INT, root, MPI_COMM_WORLD));
        }
        CHECK_RC(MPI_Allreduce(z, w, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK_RC(MPI_Allgather(z, 0, MPI_INT, w, 0, MPI_INT, MPI_COMM_WORLD));
        CHECK_RC(MPI_Alltoall(z, 0, MPI_INT, w, 0, MPI_INT, MPI_COMM_WORLD));
        if (rank == 1) CHECK_RC(MPI_Send(&rank, 1, MPI_INT, 0, 77, MPI_COMM_WORLD));
        CHECK(z[0] == 42 && z[1] == 43 && w[0] == 44 && w[1] == 45, "an empty collective wrote");
        CHECK(rank != 0 || n == 1 || told == 1, "rank 1 told %d", told);
    }
    pass("collectives");
    MPI_Finalize();
    return 0;
}
