/* Receives posted before their messages arrive: over shared memory a small
 * message is matched by its header and copied straight into the posted
 * buffer ("matching in place"). Whatever path a message takes, MPI's rules
 * hold: posting order decides between a source's and a wildcard receive,
 * an earlier unexpected message is matched first, a short buffer reports
 * MPI_ERR_TRUNCATE, a synchronous send completes once matched, and a
 * non-contiguous receive gets its elements where they belong. Ranks pair
 * up (0 with 1, 2 with 3, ...); an odd last rank only joins the barriers. */
#include "check.h"
#include <string.h>

#define K 64

static int other(int rank, int size) {
    int peer = rank ^ 1;
    return peer < size ? peer : MPI_PROC_NULL;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int peer = other(rank, size);
    int sender = rank % 2 == 0;
    MPI_Status st;

    /* 1: posting order between a source's receive and wildcard ones. */
    int a = 0, b = 0, c = 0;
    MPI_Request r[3];
    if (peer != MPI_PROC_NULL && !sender) {
        MPI_Irecv(&a, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &r[1]);
        MPI_Irecv(&c, 1, MPI_INT, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &r[2]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        for (int v = 1; v <= 3; v++)
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, peer, 5, MPI_COMM_WORLD));
    } else if (peer != MPI_PROC_NULL) {
        CHECK_RC(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
        CHECK(a == 1 && b == 2 && c == 3, "posting order: got %d %d %d", a, b, c);
    }

    /* 2: an unexpected message is matched before a later one that finds
     * its receive posted. */
    int x = 0, y = 0;
    if (peer != MPI_PROC_NULL && sender) {
        int v = 10;
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, peer, 7, MPI_COMM_WORLD));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && !sender) {
        /* The first message is here (or on its way) before the receives. */
        MPI_Irecv(&x, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&y, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, &r[1]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        int v = 11;
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, peer, 7, MPI_COMM_WORLD));
    } else if (peer != MPI_PROC_NULL) {
        CHECK_RC(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(x == 10 && y == 11, "unexpected first: got %d %d", x, y);
    }

    /* 3: a buffer too short: MPI_ERR_TRUNCATE, and the next message is
     * whole. */
    int small = 0, next = 0;
    if (peer != MPI_PROC_NULL && !sender) {
        MPI_Irecv(&small, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&next, 1, MPI_INT, peer, 9, MPI_COMM_WORLD, &r[1]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        int two[2] = {21, 22}, v = 23;
        CHECK_RC(MPI_Send(two, 2, MPI_INT, peer, 8, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, peer, 9, MPI_COMM_WORLD));
    } else if (peer != MPI_PROC_NULL) {
        int rc = MPI_Wait(&r[0], &st);
        int cls = -1;
        MPI_Error_class(rc == MPI_SUCCESS ? st.MPI_ERROR : rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "short buffer: error class %d (rc %d)", cls, rc);
        CHECK_RC(MPI_Wait(&r[1], &st));
        CHECK(next == 23, "after a truncation: got %d", next);
    }

    /* 4: a synchronous send to a posted receive completes. */
    if (peer != MPI_PROC_NULL && !sender) {
        MPI_Irecv(&a, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &r[0]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        int v = 31;
        CHECK_RC(MPI_Ssend(&v, 1, MPI_INT, peer, 3, MPI_COMM_WORLD));
    } else if (peer != MPI_PROC_NULL) {
        CHECK_RC(MPI_Wait(&r[0], &st));
        CHECK(a == 31 && st.MPI_SOURCE == peer && st.MPI_TAG == 3, "ssend: got %d from %d tag %d", a,
              st.MPI_SOURCE, st.MPI_TAG);
    }

    /* 5: a strided receive: every other int of the buffer. */
    int strided[8];
    MPI_Datatype every_other;
    MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (int i = 0; i < 8; i++) strided[i] = -1;
    if (peer != MPI_PROC_NULL && !sender) {
        MPI_Irecv(strided, 1, every_other, peer, 4, MPI_COMM_WORLD, &r[0]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        int four[4] = {41, 42, 43, 44};
        CHECK_RC(MPI_Send(four, 4, MPI_INT, peer, 4, MPI_COMM_WORLD));
    } else if (peer != MPI_PROC_NULL) {
        CHECK_RC(MPI_Wait(&r[0], &st));
        for (int i = 0; i < 8; i++) {
            int want = i % 2 == 0 ? 41 + i / 2 : -1;
            CHECK(strided[i] == want, "strided[%d] = %d, want %d", i, strided[i], want);
        }
    }
    MPI_Type_free(&every_other);

    /* 6: a window of receives with mixed tags, posted first, filled by a
     * stream in another order: each gets the message its tag names, and
     * the count and status are right. */
    int got[K];
    MPI_Request w[K];
    if (peer != MPI_PROC_NULL && !sender) {
        for (int i = 0; i < K; i++) {
            got[i] = -1;
            MPI_Irecv(&got[i], 1, MPI_INT, peer, 100 + i, MPI_COMM_WORLD, &w[i]);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer != MPI_PROC_NULL && sender) {
        for (int i = K - 1; i >= 0; i--) {
            int v = 1000 + i;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, peer, 100 + i, MPI_COMM_WORLD));
        }
    } else if (peer != MPI_PROC_NULL) {
        MPI_Status sts[K];
        CHECK_RC(MPI_Waitall(K, w, sts));
        for (int i = 0; i < K; i++) {
            int n = -1;
            MPI_Get_count(&sts[i], MPI_INT, &n);
            CHECK(got[i] == 1000 + i && sts[i].MPI_TAG == 100 + i && n == 1,
                  "window %d: got %d tag %d count %d", i, got[i], sts[i].MPI_TAG, n);
        }
    }

    pass("placed");
    MPI_Finalize();
    return 0;
}
