/* Point-to-point basics: blocking and non-blocking sends in every mode,
 * status fields, Get_count / Get_elements, MPI_PROC_NULL, probes,
 * Sendrecv(_replace), wildcards, zero-length messages. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;

    /* Ring shift in each send mode; to oneself when size == 1. */
    for (int mode = 0; mode < 3; mode++) {
        double out[5], in[5];
        for (int i = 0; i < 5; i++) out[i] = rank * 10 + i + mode * 0.5;
        MPI_Request rq;
        CHECK_RC(MPI_Irecv(in, 5, MPI_DOUBLE, left, 100 + mode, MPI_COMM_WORLD, &rq));
        if (mode == 0) CHECK_RC(MPI_Send(out, 5, MPI_DOUBLE, right, 100, MPI_COMM_WORLD));
        if (mode == 1) CHECK_RC(MPI_Ssend(out, 5, MPI_DOUBLE, right, 101, MPI_COMM_WORLD));
        if (mode == 2) CHECK_RC(MPI_Rsend(out, 5, MPI_DOUBLE, right, 102, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&rq, &st));
        CHECK(rq == MPI_REQUEST_NULL, "request not reset");
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 100 + mode, "status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
        int n;
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        CHECK(n == 5, "count %d", n);
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(n == 10, "count as int %d", n);
        for (int i = 0; i < 5; i++) CHECK(in[i] == left * 10 + i + mode * 0.5, "mode %d in[%d]=%g", mode, i, in[i]);
    }

    /* Non-blocking sends of each kind. */
    {
        int out[3] = {rank, rank + 1, rank + 2}, in[3][3];
        MPI_Request rq[6];
        for (int k = 0; k < 3; k++) MPI_Irecv(in[k], 3, MPI_INT, left, 200 + k, MPI_COMM_WORLD, &rq[k]);
        MPI_Isend(out, 3, MPI_INT, right, 200, MPI_COMM_WORLD, &rq[3]);
        MPI_Issend(out, 3, MPI_INT, right, 201, MPI_COMM_WORLD, &rq[4]);
        MPI_Irsend(out, 3, MPI_INT, right, 202, MPI_COMM_WORLD, &rq[5]);
        MPI_Status sts[6];
        CHECK_RC(MPI_Waitall(6, rq, sts));
        for (int k = 0; k < 3; k++) {
            CHECK(sts[k].MPI_SOURCE == left && sts[k].MPI_TAG == 200 + k, "waitall status %d", k);
            for (int i = 0; i < 3; i++) CHECK(in[k][i] == left + i, "isend data");
        }
    }

    /* MPI_PROC_NULL: completes at once with source PROC_NULL, count 0. */
    {
        int x = 7;
        CHECK_RC(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
        CHECK_RC(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
        int n = -1;
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0 && x == 7, "proc_null status");
    }

    /* Sendrecv and Sendrecv_replace around the ring. */
    {
        long a = rank * 3, b = -1;
        CHECK_RC(MPI_Sendrecv(&a, 1, MPI_LONG, right, 5, &b, 1, MPI_LONG, left, 5, MPI_COMM_WORLD, &st));
        CHECK(b == left * 3, "sendrecv %ld", b);
        int v[4] = {rank, rank, rank, rank};
        CHECK_RC(MPI_Sendrecv_replace(v, 4, MPI_INT, right, 6, left, 6, MPI_COMM_WORLD, &st));
        for (int i = 0; i < 4; i++) CHECK(v[i] == left, "sendrecv_replace");
    }

    /* Probe / Iprobe, then receive exactly the probed size; zero-length. */
    {
        char msg[64];
        int len = 10 + rank;
        memset(msg, 'a' + rank % 26, sizeof msg);
        MPI_Request rq;
        MPI_Isend(msg, len, MPI_CHAR, right, 9, MPI_COMM_WORLD, &rq);
        CHECK_RC(MPI_Probe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st));
        int n;
        MPI_Get_count(&st, MPI_CHAR, &n);
        CHECK(st.MPI_SOURCE == left && n == 10 + left, "probe %d %d", st.MPI_SOURCE, n);
        int flag = 0;
        while (!flag) MPI_Iprobe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        CHECK(st.MPI_TAG == 9, "iprobe tag");
        char in[64];
        MPI_Recv(in, n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
        CHECK(in[0] == 'a' + left % 26 && in[n - 1] == 'a' + left % 26, "probed data");
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "iprobe found a message that was never sent");

        MPI_Isend(NULL, 0, MPI_INT, right, 10, MPI_COMM_WORLD, &rq);
        MPI_Recv(NULL, 0, MPI_INT, left, 10, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(n == 0, "zero-length count %d", n);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }

    /* Get_elements with a struct type, and a count that is not whole. */
    {
        struct { double d; int i; } pair = {1.5, rank}, got;
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {0, 8};
        MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, t;
        MPI_Type_create_struct(2, bl, disp, types, &t);
        MPI_Type_commit(&t);
        MPI_Sendrecv(&pair, 1, t, right, 11, &got, 1, t, left, 11, MPI_COMM_WORLD, &st);
        int n, e;
        MPI_Count ex;
        MPI_Get_count(&st, t, &n);
        MPI_Get_elements(&st, t, &e);
        MPI_Get_elements_x(&st, t, &ex);
        CHECK(n == 1 && e == 2 && ex == 2 && got.d == 1.5 && got.i == left, "struct n=%d e=%d ex=%lld", n, e,
              (long long)ex);
        MPI_Sendrecv(&pair, 12, MPI_BYTE, right, 12, &got, 1, t, left, 12, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, t, &n);
        CHECK(n == 1, "bytes into struct");
        MPI_Sendrecv(&pair, 8, MPI_BYTE, right, 13, &got, 1, t, left, 13, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, t, &n);
        MPI_Get_elements(&st, t, &e);
        MPI_Get_elements_x(&st, t, &ex);
        CHECK(n == MPI_UNDEFINED && e == 1 && ex == 1, "partial struct n=%d e=%d ex=%lld", n, e, (long long)ex);
        MPI_Type_free(&t);
    }

    /* A second wildcard receive: MPI_ANY_SOURCE + MPI_ANY_TAG. */
    {
        int x = rank, y = -1;
        MPI_Request rq;
        MPI_Isend(&x, 1, MPI_INT, right, 77, MPI_COMM_WORLD, &rq);
        MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        CHECK(y == left && st.MPI_SOURCE == left && st.MPI_TAG == 77, "any/any");
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }

    /* A handle freed and made again names the new object at once, though
     * the quick paths remember the last communicator and datatype each
     * thread used: a communicator whose ranks run the other way, a
     * contiguous type twice as long, under the handles just freed. */
    for (int round = 0; round < 2; round++) {
        MPI_Comm c;
        MPI_Datatype t;
        int key = round == 0 ? rank : size - 1 - rank;
        CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, 0, key, &c));
        CHECK_RC(MPI_Type_contiguous(2 + 2 * round, MPI_INT, &t));
        CHECK_RC(MPI_Type_commit(&t));
        int crank, csize;
        MPI_Comm_rank(c, &crank);
        MPI_Comm_size(c, &csize);
        int to = (crank + 1) % csize, from = (crank + csize - 1) % csize;
        int out[4] = {rank, rank + 1, rank + 2, rank + 3}, in[4] = {-1, -1, -1, -1};
        for (int rep = 0; rep < 3; rep++) {
            MPI_Request rq;
            CHECK_RC(MPI_Irecv(in, 1, t, from, 8, c, &rq));
            CHECK_RC(MPI_Send(out, 1, t, to, 8, c));
            CHECK_RC(MPI_Wait(&rq, &st));
            /* The world rank of `from` in this round's order. */
            int wfrom = round == 0 ? from : size - 1 - from;
            int want = 2 + 2 * round;
            for (int i = 0; i < 4; i++)
                CHECK(in[i] == (i < want ? wfrom + i : -1), "round %d in[%d]=%d (from world %d)", round, i, in[i], wfrom);
            int n;
            MPI_Get_count(&st, MPI_INT, &n);
            CHECK(n == want && st.MPI_SOURCE == from, "round %d count %d source %d", round, n, st.MPI_SOURCE);
        }
        CHECK_RC(MPI_Type_free(&t));
        CHECK_RC(MPI_Comm_free(&c));
    }

    pass("p2p");
    MPI_Finalize();
    return 0;
}
