/* The resilient loop of the MPI Stages paper (Listing 5.4), shared by the
 * examples (ring.c spells it out in full, for --recovery stages only): run
 * one attempt from the fault epoch; on MPIX_TRY_RELOAD roll back with
 * MPIX_Checkpoint_read and try again from the committed epoch; abort on any
 * other error. Returns how many times this rank rolled back.
 *
 * The same source runs under every recovery mode:
 * - stages: as above;
 * - reinit: the loop runs as the restart point of MPIX_Reinit; a failure
 *   brings the live ranks back to it (no MPI call returns the failure),
 *   with the MPI state of MPI_Init: the error handler is set again, and
 *   the attempt registers its regions again (memory it allocated before
 *   the jump is not freed: the jump skips its clean-up);
 * - cpr and none: the loop runs once per process; a relaunched process
 *   starts from the fault epoch. */
#ifndef RESILIENT_H
#define RESILIENT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A checkpoint period from the command line: a count of iterations, or
 * `auto` (-1): MPIX_Checkpoint_needed decides (see below). */
static inline int resilient_every(const char *arg)
{
    if (!strcmp(arg, "auto")) return -1;
    int k = atoi(arg);
    return k < 0 ? 0 : k;
}

/* Whether the iteration that just ended (number `iter`, from 1) should
 * end with MPIX_Checkpoint_write: every `every` iterations, or, with
 * `every` < 0, when MPIX_Checkpoint_needed says it pays (from the measured
 * cost of the checkpoints and mpiexec's --mtbf or --ckpt-interval; it is
 * collective over MPI_COMM_WORLD, so every rank asks at every iteration).
 * Returns an MPI error code; *due is 1 or 0. */
static inline int resilient_checkpoint_due(int iter, int every, int *due)
{
    if (every < 0) return MPIX_Checkpoint_needed(due);
    *due = every > 0 && iter % every == 0;
    return MPI_SUCCESS;
}

static struct {
    const char *app;
    int (*attempt)(int epoch, void *ctx);
    void *ctx;
    int rollbacks;
} resilient;

static void resilient_fail(int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len, rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Error_string(code, msg, &len);
    fprintf(stderr, "%s: rank %d: %s\n", resilient.app, rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The loop itself; under reinit, MPIX_Reinit's restart point. */
static int resilient_point(int argc, char **argv, MPIX_Reinit_state state)
{
    int code = MPI_SUCCESS, epoch;
    (void)argc;
    (void)argv;
    if (state == MPIX_REINIT_REINITED) resilient.rollbacks++;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (;;) {
        if (code == MPIX_TRY_RELOAD) {
            resilient.rollbacks++;
            code = MPIX_Checkpoint_read();
            if (code == MPIX_TRY_RELOAD) continue; /* another failure meanwhile */
        }
        if (code != MPI_SUCCESS) resilient_fail(code);
        MPIX_Get_fault_epoch(&epoch);
        code = resilient.attempt(epoch, resilient.ctx);
        if (code == MPI_SUCCESS) return MPI_SUCCESS;
    }
}

static int resilient_run(const char *app, int (*attempt)(int epoch, void *ctx), void *ctx)
{
    int mode = MPIX_RECOVERY_NONE, rank = 0;
    resilient.app = app;
    resilient.attempt = attempt;
    resilient.ctx = ctx;
    resilient.rollbacks = 0;
    MPIX_Get_recovery_mode(&mode);
    int rc = mode == MPIX_RECOVERY_REINIT ? MPIX_Reinit(0, NULL, resilient_point)
                                          : resilient_point(0, NULL, MPIX_REINIT_NEW);
    if (rc != MPI_SUCCESS) resilient_fail(rc);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (resilient.rollbacks) fprintf(stderr, "%s: rank %d rolled back %d time(s)\n", app, rank, resilient.rollbacks);
    return resilient.rollbacks;
}

#endif
