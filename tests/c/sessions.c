/* MPI 4.0 sessions, as a library uses them: a session, its process sets
 * and their groups, a communicator made from the WORLD set, and a second
 * session after the first is closed. With SESSIONS_WORLD=1 the world
 * model runs around them (MPI_Init first; MPI_Finalize while a session is
 * still open, which then keeps MPI up until it closes); without, the
 * program never calls MPI_Init and MPI ends as it exits. */
#include "check.h"
#include <string.h>

static int handler_calls, handler_code;
static MPI_Session handler_session;

static void on_error(MPI_Session *s, int *code, ...) {
    handler_calls++;
    handler_session = *s;
    handler_code = *code;
}

/* One session from start to end; returns this process's WORLD rank. */
static int library_round(int round, int *size_out) {
    MPI_Info want;
    MPI_Info_create(&want);
    MPI_Info_set(want, "thread_level", "MPI_THREAD_MULTIPLE");
    MPI_Session s = MPI_SESSION_NULL;
    CHECK_RC(MPI_Session_init(want, MPI_ERRORS_RETURN, &s));
    MPI_Info_free(&want);
    CHECK(s != MPI_SESSION_NULL, "round %d: a session handle", round);
    CHECK(MPI_Session_c2f(s) == s && MPI_Session_f2c(MPI_Session_c2f(s)) == s, "c2f/f2c");

    MPI_Info got;
    char value[64];
    int flag = 0;
    CHECK_RC(MPI_Session_get_info(s, &got));
    MPI_Info_get(got, "thread_level", sizeof value - 1, value, &flag);
    CHECK(flag && strcmp(value, "MPI_THREAD_MULTIPLE") == 0, "thread_level %s", flag ? value : "(none)");
    MPI_Info_free(&got);

    /* The process sets: their names, lengths and sizes. */
    int n = 0, world_size = -1;
    CHECK_RC(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK(n == 2, "%d process sets", n);
    int seen_world = 0, seen_self = 0;
    for (int i = 0; i < n; i++) {
        int len = 0;
        CHECK_RC(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        char name[MPI_MAX_PSET_NAME_LEN];
        CHECK(len > 1 && len <= MPI_MAX_PSET_NAME_LEN, "length %d", len);
        CHECK_RC(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) + 1 == len, "'%s' and length %d", name, len);
        MPI_Info pi;
        CHECK_RC(MPI_Session_get_pset_info(s, name, &pi));
        MPI_Info_get(pi, "mpi_size", sizeof value - 1, value, &flag);
        CHECK(flag, "mpi_size of %s", name);
        MPI_Info_free(&pi);
        MPI_Group g;
        int gsize;
        CHECK_RC(MPI_Group_from_session_pset(s, name, &g));
        MPI_Group_size(g, &gsize);
        CHECK(gsize == atoi(value), "%s: group of %d, mpi_size %s", name, gsize, value);
        if (strcmp(name, "mpi://WORLD") == 0) {
            seen_world = 1;
            world_size = gsize;
        }
        if (strcmp(name, "mpi://SELF") == 0) {
            seen_self = 1;
            CHECK(gsize == 1, "SELF has %d", gsize);
        }
        MPI_Group_free(&g);
    }
    CHECK(seen_world && seen_self, "WORLD %d SELF %d", seen_world, seen_self);

    /* A communicator of the WORLD set: a reduction over it. */
    MPI_Group wg;
    CHECK_RC(MPI_Group_from_session_pset(s, "mpi://WORLD", &wg));
    MPI_Comm lib;
    CHECK_RC(MPI_Comm_create_from_group(wg, "org.mpistages.test.sessions", MPI_INFO_NULL, MPI_ERRORS_RETURN, &lib));
    MPI_Group_free(&wg);
    /* A process outside every group asks with the empty one. */
    MPI_Comm none;
    CHECK_RC(MPI_Comm_create_from_group(MPI_GROUP_EMPTY, "org.mpistages.test.none", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                        &none));
    CHECK(none == MPI_COMM_NULL, "a communicator of the empty group is MPI_COMM_NULL");
    int rank, size, sum = -1;
    MPI_Comm_rank(lib, &rank);
    MPI_Comm_size(lib, &size);
    CHECK(size == world_size, "communicator of %d, set of %d", size, world_size);
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, lib));
    CHECK(sum == size * (size - 1) / 2, "round %d: sum %d", round, sum);

    /* Errors go to the session's handler: MPI_ERRORS_RETURN, then one of
     * the program's. */
    MPI_Group g;
    CHECK(MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g) == MPI_ERR_ARG, "an unknown set");
    int len = 0;
    CHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, n, &len, NULL) == MPI_ERR_ARG, "set %d of %d", n, n);
    MPI_Errhandler eh, back;
    CHECK_RC(MPI_Session_create_errhandler(on_error, &eh));
    CHECK_RC(MPI_Session_set_errhandler(s, eh));
    CHECK_RC(MPI_Session_get_errhandler(s, &back));
    CHECK(back == eh, "get_errhandler %d, set %d", back, eh);
    handler_calls = 0;
    CHECK(MPI_Session_get_pset_info(s, "mpi://NOWHERE", &got) == MPI_ERR_ARG, "pset_info of an unknown set");
    CHECK(handler_calls == 1 && handler_session == s && handler_code == MPI_ERR_ARG, "handler: %d calls, session %d, code %d",
          handler_calls, handler_session, handler_code);
    CHECK_RC(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler: %d calls, code %d", handler_calls, handler_code);
    MPI_Errhandler_free(&eh);
    /* Not a session: an error of no object (MPI_COMM_SELF's handler once
     * set, as mpi4py does). */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    CHECK(MPI_Group_from_session_pset(MPI_SESSION_NULL, "mpi://WORLD", &g) == MPI_ERR_SESSION, "MPI_SESSION_NULL");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);

    MPI_Comm_free(&lib);
    CHECK_RC(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL, "finalize makes the handle NULL");
    *size_out = size;
    return rank;
}

int main(int argc, char **argv) {
    int world = getenv("SESSIONS_WORLD") != NULL;
    int flag = -1;
    MPI_Initialized(&flag);
    CHECK(!flag, "initialized before anything");
    if (world) MPI_Init(&argc, &argv);
    int size, rank = library_round(0, &size);
    MPI_Initialized(&flag);
    CHECK(flag == world, "MPI_Initialized %d after a session (world model %d)", flag, world);
    /* A session after the last one closed: MPI is still up. */
    CHECK(library_round(1, &size) == rank, "the same rank again");

    if (world) {
        /* MPI_Finalize while a session is open: the session goes on. */
        MPI_Session s;
        CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
        MPI_Finalize();
        MPI_Finalized(&flag);
        CHECK(flag, "MPI_Finalized after MPI_Finalize");
        MPI_Group wg;
        MPI_Comm lib;
        CHECK_RC(MPI_Group_from_session_pset(s, "mpi://WORLD", &wg));
        CHECK_RC(MPI_Comm_create_from_group(wg, "org.mpistages.test.after", MPI_INFO_NULL, MPI_ERRORS_RETURN, &lib));
        int one = 1, n = 0;
        CHECK_RC(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, lib));
        CHECK(n == size, "%d ranks after MPI_Finalize, want %d", n, size);
        MPI_Comm_free(&lib);
        MPI_Group_free(&wg);
        CHECK_RC(MPI_Session_finalize(&s));
    } else {
        MPI_Finalized(&flag);
        CHECK(!flag, "MPI_Finalized without the world model");
    }
    if (rank == 0) printf("OK sessions.c\n");
    return 0;
}
