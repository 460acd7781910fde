/* Shared by the C test programs: a failed check names the file, line and
 * values, then aborts the job with exit code 3 so the harness sees it. */
#ifndef CHECK_H
#define CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            int r_ = -1;                                                     \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                              \
            fprintf(stderr, "FAIL rank %d %s:%d: ", r_, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            fflush(stderr);                                                  \
            MPI_Abort(MPI_COMM_WORLD, 3);                                    \
        }                                                                    \
    } while (0)

#define CHECK_RC(call) do { int rc_ = (call); CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_); } while (0)

static inline void pass(const char *name) {
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) printf("OK %s\n", name);
}
#endif
