/* Small collectives of ranks on one host go through shared memory
 * (barrier; allreduce, reduce, bcast, allgather(v), gather, scatter and
 * alltoall up to 4 KiB): their results must be MPI's whatever the path.
 * A non-commutative operation is applied in rank order and every rank
 * gets the same bytes; sizes on both sides of the slot's inline bytes and
 * of the 4 KiB limit; MPI_IN_PLACE; broadcasts from every root between
 * allreduces and barriers (slots reused by later collectives); reduce,
 * gather and scatter at every root; allgather(v) and alltoall (a strided
 * type on some ranks), in place too; split and duplicated communicators,
 * freed and made again; and a rank that waits long in a barrier sleeps
 * instead of burning its core. */
#include "check.h"
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define P 1000000007LL

/* Affine maps x -> a*x + b mod P, composed: (f o g)(x) = f(g(x)). */
typedef struct { long long a, b; } affine;

static void compose(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    affine *f = in, *g = inout;
    for (int i = 0; i < *len; i++) {
        affine h = {f[i].a * g[i].a % P, (f[i].a * g[i].b + f[i].b) % P};
        g[i] = h;
    }
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static double wall_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Sums of rank-dependent integers: exact in doubles whatever the order. */
static void sums(MPI_Comm comm, int count, int in_place) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    double *in = malloc((count + 1) * sizeof(double));
    double *out = malloc((count + 1) * sizeof(double));
    for (int i = 0; i < count; i++) in[i] = out[i] = rank * 1000 + i;
    out[count] = -1; /* must stay untouched */
    if (in_place)
        CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, out, count, MPI_DOUBLE, MPI_SUM, comm));
    else
        CHECK_RC(MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        double want = 1000.0 * size * (size - 1) / 2 + (double)i * size;
        CHECK(out[i] == want, "count %d in_place %d: out[%d] = %g, want %g", count, in_place, i, out[i], want);
    }
    CHECK(out[count] == -1, "count %d: wrote past the end", count);
    free(in);
    free(out);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* 1: rank order for a non-commutative operation, same bytes everywhere. */
    MPI_Datatype affine_t;
    MPI_Type_contiguous(2, MPI_LONG_LONG, &affine_t);
    MPI_Type_commit(&affine_t);
    MPI_Op op;
    MPI_Op_create(compose, 0, &op);
    for (int count = 1; count <= 300; count += 299) {
        affine *mine = malloc(count * sizeof(affine)), *got = malloc(count * sizeof(affine));
        for (int i = 0; i < count; i++) mine[i] = (affine){rank + 2 + i, 7 * rank + 3};
        CHECK_RC(MPI_Allreduce(mine, got, count, affine_t, op, MPI_COMM_WORLD));
        for (int i = 0; i < count; i++) {
            affine want = {1, 0};
            for (int r = size - 1; r >= 0; r--) {
                affine f = {r + 2 + i, 7 * r + 3};
                compose(&f, &want, &(int){1}, NULL);
            }
            CHECK(got[i].a == want.a && got[i].b == want.b, "count %d: element %d is (%lld, %lld), want (%lld, %lld)",
                  count, i, got[i].a, got[i].b, want.a, want.b);
        }
        free(mine);
        free(got);
    }

    /* 2: sizes around the slot's 56 inline bytes and the 4 KiB limit. */
    int counts[] = {0, 1, 7, 8, 511, 512, 513, 2000};
    for (unsigned k = 0; k < sizeof counts / sizeof *counts; k++) {
        sums(MPI_COMM_WORLD, counts[k], 0);
        sums(MPI_COMM_WORLD, counts[k], 1);
    }

    /* 3: broadcasts from every root between allreduces and barriers. */
    char buf[5000];
    for (int it = 0; it < 200; it++) {
        int root = it % size, len = (it * 37) % 4200;
        memset(buf, rank == root ? 'a' + it % 26 : 0, len);
        CHECK_RC(MPI_Bcast(buf, len, MPI_CHAR, root, MPI_COMM_WORLD));
        for (int i = 0; i < len; i++)
            CHECK(buf[i] == 'a' + it % 26, "bcast %d from %d: byte %d is %d", it, root, i, buf[i]);
        if (it % 3 == 0) CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        if (it % 5 == 0) {
            int one = 1, n = 0;
            CHECK_RC(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK(n == size, "iteration %d: %d ranks counted", it, n);
        }
    }

    /* 4: reduce to every root (rank order) and allgather(v). */
    for (int root = 0; root < size; root++) {
        affine mine = {rank + 2, 7 * rank + 3}, got = {0, 0}, want = {1, 0};
        CHECK_RC(MPI_Reduce(&mine, &got, 1, affine_t, op, root, MPI_COMM_WORLD));
        for (int r = size - 1; r >= 0; r--) {
            affine f = {r + 2, 7 * r + 3};
            compose(&f, &want, &(int){1}, NULL);
        }
        if (rank == root)
            CHECK(got.a == want.a && got.b == want.b, "reduce to %d: (%lld, %lld)", root, got.a, got.b);
    }
    int *all = malloc(size * 40 * sizeof(int)), *vcounts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    for (int it = 0; it < 3; it++) {
        int k = it == 2 ? 1100 / size + 1 : 1 + it * 9; /* the last over 4 KiB in all, under it per rank */
        int mine[1200];
        for (int i = 0; i < k; i++) mine[i] = rank * 100 + i;
        int *got = malloc(size * k * sizeof(int));
        CHECK_RC(MPI_Allgather(mine, k, MPI_INT, got, k, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < k; i++)
                CHECK(got[r * k + i] == r * 100 + i, "allgather of %d: [%d][%d] = %d", k, r, i, got[r * k + i]);
        for (int i = 0; i < size * k; i++) got[i] = -1;
        for (int i = 0; i < k; i++) got[rank * k + i] = rank * 100 + i;
        CHECK_RC(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, k, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            CHECK(got[r * k + k - 1] == r * 100 + k - 1, "in-place allgather of %d: rank %d", k, r);
        free(got);
    }
    for (int root = 0; root < size; root++) {
        int k = 1 + root % 3, mine[3], *blocks = malloc(size * 3 * sizeof(int)), back[3];
        for (int i = 0; i < k; i++) mine[i] = 10 * rank + i + root;
        for (int i = 0; i < size * k; i++) blocks[i] = -1;
        CHECK_RC(MPI_Gather(mine, k, MPI_INT, blocks, k, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int i = 0; i < size * k; i++)
                CHECK(blocks[i] == 10 * (i / k) + i % k + root, "gather to %d: element %d is %d", root, i, blocks[i]);
        if (rank == root) {
            CHECK_RC(MPI_Gather(MPI_IN_PLACE, k, MPI_INT, blocks, k, MPI_INT, root, MPI_COMM_WORLD));
            CHECK(blocks[root * k] == 10 * root + root, "in-place gather to %d", root);
        } else {
            CHECK_RC(MPI_Gather(mine, k, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD));
        }
        for (int i = 0; i < size * k; i++) blocks[i] = 7 * i + root;
        CHECK_RC(MPI_Scatter(blocks, k, MPI_INT, back, k, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < k; i++)
            CHECK(back[i] == 7 * (rank * k + i) + root, "scatter from %d: element %d is %d", root, i, back[i]);
        free(blocks);
    }
    for (int k = 1; k <= 3; k++) {
        int *out = malloc(size * k * sizeof(int)), *in = malloc(size * k * sizeof(int));
        for (int i = 0; i < size * k; i++) out[i] = 1000 * rank + i;
        CHECK_RC(MPI_Alltoall(out, k, MPI_INT, in, k, MPI_INT, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int i = 0; i < k; i++)
                CHECK(in[j * k + i] == 1000 * j + rank * k + i, "alltoall of %d: from %d element %d is %d", k, j, i, in[j * k + i]);
        /* In place, and a strided receive type on odd ranks (the same
         * type signature: every rank takes the same path). */
        CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, k, MPI_INT, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            CHECK(in[j * k] == 1000 * rank + j * k, "in-place alltoall of %d: from %d is %d", k, j, in[j * k]);
        MPI_Datatype strided;
        MPI_Type_vector(k, 1, 2, MPI_INT, &strided);
        MPI_Type_create_resized(strided, 0, 2 * k * sizeof(int), &strided);
        MPI_Type_commit(&strided);
        int *wide = malloc(2 * size * k * sizeof(int));
        for (int i = 0; i < 2 * size * k; i++) wide[i] = -1;
        if (rank % 2)
            CHECK_RC(MPI_Alltoall(out, k, MPI_INT, wide, 1, strided, MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Alltoall(out, k, MPI_INT, in, k, MPI_INT, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int i = 0; i < k; i++) {
                int got = rank % 2 ? wide[2 * (j * k + i)] : in[j * k + i];
                CHECK(got == 1000 * j + rank * k + i, "strided alltoall of %d: from %d element %d is %d", k, j, i, got);
            }
        MPI_Type_free(&strided);
        free(wide);
        free(out);
        free(in);
    }
    int at = 0;
    for (int r = 0; r < size; r++) {
        vcounts[r] = r % 3 + (r == 1) * 30;
        displs[r] = at + 1;
        at += vcounts[r] + 2;
    }
    int myv[40];
    for (int i = 0; i < vcounts[rank]; i++) myv[i] = 1000 * rank + i;
    for (int i = 0; i < size * 40; i++) all[i] = -7;
    CHECK_RC(MPI_Allgatherv(myv, vcounts[rank], MPI_INT, all, vcounts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < vcounts[r]; i++)
            CHECK(all[displs[r] + i] == 1000 * r + i, "allgatherv: rank %d element %d is %d", r, i, all[displs[r] + i]);
        CHECK(all[displs[r] - 1] == -7, "allgatherv wrote before block %d", r);
    }
    free(all);
    free(vcounts);
    free(displs);

    /* 4b: broadcasts, allgathers and alltoalls around the data region of
     * a segment (64 KiB per rank at 2-4 ranks, 256 KiB / ranks from 8 on,
     * 4 KiB at least), from every root, 20 times in a row (every phase of
     * the regions reused). */
    {
        int sizes[] = {4097, 16384, 37440, 65536, 65537};
        for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int len = sizes[k], per = len / size;
            char *b = malloc(len), *s = malloc(len), *r = malloc(len + size);
            for (int it = 0; it < 20; it++) {
                int root = it % size;
                for (int i = 0; i < len; i++) b[i] = rank == root ? (char)(i * 3 + it) : 0;
                CHECK_RC(MPI_Bcast(b, len, MPI_CHAR, root, MPI_COMM_WORLD));
                for (int i = 0; i < len; i++)
                    CHECK(b[i] == (char)(i * 3 + it), "bcast of %d, %d from %d: byte %d", len, it, root, i);
                for (int i = 0; i < per * size; i++) s[i] = (char)(rank * 31 + i + it);
                CHECK_RC(MPI_Alltoall(s, per, MPI_CHAR, r, per, MPI_CHAR, MPI_COMM_WORLD));
                for (int j = 0; j < size; j++)
                    for (int i = 0; i < per; i++)
                        CHECK(r[j * per + i] == (char)(j * 31 + rank * per + i + it), "alltoall of %d per rank, %d: [%d][%d]",
                              per, it, j, i);
                CHECK_RC(MPI_Allgather(s, per, MPI_CHAR, r, per, MPI_CHAR, MPI_COMM_WORLD));
                for (int j = 0; j < size; j++)
                    for (int i = 0; i < per; i++)
                        CHECK(r[j * per + i] == (char)(j * 31 + i + it), "allgather of %d, %d: [%d][%d]", per, it, j, i);
            }
            free(b);
            free(s);
            free(r);
        }
    }

    /* 5: split and duplicated communicators, freed and made again. */
    for (int it = 0; it < 20; it++) {
        MPI_Comm half, dup;
        CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
        CHECK_RC(MPI_Comm_dup(half, &dup));
        int hsize;
        MPI_Comm_size(half, &hsize);
        sums(half, 3 + it, it % 2);
        int who = rank, low = -1;
        CHECK_RC(MPI_Allreduce(&who, &low, 1, MPI_INT, MPI_MIN, dup));
        CHECK(low == rank % 2, "split %d: lowest rank %d", it, low);
        CHECK_RC(MPI_Barrier(dup));
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
    }

    /* 6: waiting long in a barrier costs little CPU (the waiter sleeps). */
    MPI_Barrier(MPI_COMM_WORLD);
    double cpu0 = cpu_seconds(), wall0 = wall_seconds();
    if (rank == 0 && size > 1) usleep(1000 * 1000);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    double cpu = cpu_seconds() - cpu0, wall = wall_seconds() - wall0;
    if (rank != 0)
        CHECK(cpu < 0.5 * wall, "waited %.2f s in a barrier using %.2f s of CPU", wall, cpu);

    MPI_Op_free(&op);
    MPI_Type_free(&affine_t);
    pass("shm_coll");
    MPI_Finalize();
    return 0;
}
