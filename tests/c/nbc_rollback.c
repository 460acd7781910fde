/* Non-blocking and persistent collectives across a rollback: every
 * iteration runs MPI_Iallreduce + MPI_Wait on MPI_COMM_WORLD, on a dup of
 * it and on a split of it (made anew by each attempt), and a persistent
 * allreduce on the dup. With CKPT > 0 a checkpoint every CKPT iterations,
 * with 0 none, so that a failure rolls back to epoch 0 (the reset of the
 * MPI state that Reinit always does). A rank killed inside the loop
 * (`--inject rank=R,call=MPI_Iallreduce:N`) must leave a job that ends
 * with the failure-free sums: a survivor whose count of non-blocking
 * collectives was not reset tagged its next one differently from the
 * replacement's, and both waited forever (campaign cause 1).
 *
 *   mpiexec -n 4 --recovery reinit ./nbc_rollback [ITERS] [CKPT] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "../../examples/resilient.h"

static int rank, size, iters = 30, every = 0;

struct state {
    int iter;
    long sum;
};

static int attempt(int epoch, void *ctx)
{
    struct state *s = ctx;
    MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
    MPI_Request pr = MPI_REQUEST_NULL;
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
        long one = s->iter + 1, w = 0, d = 0, h = 0;
        MPI_Request rq[3];
        if ((rc = MPI_Iallreduce(&one, &w, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &rq[0]))) goto done;
        if ((rc = MPI_Iallreduce(&one, &d, 1, MPI_LONG, MPI_SUM, dup, &rq[1]))) goto done;
        if ((rc = MPI_Iallreduce(&one, &h, 1, MPI_LONG, MPI_SUM, half, &rq[2]))) goto done;
        if ((rc = MPI_Waitall(3, rq, MPI_STATUSES_IGNORE))) goto done;
        pin = rank;
        if ((rc = MPI_Start(&pr))) goto done;
        if ((rc = MPI_Wait(&pr, MPI_STATUS_IGNORE))) goto done;
        long want = (long)size * (s->iter + 1);
        if (w != want || d != want || h != (long)hsize * (s->iter + 1) || pout != (long)size * (size - 1) / 2) {
            fprintf(stderr, "nbc_rollback: rank %d, iteration %d: %ld %ld %ld %ld\n", rank, s->iter, w, d, h, pout);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        s->sum += w + d + h;
        if (every > 0 && (s->iter + 1) % every == 0) {
            s->iter++;
            rc = MPIX_Checkpoint_write();
            s->iter--;
            if (rc) goto done;
        }
    }
    long total = 0;
    if ((rc = MPI_Allreduce(&s->sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD))) goto done;
    if (rank == 0) printf("nbc_rollback: %d ranks, %d iterations, total %ld\n", size, iters, total);
done:
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
    resilient_run("nbc_rollback", attempt, &s);
    MPI_Finalize();
    return 0;
}
