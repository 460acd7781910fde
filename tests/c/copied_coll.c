/* Large collectives of ranks on one host copy straight from each other's
 * memory (64 KiB and more: allreduce, reduce, bcast, allgather(v); large
 * alltoalls go by messages, checked here too): their results must be
 * MPI's whatever the path. A
 * non-commutative operation is applied in rank order with a count the
 * ranks do not divide; MPI_IN_PLACE everywhere it is allowed; every root;
 * a strided type on odd ranks (packed on the way); buffers reused at once
 * after each call (a rank that returned early would change what another
 * still copies); a split communicator. The harness runs it again with
 * MPISTAGES_CMA_COLL=0, which sends the same calls by messages. */
#include "check.h"
#include <string.h>

#define P 1000000007LL

typedef struct { long long a, b; } affine;

static void compose(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    affine *f = in, *g = inout;
    for (int i = 0; i < *len; i++) {
        affine h = {f[i].a * g[i].a % P, (f[i].a * g[i].b + f[i].b) % P};
        g[i] = h;
    }
}

static affine part(int rank, int i) { return (affine){rank + 2 + i % 1000, 7 * rank + 3 + i % 13}; }

static affine folded(int size, int i) {
    affine want = {1, 0};
    for (int r = size - 1; r >= 0; r--) {
        affine f = part(r, i);
        compose(&f, &want, &(int){1}, NULL);
    }
    return want;
}

static void reductions(MPI_Comm comm, MPI_Datatype affine_t, MPI_Op op) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int count = 12289; /* ~192 KiB of 16-byte elements, not a multiple of 2..8 */
    affine *mine = malloc(count * sizeof(affine)), *got = malloc((count + 1) * sizeof(affine));
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < count; i++) got[i] = mine[i] = part(rank, i);
        got[count] = (affine){-5, -5};
        CHECK_RC(MPI_Allreduce(in_place ? MPI_IN_PLACE : mine, got, count, affine_t, op, comm));
        for (int i = 0; i < count; i++) mine[i] = (affine){-1, -1}; /* reused at once */
        for (int i = 0; i < count; i++) {
            affine w = folded(size, i);
            CHECK(got[i].a == w.a && got[i].b == w.b, "allreduce in_place %d: [%d] = (%lld, %lld), want (%lld, %lld)",
                  in_place, i, got[i].a, got[i].b, w.a, w.b);
        }
        CHECK(got[count].a == -5, "allreduce wrote past the end");
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < count; i++) got[i] = mine[i] = part(rank, i);
            int here = in_place && rank == root;
            CHECK_RC(MPI_Reduce(here ? MPI_IN_PLACE : mine, got, count, affine_t, op, root, comm));
            for (int i = 0; i < count; i++) mine[i] = (affine){-1, -1}; /* reused at once */
            if (rank != root) {
                for (int i = 0; i < count; i++) got[i] = (affine){-2, -2};
                continue;
            }
            for (int i = 0; i < count; i++) {
                affine w = folded(size, i);
                CHECK(got[i].a == w.a && got[i].b == w.b, "reduce to %d in_place %d: [%d] = (%lld, %lld)", root, in_place,
                      i, got[i].a, got[i].b);
            }
        }
    }
    /* Sums of doubles, exact whatever the order, in place. */
    int n = 1 << 15;
    double *d = malloc(n * sizeof(double));
    for (int i = 0; i < n; i++) d[i] = rank * 1000.0 + i;
    CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < n; i++) {
        double want = 1000.0 * size * (size - 1) / 2 + (double)size * i;
        CHECK(d[i] == want, "sum [%d] = %g, want %g", i, d[i], want);
    }
    free(d);
    free(mine);
    free(got);
}

static void broadcasts(MPI_Comm comm) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int lens[] = {65536, 100003, 1 << 20};
    char *buf = malloc((1 << 20) + 1);
    for (int it = 0; it < 3 * size; it++) {
        int root = it % size, len = lens[it % 3];
        for (int i = 0; i < len; i++) buf[i] = rank == root ? (char)(i * 7 + it) : 0;
        buf[len] = 'z';
        CHECK_RC(MPI_Bcast(buf, len, MPI_CHAR, root, comm));
        for (int i = 0; i < len; i++)
            CHECK(buf[i] == (char)(i * 7 + it), "bcast %d of %d from %d: byte %d is %d", it, len, root, i, buf[i]);
        CHECK(buf[len] == 'z', "bcast wrote past the end");
        memset(buf, 0, len); /* reused at once, the root's too */
    }
    free(buf);
}

