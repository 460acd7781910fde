/* ULFM under `mpiexec --with-ft ulfm`: revoke, failure notification,
 * acknowledgement, agreement (also with a failure during it) and shrink,
 * with values checked. Run with at least 4 ranks: the last rank dies
 * first (a real SIGKILL), then the new last rank dies during an
 * agreement. Every survivor prints "ulfm ok <rank>" at the end. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int me;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: line %d: ", me, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static int class_of(int rc) {
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

/* Rank 0 revokes a duplicate of `comm` while the others wait in a
 * receive on it that no one will match: they get MPIX_ERR_REVOKED, and
 * every later operation on it fails the same way; agree still works. */
static void revoking(MPI_Comm comm) {
    MPI_Comm d;
    int rank, size, flag, x = 0, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_dup(comm, &d);
    MPIX_Comm_is_revoked(d, &flag);
    CHECK(flag == 0, "a new communicator is revoked");
    /* A first collective: on one host, `d` now has its shared-memory
     * segment for collectives. */
    rc = MPI_Barrier(d);
    CHECK(rc == MPI_SUCCESS, "a barrier before the revoke: %d", rc);
    if (rank == 0) {
        /* Let the others block first (not needed for correctness). */
        usleep(100000);
        rc = MPIX_Comm_revoke(d);
        CHECK(rc == MPI_SUCCESS, "revoke: %d", rc);
    } else {
        rc = MPI_Recv(&x, 1, MPI_INT, 0, 7, d, MPI_STATUS_IGNORE);
        CHECK(class_of(rc) == MPIX_ERR_REVOKED, "a receive on a revoked communicator: %d", rc);
    }
    MPIX_Comm_is_revoked(d, &flag);
    CHECK(flag == 1, "not revoked after the revoke");
    rc = MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, 0, d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "a send on a revoked communicator: %d", rc);
    rc = MPI_Barrier(d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "a barrier on a revoked communicator: %d", rc);
    /* Every member knows by now: a collective through shared memory, which
     * would complete with all of them taking part, is refused too (ULFM's
     * benchrevoke: the revoker's next allreduce succeeded). */
    int y = 0;
    rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "an allreduce on a revoked communicator: %d", rc);
    rc = MPI_Bcast(&x, 1, MPI_INT, 0, d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "a bcast on a revoked communicator: %d", rc);
    /* Collectives of no bytes end at once, but not on a revoked communicator. */
    rc = MPI_Allreduce(&x, &y, 0, MPI_INT, MPI_SUM, d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "an empty allreduce on a revoked communicator: %d", rc);
    rc = MPI_Bcast(&x, 0, MPI_INT, 0, d);
    CHECK(class_of(rc) == MPIX_ERR_REVOKED, "an empty bcast on a revoked communicator: %d", rc);
    flag = rank == 1 ? 0x6 : 0x7;
    rc = MPIX_Comm_agree(d, &flag);
    CHECK(rc == MPI_SUCCESS && flag == (size > 1 ? 0x6 : 0x7), "agree on a revoked communicator: %d, flag %d", rc, flag);
    /* The original communicator is not revoked. */
    MPIX_Comm_is_revoked(comm, &flag);
    CHECK(flag == 0, "the parent was revoked too");
    rc = MPI_Barrier(comm);
    CHECK(rc == MPI_SUCCESS, "barrier on the parent: %d", rc);
    MPI_Comm_free(&d);
}

