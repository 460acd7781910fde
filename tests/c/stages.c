/* MPI Stages behaviour, one mode per run:
 *   stale       generation fencing: messages queued or in flight at a
 *               failure are never delivered after it (3 ranks, rank 2 is
 *               killed on entering its first MPI_Barrier)
 *   epochs      MPIX_Get_fault_epoch counts this rank's checkpoints;
 *               Checkpoint_write refuses with a pending request and writes
 *               nothing; Checkpoint_read without a failure does nothing;
 *               prints the size of the MPI-state checkpoint file
 *   finalize    rank 0 finalizes, then rank 1 dies: the job must end
 *               with a message, not hang
 *   handles     communicators, groups and datatypes keep their handle
 *               values and meaning across a rollback to epoch 1 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "check.h"

static int rank, size;
#define BIG 100000

static int stale_attempt(int attempt)
{
    int rc;
    static int big[BIG], v;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (rank == 0) {
        v = 1000 + attempt;
        for (int i = 0; i < BIG; i++) big[i] = v + i;
        if ((rc = MPI_Isend(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &reqs[0]))) return rc;
        if ((rc = MPI_Isend(big, BIG, MPI_INT, 1, 8, MPI_COMM_WORLD, &reqs[1]))) return rc;
    }
    if (rank == 1 && attempt == 0) {
        /* Both messages reach this rank's queue, unreceived, before the failure. */
        MPI_Status st;
        if ((rc = MPI_Probe(0, 7, MPI_COMM_WORLD, &st))) return rc;
        if ((rc = MPI_Probe(0, 8, MPI_COMM_WORLD, &st))) return rc;
    }
    if ((rc = MPI_Barrier(MPI_COMM_WORLD))) return rc;
    if (rank == 1) {
        int v = -1;
        if ((rc = MPI_Recv(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE))) return rc;
        CHECK(v == 1000 + attempt, "stale message delivered: got %d, expected %d", v, 1000 + attempt);
        memset(big, 0, sizeof big);
        if ((rc = MPI_Recv(big, BIG, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE))) return rc;
        for (int i = 0; i < BIG; i++)
            CHECK(big[i] == 1000 + attempt + i, "stale large message: [%d] = %d", i, big[i]);
        int flag;
        if ((rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE))) return rc;
        CHECK(!flag, "an extra message is queued");
    }
    if ((rc = MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE))) return rc;
    return MPI_Barrier(MPI_COMM_WORLD);
}

static void stale(void)
{
    int attempt = 0, rc;
    while ((rc = stale_attempt(attempt)) == MPIX_TRY_RELOAD) {
        int r;
        while ((r = MPIX_Checkpoint_read()) == MPIX_TRY_RELOAD)
            ;
        CHECK(r == MPI_SUCCESS, "Checkpoint_read returned %d", r);
        attempt++;
    }
    CHECK(rc == MPI_SUCCESS, "attempt returned %d", rc);
    /* Live ranks rolled back once; the replacement never failed itself. */
    if (rank != 2) CHECK(attempt == 1, "rank %d made %d attempts", rank, attempt + 1);
    pass("stages-stale");
}

static void epochs(void)
{
    int e;
    CHECK_RC(MPIX_Get_fault_epoch(&e));
    CHECK(e == 0, "first epoch %d", e);
    CHECK_RC(MPIX_Checkpoint_read()); /* no failure: nothing to do */
    CHECK_RC(MPIX_Checkpoint_write());
    CHECK_RC(MPIX_Get_fault_epoch(&e));
    CHECK(e == 1, "epoch after one write: %d", e);
    MPI_Request req;
    int x = 0;
    CHECK_RC(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &req));
    int rc = MPIX_Checkpoint_write();
    CHECK(rc != MPI_SUCCESS && rc != MPIX_TRY_RELOAD, "Checkpoint_write with a pending request returned %d", rc);
    CHECK_RC(MPIX_Get_fault_epoch(&e));
    CHECK(e == 1, "a refused write changed the epoch to %d", e);
    CHECK_RC(MPI_Cancel(&req));
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_RC(MPIX_Checkpoint_write());
    CHECK_RC(MPIX_Get_fault_epoch(&e));
    CHECK(e == 2, "epoch after two writes: %d", e);
    /* The MPI-state checkpoint of a WORLD-only application. */
    const char *root = getenv("STAGES_TEST_TMPFS");
    const char *job = getenv("MPISTAGES_JOB_ID");
    if (root && job && rank == 0) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/job-%s/epoch-2/rank-0.ckpt", root, job);
        /* With MPISTAGES_CKPT_BACKGROUND=1 a thread of the library writes
         * it after the call returned: wait for it, 10 s at most. */
        int found = 0;
        for (int i = 0; i < 1000 && !(found = stat(path, &sb) == 0); i++) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        CHECK(found, "no checkpoint file at %s", path);
        printf("MPI-state checkpoint: %lld bytes\n", (long long)sb.st_size);
    }
    pass("stages-epochs");
}

