/* With MPI_ERRORS_RETURN, each bad argument gives its error class, and
 * MPI_Error_string / MPI_Error_class describe it. Nothing is sent, so the
 * job must stay healthy afterwards (checked with a final Allreduce). */
#include "check.h"
#include <string.h>

#define EXPECT(call, cls)                                                                 \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        int c_ = -1;                                                                      \
        MPI_Error_class(rc_, &c_);                                                        \
        CHECK(c_ == (cls), "%s gave class %d, expected %s (%d)", #call, c_, #cls, (cls)); \
    } while (0)

static int add_one(void) { return 0; }

static int self_calls;
static MPI_Comm self_comm;
static void on_self(MPI_Comm *c, int *code, ...) {
    (void)code;
    self_calls++;
    self_comm = *c;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "default error handler");
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x = 0, buf[4];
    MPI_Request rq;

    EXPECT(MPI_Send(&x, 1, MPI_INT, n, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(&x, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Recv(&x, 1, MPI_INT, n + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, -1, MPI_COMM_WORLD), MPI_ERR_TAG);
    /* Combined calls check both halves before posting either (a posted
     * receive beside a rejected send used to wait forever). */
    EXPECT(MPI_Sendrecv(&x, 1, MPI_INT, n, 0, buf, 1, MPI_INT, (rank + 1) % n, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Sendrecv(&x, 1, MPI_INT, rank, -2, buf, 1, MPI_INT, rank, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE), MPI_ERR_TAG);
    EXPECT(MPI_Sendrecv(&x, 1, 12345, rank, 0, buf, 1, MPI_INT, rank, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE), MPI_ERR_TYPE);
    EXPECT(MPI_Sendrecv(&x, 1, MPI_INT, rank, 0, buf, 1, MPI_INT, n + 1, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Sendrecv_replace(&x, 1, MPI_INT, -4, 0, (rank + 1) % n, 0, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Sendrecv_replace(&x, 1, MPI_INT, rank, 0, n, 0, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Isend(&x, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &rq), MPI_ERR_TAG);
    EXPECT(MPI_Recv(&x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TAG);
    EXPECT(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Send(&x, 1, 12345, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, 0, 999), MPI_ERR_COMM);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Send(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    EXPECT(MPI_Allreduce(buf, buf + 2, 1, MPI_INT, 4321, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(buf, buf + 2, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(buf, buf + 2, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Bcast(buf, 1, MPI_INT, n, MPI_COMM_WORLD), MPI_ERR_ROOT);
    EXPECT(MPI_Reduce(buf, buf + 1, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD), MPI_ERR_ROOT);
    rq = 4242;
    EXPECT(MPI_Wait(&rq, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    rq = 4242;
    EXPECT(MPI_Request_free(&rq), MPI_ERR_REQUEST);
    MPI_Group g;
    EXPECT(MPI_Group_size(777, &x), MPI_ERR_GROUP);
    MPI_Comm_group(MPI_COMM_WORLD, &g);
    int bad = n;
    MPI_Group g2;
    EXPECT(MPI_Group_incl(g, 1, &bad, &g2), MPI_ERR_RANK);
    EXPECT(MPI_Comm_size(MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
    EXPECT(MPI_Comm_split(MPI_COMM_WORLD, -3, 0, NULL), MPI_ERR_ARG);
    EXPECT(MPI_Type_contiguous(-2, MPI_INT, (MPI_Datatype *)buf), MPI_ERR_COUNT);
    EXPECT(MPI_Comm_free(&(MPI_Comm){MPI_COMM_WORLD}), MPI_ERR_COMM);
    EXPECT(MPI_Comm_set_errhandler(MPI_COMM_WORLD, 99), MPI_ERR_ARG);
    EXPECT(MPI_Init(&argc, &argv), MPI_ERR_OTHER);
    (void)add_one;

    /* Truncation, in a status and as a return code. */
    int big[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    MPI_Status st;
    MPI_Request r2;
    MPI_Irecv(buf, 2, MPI_INT, rank, 3, MPI_COMM_WORLD, &r2);
    MPI_Send(big, 8, MPI_INT, rank, 3, MPI_COMM_WORLD);
    EXPECT(MPI_Wait(&r2, &st), MPI_ERR_TRUNCATE);
    CHECK(st.MPI_ERROR == MPI_ERR_TRUNCATE && buf[1] == 2, "truncation status");
    MPI_Request rs[2];
    MPI_Irecv(buf, 2, MPI_INT, rank, 4, MPI_COMM_WORLD, &rs[0]);
    MPI_Irecv(buf + 2, 2, MPI_INT, rank, 5, MPI_COMM_WORLD, &rs[1]);
    MPI_Send(big, 8, MPI_INT, rank, 4, MPI_COMM_WORLD);
    MPI_Send(big, 1, MPI_INT, rank, 5, MPI_COMM_WORLD);
    MPI_Status sts[2];
    EXPECT(MPI_Waitall(2, rs, sts), MPI_ERR_IN_STATUS);
    CHECK(sts[0].MPI_ERROR == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS, "waitall statuses");

    /* Error strings. */
    char s[MPI_MAX_ERROR_STRING];
    int len;
    CHECK_RC(MPI_Error_string(MPI_ERR_RANK, s, &len));
    CHECK(len > 0 && (int)strlen(s) == len && strstr(s, "rank"), "error string '%s'", s);
    CHECK_RC(MPI_Error_string(MPI_ERR_TRUNCATE, s, &len));
    CHECK(strstr(s, "truncated") != NULL, "truncate string '%s'", s);

    /* An error of no object (a datatype call) goes to MPI_COMM_WORLD's
     * handler (MPI 3.1's rule) until the program sets MPI_COMM_SELF's,
     * then to that one (MPI 4.0's), as in MPICH. */
    MPI_Datatype nt;
    EXPECT(MPI_Type_contiguous(-1, MPI_INT, &nt), MPI_ERR_COUNT);
    MPI_Errhandler mine;
    CHECK_RC(MPI_Comm_create_errhandler(on_self, &mine));
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_SELF, mine));
    EXPECT(MPI_Type_contiguous(-1, MPI_INT, &nt), MPI_ERR_COUNT);
    CHECK(self_calls == 1 && self_comm == MPI_COMM_SELF, "MPI_COMM_SELF's handler: %d calls", self_calls);
    EXPECT(MPI_Send(&x, 1, MPI_INT, n, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    CHECK(self_calls == 1, "an error on MPI_COMM_WORLD is WORLD's");
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    MPI_Errhandler_free(&mine);

    int sum;
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == n * (n - 1) / 2, "job healthy after errors");
    MPI_Group_free(&g);
    pass("errors");
    MPI_Finalize();
    return 0;
}
