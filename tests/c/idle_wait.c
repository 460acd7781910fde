/* Ranks that wait sleep: while rank 0 sleeps 1.5 s, every other rank waits
 * in a barrier, in a broadcast and in a receive (ANY_SOURCE too), and may
 * use only a little CPU time meanwhile (its spin budget, a few wake-ups).
 * Ranks outnumber cores: a waiting rank that stays awake takes the core
 * from the ones with work (1024 ranks on 2 cores were all awake, each
 * waking every millisecond in a shared-memory barrier). Run with the
 * collectives in shared memory and by messages. */
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>
#include "check.h"

/* CPU seconds (user + system) of this process so far. */
static double cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* The CPU time the waiting ranks spend while rank 0 sleeps before `what`. */
static void idle(int rank, int size, const char *name, int what)
{
    int x = 7, got = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double before = cpu();
    if (rank == 0) usleep(1500 * 1000);
    switch (what) {
    case 0:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case 1:
        MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
        CHECK(x == 7, "bcast gave %d", x);
        break;
    default:
        if (rank == 0) {
            for (int r = 1; r < size; r++) MPI_Send(&x, 1, MPI_INT, r, 5, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&got, 1, MPI_INT, what == 2 ? 0 : MPI_ANY_SOURCE, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            CHECK(got == 7, "received %d", got);
        }
    }
    double used = cpu() - before;
    /* Asleep: its spin budget and a few wake-ups, about 1 ms; awake (a
     * shared-memory barrier that woke every millisecond) 47 ms at 8 ranks. */
    if (rank > 0) CHECK(used < 0.02, "%s: %.3f s of CPU while waiting 1.5 s", name, used);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    idle(rank, size, "barrier", 0);
    idle(rank, size, "bcast", 1);
    idle(rank, size, "recv", 2);
    idle(rank, size, "recv any", 3);
    pass("idle_wait");
    MPI_Finalize();
    return 0;
}