static void finalize_race(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        struct timespec ts = {0, 300 * 1000000L};
        nanosleep(&ts, NULL);
        /* mpiexec --inject rank=1,call=MPI_Comm_rank:2 kills it here. */
        int r;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    }
    MPI_Finalize();
    exit(0);
}

static MPI_Comm extra = MPI_COMM_NULL;

static int handles_attempt(int h[3], int attempt)
{
    int rc;
    if (attempt == 0) {
        MPI_Comm half;
        MPI_Group wg, g;
        MPI_Datatype t;
        int first = 0;
        CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
        CHECK_RC(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        CHECK_RC(MPI_Group_incl(wg, 1, &first, &g));
        CHECK_RC(MPI_Type_vector(3, 1, 2, MPI_INT, &t));
        CHECK_RC(MPI_Type_commit(&t));
        h[0] = half;
        h[1] = g;
        h[2] = t;
        CHECK_RC(MPIX_Checkpoint_write()); /* epoch 1 holds them */
        /* Created after the checkpoint: gone after the rollback. */
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &extra))) return rc;
    } else {
        /* A replacement has no copy of the values: rank 0 (live) has. */
        if ((rc = MPI_Bcast(h, 3, MPI_INT, 0, MPI_COMM_WORLD))) return rc;
        if (extra != MPI_COMM_NULL) {
            int n;
            CHECK(MPI_Comm_size(extra, &n) == MPI_ERR_COMM, "a communicator made after the checkpoint survived");
        }
    }
    /* The same handles mean the same objects. */
    int hs, gs, ts;
    CHECK_RC(MPI_Comm_size(h[0], &hs));
    CHECK(hs == (size + 1 - rank % 2) / 2, "split size %d", hs);
    CHECK_RC(MPI_Group_size(h[1], &gs));
    CHECK(gs == 1, "group size %d", gs);
    CHECK_RC(MPI_Type_size(h[2], &ts));
    CHECK(ts == 3 * (int)sizeof(int), "type size %d", ts);
    int v[6] = {rank, -1, rank, -1, rank, -1}, sum[6] = {0};
    if ((rc = MPI_Allreduce(v, sum, 1, h[2], MPI_SUM, h[0]))) return rc;
    int expect = 0;
    for (int r = rank % 2; r < size; r += 2) expect += r;
    CHECK(sum[0] == expect && sum[2] == expect && sum[4] == expect, "sum %d, expected %d", sum[0], expect);
    return MPI_Barrier(MPI_COMM_WORLD);
}

static void handles(void)
{
    int h[3], e, rc;
    MPIX_Get_fault_epoch(&e);
    int attempt = e > 0 ? 1 : 0;
    while ((rc = handles_attempt(h, attempt)) == MPIX_TRY_RELOAD) {
        while ((rc = MPIX_Checkpoint_read()) == MPIX_TRY_RELOAD)
            ;
        CHECK_RC(rc);
        MPIX_Get_fault_epoch(&e);
        CHECK(e == 1, "rolled back to epoch %d, expected 1", e);
        attempt++;
    }
    CHECK_RC(rc);
    pass("stages-handles");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "stale")) stale();
    else if (!strcmp(mode, "epochs")) epochs();
    else if (!strcmp(mode, "finalize")) finalize_race();
    else if (!strcmp(mode, "handles")) handles();
    else CHECK(0, "unknown mode '%s'", mode);
    MPI_Finalize();
    return 0;
}
