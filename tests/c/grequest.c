/* Generalized requests as the standard (and mpi4py's test_grequest) has
 * them: MPI_Cancel calls the cancel function with whether the request is
 * complete; the query function gives the status when the program takes it
 * (MPI_Wait, MPI_Test), the free function runs then (or at MPI_Request_free,
 * or at completion of a request freed before), after the last cancel; an
 * error of a callback is the error of the call that ran it. */
#include "check.h"

struct ctx {
    int query_calls, free_calls, cancel_calls, last_complete, fail_query, fail_cancel;
    int freed; /* set by free: the extra state is gone after */
};

static int query(void *extra, MPI_Status *st) {
    struct ctx *c = extra;
    CHECK(!c->freed, "query after free");
    c->query_calls++;
    if (c->fail_query) return MPI_ERR_BUFFER;
    st->MPI_SOURCE = 3;
    st->MPI_TAG = 7;
    MPI_Status_set_cancelled(st, 0);
    MPI_Status_set_elements(st, MPI_BYTE, 12);
    return MPI_SUCCESS;
}

static int free_fn(void *extra) {
    struct ctx *c = extra;
    CHECK(!c->freed, "free twice");
    c->free_calls++;
    c->freed = 1;
    return MPI_SUCCESS;
}

static int cancel(void *extra, int complete) {
    struct ctx *c = extra;
    CHECK(!c->freed, "cancel after free");
    c->cancel_calls++;
    c->last_complete = complete;
    return c->fail_cancel ? MPI_ERR_PENDING : MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    struct ctx c = {0};
    MPI_Request r;
    MPI_Status st;
    int flag = -1;
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &c, &r));
    CHECK_RC(MPI_Test(&r, &flag, &st));
    CHECK(flag == 0 && c.query_calls == 0 && c.free_calls == 0, "incomplete: flag %d query %d free %d", flag,
          c.query_calls, c.free_calls);
    CHECK_RC(MPI_Cancel(&r));
    CHECK(c.cancel_calls == 1 && c.last_complete == 0, "cancel before completion: %d calls, complete %d",
          c.cancel_calls, c.last_complete);
    CHECK_RC(MPI_Grequest_complete(r));
    CHECK(c.query_calls == 0 && c.free_calls == 0, "complete ran query %d free %d", c.query_calls, c.free_calls);
    CHECK_RC(MPI_Cancel(&r));
    CHECK(c.cancel_calls == 2 && c.last_complete == 1, "cancel after completion: %d calls, complete %d",
          c.cancel_calls, c.last_complete);
    CHECK_RC(MPI_Wait(&r, &st));
    int n = -1;
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == 3 && st.MPI_TAG == 7 && n == 12,
          "wait: request %d source %d tag %d count %d", (int)r, st.MPI_SOURCE, st.MPI_TAG, n);
    CHECK(c.query_calls == 1 && c.free_calls == 1, "after wait: query %d free %d", c.query_calls, c.free_calls);

    /* A failing query: the wait returns its error. */
    struct ctx q = {.fail_query = 1};
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &q, &r));
    CHECK_RC(MPI_Grequest_complete(r));
    int rc = MPI_Wait(&r, &st);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER && q.free_calls == 1, "failing query: class %d, free %d", cls, q.free_calls);

    /* A failing cancel: MPI_Cancel returns its error. */
    struct ctx k = {.fail_cancel = 1};
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &k, &r));
    rc = MPI_Cancel(&r);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_PENDING, "failing cancel: class %d", cls);
    CHECK_RC(MPI_Grequest_complete(r));
    CHECK_RC(MPI_Test(&r, &flag, &st));
    CHECK(flag == 1 && k.free_calls == 1, "test after completion: flag %d free %d", flag, k.free_calls);

    /* Freed before completion: free runs at completion, query never. */
    struct ctx e = {0};
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &e, &r));
    MPI_Request keep = r;
    CHECK_RC(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL && e.free_calls == 0, "free before completion ran free %d", e.free_calls);
    CHECK_RC(MPI_Grequest_complete(keep));
    CHECK(e.free_calls == 1 && e.query_calls == 0, "completion of a freed request: free %d query %d",
          e.free_calls, e.query_calls);

    /* Freed after completion: free runs at the free. */
    struct ctx a = {0};
    CHECK_RC(MPI_Grequest_start(query, free_fn, NULL, &a, &r));
    CHECK_RC(MPI_Grequest_complete(r));
    CHECK_RC(MPI_Cancel(&r)); /* no cancel function: nothing to do */
    CHECK_RC(MPI_Request_free(&r));
    CHECK(a.free_calls == 1 && a.query_calls == 0, "free after completion: free %d query %d", a.free_calls,
          a.query_calls);

    /* Waitall over two generalized requests. */
    struct ctx w1 = {0}, w2 = {0};
    MPI_Request rs[2];
    MPI_Status sts[2];
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &w1, &rs[0]));
    CHECK_RC(MPI_Grequest_start(query, free_fn, cancel, &w2, &rs[1]));
    CHECK_RC(MPI_Grequest_complete(rs[1]));
    CHECK_RC(MPI_Grequest_complete(rs[0]));
    CHECK_RC(MPI_Waitall(2, rs, sts));
    CHECK(sts[0].MPI_TAG == 7 && sts[1].MPI_SOURCE == 3 && w1.free_calls == 1 && w2.free_calls == 1,
          "waitall: tag %d source %d free %d %d", sts[0].MPI_TAG, sts[1].MPI_SOURCE, w1.free_calls, w2.free_calls);
    pass("grequest");
    MPI_Finalize();
    return 0;
}