int main(int argc, char **argv) {
    int size, rc, flag, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 4, "run with at least 4 ranks");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    revoking(MPI_COMM_WORLD);

    /* Failure-free agreement: the AND of all flags. */
    flag = ~(1 << me);
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    CHECK(rc == MPI_SUCCESS, "agree: %d", rc);
    CHECK(flag == ~((1 << size) - 1), "agree gave %#x", flag);

    /* The last rank dies. */
    int dead = size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == dead) raise(SIGKILL);

    /* A receive from it fails (it sent nothing). */
    int x = 0;
    rc = MPI_Recv(&x, 1, MPI_INT, dead, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "receive from the dead rank: %d", rc);
    /* So does a send to it, and a collective with it. */
    rc = MPI_Send(&x, 1, MPI_INT, dead, 1, MPI_COMM_WORLD);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "send to the dead rank: %d", rc);
    rc = MPI_Barrier(MPI_COMM_WORLD);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "barrier with the dead rank: %d", rc);

    /* A wildcard receive cannot wait while the failure is not
     * acknowledged: a blocking one fails; a non-blocking one is reported
     * pending and stays posted. */
    MPI_Request req;
    MPI_Status st;
    rc = MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &st);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "blocking wildcard receive: %d", rc);
    int y = -1;
    MPI_Irecv(&y, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &req);
    rc = MPI_Wait(&req, &st);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "wildcard wait: %d", rc);
    CHECK(req != MPI_REQUEST_NULL, "the pending receive's request was freed");
    rc = MPI_Test(&req, &flag, &st);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && flag == 0, "wildcard test: %d, flag %d", rc, flag);
    int idx = -5;
    rc = MPI_Waitany(1, &req, &idx, &st);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && idx == 0, "wildcard waitany: %d, index %d", rc, idx);
    MPI_Status sts[1];
    rc = MPI_Waitall(1, &req, sts);
    CHECK(rc == MPI_ERR_IN_STATUS && class_of(sts[0].MPI_ERROR) == MPIX_ERR_PROC_FAILED_PENDING && req != MPI_REQUEST_NULL,
          "wildcard waitall: %d", rc);

    /* The failure as every survivor knows it. */
    MPI_Group failed, wg;
    int tr;
    MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed);
    MPI_Group_size(failed, &n);
    CHECK(n == 1, "%d failed, 1 expected", n);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int zero = 0;
    MPI_Group_translate_ranks(failed, 1, &zero, wg, &tr);
    CHECK(tr == dead, "the failed rank is %d, not %d", tr, dead);
    MPI_Group_free(&failed);
    MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &failed);
    MPI_Group_size(failed, &n);
    CHECK(n == 0, "%d acknowledged before the ack", n);
    MPI_Group_free(&failed);

    /* An agreement with an unacknowledged failure: the AND of the live
     * ranks' flags, and MPIX_ERR_PROC_FAILED at every one. */
    flag = 0xff & ~(1 << me);
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "agree with an unacknowledged failure: %d", rc);
    CHECK(flag == (0xff & ~((1 << dead) - 1)), "agree gave %#x", flag);

    /* Acknowledged: wildcard receives work again, and the agreement
     * raises nothing. */
    rc = MPIX_Comm_ack_failed(MPI_COMM_WORLD, size, &n);
    CHECK(rc == MPI_SUCCESS && n == 1, "ack_failed: %d, %d acknowledged", rc, n);
    MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &failed);
    MPI_Group_size(failed, &n);
    CHECK(n == 1, "%d acknowledged after the ack", n);
    MPI_Group_free(&failed);
    /* The pending receive completes once a survivor sends to it. */
    MPI_Send(&me, 1, MPI_INT, (me + 1) % dead, 2, MPI_COMM_WORLD);
    rc = MPI_Wait(&req, &st);
    CHECK(rc == MPI_SUCCESS && req == MPI_REQUEST_NULL, "resumed wait: %d", rc);
    CHECK(y == (me + dead - 1) % dead && st.MPI_SOURCE == y, "resumed wait got %d from %d", y, st.MPI_SOURCE);
    if (me == 0) {
        for (int r = 1; r < dead; r++) MPI_Send(&r, 1, MPI_INT, r, 3, MPI_COMM_WORLD);
    } else {
        rc = MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st);
        CHECK(rc == MPI_SUCCESS && x == me && st.MPI_SOURCE == 0, "wildcard receive after the ack: %d, %d from %d", rc, x, st.MPI_SOURCE);
    }
    flag = 1;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    CHECK(rc == MPI_SUCCESS && flag == 1, "agree after the ack: %d", rc);

    /* Shrink: the survivors, in order, and a collective that works. */
    MPI_Comm s;
    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &s);
    CHECK(rc == MPI_SUCCESS, "shrink: %d", rc);
    int ss, sr, sum;
    MPI_Comm_size(s, &ss);
    MPI_Comm_rank(s, &sr);
    CHECK(ss == size - 1 && sr == me, "shrunk: rank %d of %d", sr, ss);
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, s);
    CHECK(sum == (size - 1) * (size - 2) / 2, "allreduce on the shrunk communicator: %d", sum);

    /* A failure during an agreement: the new last rank dies while the
     * others wait in it; they decide without it, with an error. */
    int dead2 = ss - 1;
    if (sr == dead2) {
        usleep(200000);
        raise(SIGKILL);
    }
    flag = 0x3;
    rc = MPIX_Comm_agree(s, &flag);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "agree with a failure during it: %d", rc);
    CHECK(flag == 0x3, "agree gave %#x", flag);
    MPIX_Comm_failure_ack(s);
    flag = 0x1;
    rc = MPIX_Comm_agree(s, &flag);
    CHECK(rc == MPI_SUCCESS && flag == 0x1, "agree after acknowledging: %d", rc);
    MPI_Comm s2;
    rc = MPIX_Comm_shrink(s, &s2);
    CHECK(rc == MPI_SUCCESS, "second shrink: %d", rc);
    MPI_Comm_size(s2, &ss);
    CHECK(ss == size - 2, "second shrink has %d ranks", ss);
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, s2);
    CHECK(sum == (size - 2) * (size - 3) / 2, "allreduce after the second shrink: %d", sum);

    MPI_Comm_free(&s2);
    MPI_Comm_free(&s);
    MPI_Group_free(&wg);
    printf("ulfm ok %d\n", me);
    MPI_Finalize();
    return 0;
}
