/* Large transfers in flight when a rank dies: every iteration each rank
 * sends MIB MiB to its right neighbour and receives as much from its left
 * one (non-blocking, then MPI_Waitall), checks every word, and adds them to
 * its protected state, checkpointed each iteration. A rank killed on
 * entering MPI_Waitall (`--inject rank=R,call=MPI_Waitall:N`) dies with both
 * of its transfers under way, and its neighbours with theirs to it: the job
 * must recover in every mode and print the failure-free checksum.
 *
 *   mpiexec -n 3 --recovery stages ./bulk [ITERS] [MIB] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "../../examples/resilient.h"

static int rank, size, iters = 8, mib = 16;

struct state {
    int iter;
    uint64_t sum;
};

static uint64_t word(int iter, int from, size_t i)
{
    uint64_t x = ((uint64_t)iter << 40) ^ ((uint64_t)from << 32) ^ i;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    return x ^ (x >> 32);
}

static int attempt(int epoch, void *ctx)
{
    struct state *s = ctx;
    size_t n = (size_t)mib << 17; /* words of 8 bytes */
    uint64_t *out = malloc(n * 8), *in = malloc(n * 8);
    int rc = MPI_SUCCESS;
    s->iter = 0;
    s->sum = 0;
    if ((rc = MPIX_Protect(0, s, sizeof *s, MPI_BYTE))) goto done;
    if (epoch > 0 && (rc = MPIX_Checkpoint_restore())) goto done;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (; s->iter < iters; s->iter++) {
        for (size_t i = 0; i < n; i++) out[i] = word(s->iter, rank, i);
        MPI_Request rq[2];
        if ((rc = MPI_Irecv(in, (int)n, MPI_UINT64_T, left, s->iter, MPI_COMM_WORLD, &rq[0]))) goto done;
        if ((rc = MPI_Isend(out, (int)n, MPI_UINT64_T, right, s->iter, MPI_COMM_WORLD, &rq[1]))) goto done;
        if ((rc = MPI_Waitall(2, rq, MPI_STATUSES_IGNORE))) goto done;
        for (size_t i = 0; i < n; i++) {
            if (in[i] != word(s->iter, left, i)) {
                fprintf(stderr, "bulk: rank %d, iteration %d: word %zu from rank %d is %llx\n", rank, s->iter, i,
                        left, (unsigned long long)in[i]);
                MPI_Abort(MPI_COMM_WORLD, 4);
            }
            s->sum += in[i] >> 20;
        }
        s->iter++;
        rc = MPIX_Checkpoint_write();
        s->iter--;
        if (rc) goto done;
    }
    uint64_t total = 0;
    if ((rc = MPI_Allreduce(&s->sum, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD))) goto done;
    if ((rc = MPI_Barrier(MPI_COMM_WORLD))) goto done;
    if (rank == 0) printf("bulk: %d ranks, %d iterations of %d MiB, checksum %llu\n", size, iters, mib,
                          (unsigned long long)total);
done:
    MPIX_Unprotect(0);
    free(out);
    free(in);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1) iters = atoi(argv[1]);
    if (argc > 2) mib = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct state s;
    resilient_run("bulk", attempt, &s);
    MPI_Finalize();
    return 0;
}
