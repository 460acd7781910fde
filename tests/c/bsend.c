/* Buffered sends: MPI_Bsend / MPI_Ibsend complete without a matching
 * receive, within the attached buffer; running out of buffer space is
 * MPI_ERR_BUFFER; MPI_Buffer_detach waits for the messages to leave. */
#include "check.h"
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int n = 100000; /* larger than the eager limit */
    int bufsize = 2 * (n * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    char *attached = malloc(bufsize);
    CHECK_RC(MPI_Buffer_attach(attached, bufsize));
    int *a = malloc(sizeof(int) * n), *b = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) a[i] = i ^ rank;
    /* Both sends complete before any receive is posted (it would deadlock otherwise). */
    CHECK_RC(MPI_Bsend(a, n, MPI_INT, right, 1, MPI_COMM_WORLD));
    MPI_Request rq;
    CHECK_RC(MPI_Ibsend(a, n, MPI_INT, right, 2, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) a[i] = -1; /* the copies were taken */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (size > 1) { /* a send to oneself is delivered at once and holds no buffer space */
        int rc = MPI_Bsend(a, n, MPI_INT, right, 3, MPI_COMM_WORLD);
        CHECK(rc == MPI_ERR_BUFFER, "bsend beyond the buffer: rc=%d", rc);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Barrier(MPI_COMM_WORLD); /* no receive is posted before every rank checked */
    for (int tag = 1; tag <= 2; tag++) {
        MPI_Recv(b, n, MPI_INT, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) CHECK(b[i] == (i ^ left), "bsend tag %d data %d", tag, i);
    }
    void *back;
    int backsize;
    CHECK_RC(MPI_Buffer_detach(&back, &backsize));
    CHECK(back == attached && backsize == bufsize, "detach returns the buffer");
    free(attached);
    free(a);
    free(b);
    pass("bsend");
    MPI_Finalize();
    return 0;
}
