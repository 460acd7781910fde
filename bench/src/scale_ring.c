/* bench/scale's resilient job: every rank trades a number with its
 * neighbours once per iteration and checkpoints its tiny state (the
 * iteration and an accumulator, protected with MPIX_Protect) every EVERY
 * iterations (default 10),
 * under any recovery mode (examples/resilient.h). Rank 0 prints the sum of
 * the accumulators, the same with and without failures.
 *
 *   mpiexec -n N --recovery stages [--inject rank=R,checkpoint=E] ./scale_ring [ITERS [EVERY]] */
#include "../../examples/resilient.h"

struct state {
    int iter;
    long long acc;
};

static struct state s;
static int rank, size, iters = 20, every = 10;

static int attempt(int epoch, void *ctx)
{
    int rc;
    (void)ctx;
    if ((rc = MPIX_Protect(1, &s, sizeof s, MPI_BYTE))) return rc;
    if (epoch > 0) {
        if ((rc = MPIX_Checkpoint_restore())) return rc;
    } else {
        s.iter = 0;
        s.acc = rank;
    }
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    while (s.iter < iters) {
        long long from_left;
        rc = MPI_Sendrecv(&s.acc, 1, MPI_LONG_LONG, right, 1, &from_left, 1, MPI_LONG_LONG, left, 1,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc) return rc;
        s.acc = (s.acc * 31 + from_left + s.iter) % 1000003;
        s.iter++;
        if (s.iter % every == 0 && (rc = MPIX_Checkpoint_write())) return rc;
    }
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) iters = atoi(argv[1]);
    if (argc > 2 && atoi(argv[2]) > 0) every = atoi(argv[2]);
    resilient_run("scale_ring", attempt, NULL);
    long long sum = 0;
    MPI_Reduce(&s.acc, &sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("scale_ring: %d ranks, %d iterations, sum %lld\n", size, iters, sum);
    MPI_Finalize();
    return 0;
}
