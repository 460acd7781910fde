/* MPI_THREAD_MULTIPLE: two threads per rank communicate at the same time,
 * each on its own communicator (and one pair on the same communicator with
 * different tags), with blocking and non-blocking calls and collectives;
 * MPI_Is_thread_main is true in the thread that initialized MPI only. */
#include "check.h"
#include <pthread.h>

#define ROUNDS 300

typedef struct { int id; MPI_Comm comm; int rank, size; } job;

static void *worker(void *arg) {
    job *j = arg;
    int is_main = -1;
    MPI_Is_thread_main(&is_main);
    CHECK(is_main == 0, "MPI_Is_thread_main in thread %d: %d", j->id, is_main);
    int right = (j->rank + 1) % j->size, left = (j->rank + j->size - 1) % j->size;
    for (int r = 0; r < ROUNDS; r++) {
        int out[2] = {j->rank, r * 10 + j->id}, in[2] = {-1, -1};
        MPI_Request rq;
        MPI_Irecv(in, 2, MPI_INT, left, 7 + j->id, MPI_COMM_WORLD, &rq);
        MPI_Send(out, 2, MPI_INT, right, 7 + j->id, MPI_COMM_WORLD);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        CHECK(in[0] == left && in[1] == r * 10 + j->id, "thread %d round %d: %d %d", j->id, r, in[0], in[1]);
        int s;
        MPI_Allreduce(&r, &s, 1, MPI_INT, MPI_SUM, j->comm);
        CHECK(s == r * j->size, "thread %d allreduce", j->id);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    int is_main = -1;
    MPI_Is_thread_main(&is_main);
    CHECK(is_main == 1, "MPI_Is_thread_main in the main thread: %d", is_main);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        jobs[i].id = i;
        jobs[i].rank = rank;
        jobs[i].size = size;
        MPI_Comm_dup(MPI_COMM_WORLD, &jobs[i].comm);
    }
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) MPI_Comm_free(&jobs[i].comm);
    pass("threads");
    MPI_Finalize();
    return 0;
}