static void gathers(MPI_Comm comm) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int k = 20000; /* 80 KiB of ints per rank */
    int *mine = malloc((k + size * 1001) * sizeof(int)), *all = malloc(size * k * sizeof(int));
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < size * k; i++) all[i] = -1;
        for (int i = 0; i < k; i++) mine[i] = all[rank * k + i] = rank * 100000 + i;
        CHECK_RC(MPI_Allgather(in_place ? MPI_IN_PLACE : mine, k, MPI_INT, all, k, MPI_INT, comm));
        memset(mine, 0, k * sizeof(int));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < k; i++)
                CHECK(all[r * k + i] == r * 100000 + i, "allgather in_place %d: [%d][%d] = %d", in_place, r, i,
                      all[r * k + i]);
    }
    /* Blocks of different lengths, with gaps, one of them empty. */
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int)), at = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r == 1 ? 0 : k + r * 1001;
        displs[r] = at;
        at += counts[r] + 3;
    }
    int *v = malloc(at * sizeof(int));
    for (int i = 0; i < at; i++) v[i] = -7;
    for (int i = 0; i < counts[rank]; i++) mine[i] = rank * 100000 + i;
    CHECK_RC(MPI_Allgatherv(mine, counts[rank], MPI_INT, v, counts, displs, MPI_INT, comm));
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < counts[r]; i++)
            CHECK(v[displs[r] + i] == r * 100000 + i, "allgatherv [%d][%d] = %d", r, i, v[displs[r] + i]);
        for (int i = counts[r]; i < counts[r] + 3; i++) CHECK(v[displs[r] + i] == -7, "allgatherv wrote a gap");
    }
    free(v);
    free(counts);
    free(displs);
    free(mine);
    free(all);
}

static void alltoalls(MPI_Comm comm) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int k = 17000; /* ints per block: 68 KiB */
    int *s = malloc(size * k * sizeof(int)), *r = malloc(size * k * sizeof(int));
    /* Odd ranks receive through a strided type (every other int of a
     * twice-as-long buffer): packed on the way, the same bytes. */
    MPI_Datatype every_other;
    MPI_Type_vector(k, 1, 2, MPI_INT, &every_other);
    MPI_Type_create_resized(every_other, 0, 2 * k * sizeof(int), &every_other);
    MPI_Type_commit(&every_other);
    int *wide = malloc(2 * size * k * sizeof(int));
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int j = 0; j < size; j++)
            for (int i = 0; i < k; i++) s[j * k + i] = r[j * k + i] = rank * 1000000 + j * 100000 + i % 99991;
        if (in_place) {
            CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_INT, r, k, MPI_INT, comm));
        } else if (rank % 2) {
            CHECK_RC(MPI_Alltoall(s, k, MPI_INT, wide, 1, every_other, comm));
            for (int j = 0; j < size; j++)
                for (int i = 0; i < k; i++) r[j * k + i] = wide[2 * (j * k + i)];
        } else {
            CHECK_RC(MPI_Alltoall(s, k, MPI_INT, r, k, MPI_INT, comm));
        }
        memset(s, 0, size * k * sizeof(int));
        for (int j = 0; j < size; j++)
            for (int i = 0; i < k; i++)
                CHECK(r[j * k + i] == j * 1000000 + rank * 100000 + i % 99991, "alltoall in_place %d: [%d][%d] = %d",
                      in_place, j, i, r[j * k + i]);
    }
    MPI_Type_free(&every_other);
    free(wide);
    free(s);
    free(r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype affine_t;
    MPI_Type_contiguous(2, MPI_LONG_LONG, &affine_t);
    MPI_Type_commit(&affine_t);
    MPI_Op op;
    MPI_Op_create(compose, 0, &op);

    reductions(MPI_COMM_WORLD, affine_t, op);
    broadcasts(MPI_COMM_WORLD);
    gathers(MPI_COMM_WORLD);
    alltoalls(MPI_COMM_WORLD);

    /* The upper half, reversed: a communicator of its own. */
    MPI_Comm half;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank >= size / 2, size - rank, &half));
    reductions(half, affine_t, op);
    broadcasts(half);
    gathers(half);
    alltoalls(half);
    MPI_Comm_free(&half);

    MPI_Op_free(&op);
    MPI_Type_free(&affine_t);
    pass("copied_coll");
    MPI_Finalize();
    return 0;
}
