/* The large-count calls of MPI 4.0 (MPI_*_c): point-to-point and status
 * counts as MPI_Count, datatypes built and queried with them, collectives
 * taking them (and refusing, with MPI_ERR_COUNT, a count they cannot
 * take rather than cutting it); the v-collectives with MPI_Count arrays,
 * blocking, non-blocking and persistent; pack with an MPI_Count position;
 * one-sided and file calls; a large-count user reduction. */
#include "check.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int calls_c;

/* A user reduction of the MPI_Count form: sums ints. */
static void sum_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    (void)dt;
    calls_c++;
    for (MPI_Count i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Gatherv, Allgatherv, Scatterv, Alltoallw, Reduce_scatter with MPI_Count
 * counts and MPI_Aint displacements; rank r contributes r + 1 ints. */
static void v_collectives(int rank, int n)
{
    MPI_Count *counts = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *displs = malloc(sizeof(MPI_Aint) * n);
    MPI_Count total = 0;
    for (int r = 0; r < n; r++) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 1;
    }
    int *mine = malloc(sizeof(int) * (rank + 1)), *all = malloc(sizeof(int) * total);
    for (int i = 0; i <= rank; i++) mine[i] = 1000 * rank + i;
    memset(all, 0xff, sizeof(int) * total);
    CHECK_RC(MPI_Gatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 0; r < n; r++)
            for (int i = 0; i <= r; i++) CHECK(all[displs[r] + i] == 1000 * r + i, "gatherv_c [%d][%d]", r, i);
    memset(all, 0xff, sizeof(int) * total);
    MPI_Request rq;
    CHECK_RC(MPI_Iallgatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int r = 0; r < n; r++)
        for (int i = 0; i <= r; i++) CHECK(all[displs[r] + i] == 1000 * r + i, "iallgatherv_c [%d][%d]", r, i);
    /* Persistent, started twice; the arrays are the call's (copied). */
    MPI_Count *pc = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *pd = malloc(sizeof(MPI_Aint) * n);
    memcpy(pc, counts, sizeof(MPI_Count) * n);
    memcpy(pd, displs, sizeof(MPI_Aint) * n);
    CHECK_RC(MPI_Allgatherv_init_c(mine, rank + 1, MPI_INT, all, pc, pd, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq));
    memset(pc, 0, sizeof(MPI_Count) * n);
    for (int k = 0; k < 2; k++) {
        memset(all, 0xff, sizeof(int) * total);
        CHECK_RC(MPI_Start(&rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        for (int r = 0; r < n; r++) CHECK(all[displs[r] + r] == 1000 * r + r, "allgatherv_init_c round %d from %d", k, r);
    }
    CHECK_RC(MPI_Request_free(&rq));
    int got[64];
    CHECK_RC(MPI_Scatterv_c(all, counts, displs, MPI_INT, got, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int i = 0; i <= rank; i++) CHECK(got[i] == 1000 * rank + i, "scatterv_c %d", i);
    /* Reduce_scatter: rank r gets the sums of its r + 1 elements. */
    int *ones = malloc(sizeof(int) * total);
    for (MPI_Count i = 0; i < total; i++) ones[i] = (int)i;
    CHECK_RC(MPI_Reduce_scatter_c(ones, got, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i <= rank; i++) CHECK(got[i] == n * (int)(displs[rank] + i), "reduce_scatter_c %d: %d", i, got[i]);
    /* Alltoallw: one int to each rank, byte displacements. */
    MPI_Count *wc = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *wd = malloc(sizeof(MPI_Aint) * n);
    MPI_Datatype *wt = malloc(sizeof(MPI_Datatype) * n);
    int *wout = malloc(sizeof(int) * n), *win = malloc(sizeof(int) * n);
    for (int r = 0; r < n; r++) {
        wc[r] = 1;
        wd[r] = (MPI_Aint)(r * sizeof(int));
        wt[r] = MPI_INT;
        wout[r] = 100 * rank + r;
    }
    CHECK_RC(MPI_Alltoallw_c(wout, wc, wd, wt, win, wc, wd, wt, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++) CHECK(win[r] == 100 * r + rank, "alltoallw_c from %d", r);
    free(counts); free(displs); free(mine); free(all); free(pc); free(pd); free(ones);
    free(wc); free(wd); free(wt); free(wout); free(win);
}

/* Pack and unpack with an MPI_Count position; a user reduction of the
 * MPI_Count form; the large-count envelope; one-sided and file calls. */
static void the_rest(int rank, int n)
{
    char buf[256];
    MPI_Count pos = 0, need;
    int a[3] = {1, 2, 3}, b[3] = {0, 0, 0};
    CHECK_RC(MPI_Pack_size_c(3, MPI_INT, MPI_COMM_WORLD, &need));
    CHECK(need >= 12, "pack_size_c %lld", (long long)need);
    CHECK_RC(MPI_Pack_c(a, 3, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 12, "pack_c position %lld", (long long)pos);
    pos = 0;
    CHECK_RC(MPI_Unpack_c(buf, sizeof buf, &pos, b, 3, MPI_INT, MPI_COMM_WORLD));
    CHECK(pos == 12 && b[2] == 3, "unpack_c %lld %d", (long long)pos, b[2]);

    MPI_Op op;
    CHECK_RC(MPI_Op_create_c(sum_c, 1, &op));
    int x = rank + 1, s = 0;
    CHECK_RC(MPI_Allreduce(&x, &s, 1, MPI_INT, op, MPI_COMM_WORLD));
    CHECK(s == n * (n + 1) / 2 && (n == 1 || calls_c > 0), "op_create_c sum %d, %d calls", s, calls_c);
    CHECK_RC(MPI_Op_free(&op));

    MPI_Datatype idx;
    MPI_Count bl[2] = {2, 1}, dp[2] = {0, 4};
    CHECK_RC(MPI_Type_indexed_c(2, bl, dp, MPI_INT, &idx));
    MPI_Count ni, na, nl, nd;
    int comb;
    CHECK_RC(MPI_Type_get_envelope_c(idx, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_INDEXED && ni == 5 && na == 0 && nl == 0 && nd == 1, "envelope_c %d %lld %lld %lld %lld", comb,
          (long long)ni, (long long)na, (long long)nl, (long long)nd);
    MPI_Type_free(&idx);

    /* Put_c and Get_c between neighbours. */
    int *base;
    MPI_Win w;
    CHECK_RC(MPI_Win_allocate_c(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w));
    base[0] = base[1] = base[2] = base[3] = -1;
    MPI_Win_fence(0, w);
    int right = (rank + 1) % n, val = 70 + rank, back = 0;
    CHECK_RC(MPI_Put_c(&val, 1, MPI_INT, right, 2, 1, MPI_INT, w));
    MPI_Win_fence(0, w);
    CHECK(base[2] == 70 + (rank + n - 1) % n, "put_c: %d", base[2]);
    CHECK_RC(MPI_Get_c(&back, 1, MPI_INT, right, 2, 1, MPI_INT, w));
    MPI_Win_fence(0, w);
    CHECK(back == 70 + rank, "get_c: %d", back);
    MPI_Win_free(&w);

    /* A file written and read back at offsets with MPI_Count counts. */
    MPI_File fh;
    char name[64];
    int tag = 0;
    if (rank == 0) tag = (int)getpid();
    MPI_Bcast(&tag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "/tmp/mpistages-large-count-%d", tag);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    int wr[2] = {rank, -rank}, rd[2] = {0, 0};
    MPI_Status st;
    CHECK_RC(MPI_File_write_at_all_c(fh, (MPI_Offset)(rank * sizeof wr), wr, 2, MPI_INT, &st));
    CHECK_RC(MPI_File_read_at_all_c(fh, (MPI_Offset)(rank * sizeof wr), rd, 2, MPI_INT, &st));
    MPI_Count cnt;
    CHECK_RC(MPI_Get_count_c(&st, MPI_INT, &cnt));
    CHECK(cnt == 2 && rd[0] == rank && rd[1] == -rank, "file _c: %lld %d %d", (long long)cnt, rd[0], rd[1]);
    CHECK_RC(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    MPI_Count cnt = 1000;
    int *out = malloc(sizeof(int) * 1000), *in = malloc(sizeof(int) * 1000);
    for (int i = 0; i < 1000; i++) out[i] = rank * 10000 + i;
    MPI_Request rq;
    MPI_Status st;
    CHECK_RC(MPI_Irecv_c(in, cnt, MPI_INT, left, 1, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Send_c(out, cnt, MPI_INT, right, 1, MPI_COMM_WORLD));
    CHECK_RC(MPI_Wait(&rq, &st));
    MPI_Count got;
    CHECK_RC(MPI_Get_count_c(&st, MPI_INT, &got));
    CHECK(got == 1000 && in[999] == left * 10000 + 999, "send_c/recv_c: %lld, %d", (long long)got, in[999]);

    MPI_Datatype mib, big;
    CHECK_RC(MPI_Type_contiguous_c((MPI_Count)1 << 20, MPI_BYTE, &mib));
    CHECK_RC(MPI_Type_contiguous_c((MPI_Count)1 << 13, mib, &big));
    MPI_Count size, lb, extent;
    MPI_Type_size_c(big, &size);
    MPI_Type_get_extent_c(big, &lb, &extent);
    CHECK(size == (MPI_Count)1 << 33 && lb == 0 && extent == size, "an 8 GiB type: %lld", (long long)size);
    MPI_Type_free(&big);
    MPI_Type_free(&mib);

    /* More than INT_MAX elements: the int envelope describes the type as a
     * struct of a vector of int-sized blocks and the rest (mpi4py's
     * testContiguousBigMPI at MPI 3.1), not with a count cut to an int. */
    MPI_Count many = (MPI_Count)INT_MAX + INT_MAX / 1024;
    CHECK_RC(MPI_Type_contiguous_c(many, MPI_SHORT, &big));
    MPI_Type_size_c(big, &size);
    CHECK(size == 2 * many, "size %lld", (long long)size);
    int ni, na, nt, comb;
    CHECK_RC(MPI_Type_get_envelope(big, &ni, &na, &nt, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nt == 2, "envelope %d %d %d %d", comb, ni, na, nt);
    int is[3];
    MPI_Aint as[2];
    MPI_Datatype ts[2];
    CHECK_RC(MPI_Type_get_contents(big, 3, 2, 2, is, as, ts));
    CHECK(is[0] == 2 && is[1] == 1 && is[2] == 1 && as[0] == 0 && as[1] == (MPI_Aint)2 * INT_MAX, "contents");
    MPI_Count qs, rs;
    MPI_Type_size_c(ts[0], &qs);
    MPI_Type_size_c(ts[1], &rs);
    CHECK(qs == (MPI_Count)2 * INT_MAX && rs == 2 * (many - INT_MAX), "parts %lld %lld", (long long)qs, (long long)rs);
    CHECK_RC(MPI_Type_get_envelope(ts[0], &ni, &na, &nt, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR, "first part %d", comb);
    CHECK_RC(MPI_Type_get_envelope(ts[1], &ni, &na, &nt, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS, "second part %d", comb);
    MPI_Type_free(&ts[0]);
    MPI_Type_free(&ts[1]);
    /* The large-count interface says what it is (mpi4py's test at MPI 4.0). */
    MPI_Count eni, ena, enl, ent;
    CHECK_RC(MPI_Type_get_envelope_c(big, &eni, &ena, &enl, &ent, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && eni == 0 && ena == 0 && enl == 1 && ent == 1, "envelope_c %d %lld %lld %lld %lld",
          comb, eni, ena, enl, ent);
    MPI_Count larges[1];
    CHECK_RC(MPI_Type_get_contents_c(big, 0, 0, 1, 1, is, as, larges, ts));
    CHECK(larges[0] == many && ts[0] == MPI_SHORT, "contents_c: %lld of %d", (long long)larges[0], ts[0]);
    /* A type of int counts: the same through both. */
    MPI_Datatype small;
    CHECK_RC(MPI_Type_vector(3, 2, 4, MPI_INT, &small));
    CHECK_RC(MPI_Type_get_envelope_c(small, &eni, &ena, &enl, &ent, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && eni == 3 && ena == 0 && enl == 0 && ent == 1, "vector envelope_c");
    MPI_Type_free(&small);
    MPI_Type_free(&big);

    int v = rank == 0 ? 5 : 0;
    CHECK_RC(MPI_Bcast_c(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(v == 5, "bcast_c");
    MPI_Count *counts = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *displs = malloc(sizeof(MPI_Aint) * n);
    for (int r = 0; r < n; r++) {
        counts[r] = 2;
        displs[r] = 2 * r;
        out[2 * r] = out[2 * r + 1] = 100 * rank + r;
    }
    CHECK_RC(MPI_Alltoallv_c(out, counts, displs, MPI_INT, in, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++) CHECK(in[2 * r] == 100 * r + rank && in[2 * r + 1] == 100 * r + rank, "alltoallv_c from %d", r);

    v_collectives(rank, n);
    the_rest(rank, n);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Bcast_c(&v, (MPI_Count)1 << 31, MPI_BYTE, 0, MPI_COMM_WORLD), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "a collective count past int: class %d", cls);
    /* The same for a count in an array, and for a scan's count. */
    MPI_Count bigc[64];
    MPI_Aint zd[64];
    for (int r = 0; r < n; r++) {
        bigc[r] = r == n - 1 ? (MPI_Count)1 << 32 : 1;
        zd[r] = 0;
    }
    rc = MPI_Allgatherv_c(&v, 1, MPI_INT, in, bigc, zd, MPI_INT, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "an array count past int: class %d", cls);
    rc = MPI_Scan_c(&v, in, (MPI_Count)1 << 33, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "a scan count past int: class %d", cls);
    free(out); free(in); free(counts); free(displs);
    pass("large_count");
    MPI_Finalize();
    return 0;
}
