/* The large-count calls of MPI 4.0 (MPI_*_c): point-to-point and status
 * counts as MPI_Count, datatypes built and queried with them, collectives
 * taking them (and refusing, with MPI_ERR_COUNT, a count they cannot
 * take rather than cutting it). */
#include "check.h"
#include <limits.h>
#include <stdlib.h>

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

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Bcast_c(&v, (MPI_Count)1 << 31, MPI_BYTE, 0, MPI_COMM_WORLD), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "a collective count past int: class %d", cls);
    free(out); free(in); free(counts); free(displs);
    pass("large_count");
    MPI_Finalize();
    return 0;
}
