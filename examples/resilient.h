/* The resilient loop of the MPI Stages paper (Listing 5.4), shared by the
 * examples (ring.c spells it out in full): run one attempt from the fault
 * epoch; on MPIX_TRY_RELOAD roll back with MPIX_Checkpoint_read and try
 * again from the committed epoch; abort on any other error. Returns how many
 * times this rank rolled back. */
#ifndef RESILIENT_H
#define RESILIENT_H

#include <mpi.h>
#include <stdio.h>

static int resilient_run(const char *app, int (*attempt)(int epoch, void *ctx), void *ctx)
{
    int code = MPI_SUCCESS, epoch, rollbacks = 0, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (;;) {
        if (code == MPIX_TRY_RELOAD) {
            rollbacks++;
            code = MPIX_Checkpoint_read();
            if (code == MPIX_TRY_RELOAD) continue; /* another failure meanwhile */
        }
        if (code != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(code, msg, &len);
            fprintf(stderr, "%s: rank %d: %s\n", app, rank, msg);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPIX_Get_fault_epoch(&epoch);
        code = attempt(epoch, ctx);
        if (code == MPI_SUCCESS) break;
    }
    if (rollbacks) fprintf(stderr, "%s: rank %d rolled back %d time(s)\n", app, rank, rollbacks);
    return rollbacks;
}

#endif
