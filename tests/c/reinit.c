/* MPIX_Reinit under every recovery mode. Run with one rank killed at a
 * known point (tests/recovery.rs): checks what each rank sees when it
 * (re)enters the restart point.
 * - NEW on the first entry; REINITED on a live rank after the jump (reinit);
 *   RESTARTED in the replacement (reinit) and in every relaunched rank (cpr);
 * - after the jump the MPI state is that of MPI_Init: a communicator made
 *   before is gone, a protected region is gone, WORLD's error handler is
 *   ERRORS_ARE_FATAL again; the fault epoch is the committed one and the
 *   protected data comes back from it;
 * - the MPI call that saw the failure never returned on a jumping rank;
 * - a NULL restart point is MPI_ERR_ARG.
 * Prints "OK reinit" on rank 0 and, per rank, the states it saw. */
#include "check.h"

static int rank, size, entries, returned_after_failure;
static int seen[8];
static MPI_Comm made = MPI_COMM_NULL;
static struct {
    int iter;
    double sum;
} state;

static int point(int argc, char **argv, MPIX_Reinit_state st)
{
    (void)argc;
    (void)argv;
    int mode, epoch;
    if (entries < 8) seen[entries] = st;
    entries++;
    CHECK_RC(MPIX_Get_recovery_mode(&mode));
    CHECK_RC(MPIX_Get_fault_epoch(&epoch));
    if (st == MPIX_REINIT_REINITED) {
        CHECK(mode == MPIX_RECOVERY_REINIT, "REINITED only under --recovery reinit (mode %d)", mode);
        /* The communicator made before the jump is gone. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int n = 0;
        CHECK(MPI_Comm_size(made, &n) != MPI_SUCCESS, "a communicator survived the reset (size %d)", n);
        CHECK(MPIX_Unprotect(0) != MPI_SUCCESS, "a protected region survived the reset");
    }
    if (st != MPIX_REINIT_NEW) CHECK(epoch == 1, "restarting from fault epoch %d, wanted 1", epoch);
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &made));
    CHECK_RC(MPIX_Protect(0, &state, sizeof state, MPI_BYTE));
    if (epoch > 0) {
        CHECK_RC(MPIX_Checkpoint_restore());
        CHECK(state.iter == 5, "restored iteration %d, wanted 5", state.iter);
    } else {
        state.iter = 0;
        state.sum = 0;
    }
    while (state.iter < 10) {
        double one = 1, got = 0;
        int rc = MPI_Allreduce(&one, &got, 1, MPI_DOUBLE, MPI_SUM, made);
        if (rc != MPI_SUCCESS) {
            /* Reinit never gets here: the call jumps back instead. */
            returned_after_failure++;
            return rc;
        }
        CHECK(got == size, "allreduce gave %g", got);
        state.sum += got;
        state.iter++;
        if (state.iter == 5) CHECK_RC(MPIX_Checkpoint_write()); /* epoch 1 holds iteration 5 */
    }
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    {
        int c, rc = MPIX_Reinit(argc, argv, NULL);
        MPI_Error_class(rc, &c);
        CHECK(c == MPI_ERR_ARG, "a NULL restart point is accepted");
    }
    int rc = MPIX_Reinit(argc, argv, point);
    CHECK(rc == MPI_SUCCESS, "MPIX_Reinit returned %d", rc);
    CHECK(returned_after_failure == 0, "an MPI call returned after the failure instead of jumping");
    CHECK(state.sum == 10.0 * size, "sum %g, wanted %g", state.sum, 10.0 * size);
    printf("rank %d states", rank);
    for (int i = 0; i < entries && i < 8; i++) printf(" %d", seen[i]);
    printf("\n");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("OK reinit\n");
    MPI_Finalize();
    return 0;
}
