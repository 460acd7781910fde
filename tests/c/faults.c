/* Rank 1 dies of a fault after MPI_Init, in the main thread ("main") or in
 * a thread of its own named "worker" ("thread"); rank 0 waits in a
 * receive that never completes. Checks that a rank's fatal signal is
 * reported with where it happened (the signal, the address, the thread and
 * a backtrace) and that mpiexec still sees the signal. */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Null, but the compiler may not assume it (it drops a store it can prove
 * goes to address 0). */
int *volatile nowhere;

static void *fault(void *named)
{
    /* The thread names itself: named by its creator, it could fault first. */
    if (named)
        pthread_setname_np(pthread_self(), "worker");
    *(volatile int *)nowhere = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) {
        if (argc > 1 && !strcmp(argv[1], "thread")) {
            pthread_t t;
            pthread_create(&t, NULL, fault, &t);
            pthread_join(t, NULL);
        } else {
            fault(NULL);
        }
    }
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
