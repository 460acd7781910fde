/* Large messages: sizes around the eager limit and 8+ MiB messages sent
 * before the receiver posts (a late receiver), checked byte by byte. Also
 * a non-contiguous large receive (rendezvous into a staging buffer). */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(long i, int from) { return (unsigned char)(i * 31 + from * 7 + (i >> 12)); }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long sizes[] = {0, 1, 65535, 65536, 65537, 262144, 262145, 1 << 20, (9 << 20) + 3};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        long n = sizes[k];
        unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
        for (long i = 0; i < n; i++) out[i] = pattern(i, rank);
        memset(in, 0, n + 1);
        MPI_Request rq;
        MPI_Isend(out, (int)n, MPI_BYTE, right, (int)k, MPI_COMM_WORLD, &rq);
        if (n > (1 << 20)) usleep(200000); /* the receiver is late */
        MPI_Status st;
        CHECK_RC(MPI_Recv(in, (int)n, MPI_BYTE, left, (int)k, MPI_COMM_WORLD, &st));
        int cnt;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK(cnt == n, "size %ld: count %d", n, cnt);
        for (long i = 0; i < n; i++) CHECK(in[i] == pattern(i, left), "size %ld: byte %ld", n, i);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        /* The send is complete: its buffer is the program's again. (A
         * transport still reading it, to send lost bytes again, would
         * deliver these.) */
        memset(out, 0xEE, n);
        free(out);
        free(in);
    }
    /* Every other double of a 2 x 600k array: a strided receive. */
    {
        int n = 600000;
        double *out = malloc(sizeof(double) * n), *in = malloc(sizeof(double) * 2 * n);
        for (int i = 0; i < n; i++) out[i] = rank * 1e6 + i;
        for (int i = 0; i < 2 * n; i++) in[i] = -1;
        MPI_Datatype every_other;
        MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Sendrecv(out, n, MPI_DOUBLE, right, 50, in, 1, every_other, left, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) {
            CHECK(in[2 * i] == left * 1e6 + i, "strided %d", i);
            CHECK(in[2 * i + 1] == -1, "hole %d overwritten", i);
        }
        MPI_Type_free(&every_other);
        free(out);
        free(in);
    }
    /* Truncation: a long message into a short buffer is an error in the status. */
    if (size >= 2) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int big[100000], small[10];
        for (int i = 0; i < 100000; i++) big[i] = i;
        if (rank == 0) {
            MPI_Send(big, 100000, MPI_INT, 1, 60, MPI_COMM_WORLD);
            MPI_Send(big, 20, MPI_INT, 1, 61, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Status st;
            int rc = MPI_Recv(small, 10, MPI_INT, 0, 60, MPI_COMM_WORLD, &st);
            CHECK(rc == MPI_ERR_TRUNCATE, "rendezvous truncation rc=%d", rc);
            rc = MPI_Recv(small, 10, MPI_INT, 0, 61, MPI_COMM_WORLD, &st);
            CHECK(rc == MPI_ERR_TRUNCATE && st.MPI_ERROR == MPI_ERR_TRUNCATE, "eager truncation rc=%d", rc);
            CHECK(small[9] == 9, "truncated prefix delivered");
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    pass("large");
    MPI_Finalize();
    return 0;
}
