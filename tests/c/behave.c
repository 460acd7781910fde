/* One program, many behaviours, chosen by argv[1], for the runtime tests:
 * how mpiexec reports failures, aborts, exit codes and signals, and
 * whether ranks idle without burning CPU. */
#include "check.h"
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* the whole process: user and progress threads */
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* CPU seconds used so far by process `pid` (utime + stime of /proc/PID/stat). */
static double cpu_seconds_of(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int victim = size - 1;
    if (!strcmp(mode, "args")) {
        printf("rank %d args:", rank);
        for (int i = 2; i < argc; i++) printf(" [%s]", argv[i]);
        printf(" env=%s\n", getenv("BEHAVE_VAR") ? getenv("BEHAVE_VAR") : "(unset)");
    } else if (!strcmp(mode, "kill")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) raise(SIGKILL);
        int x;
        MPI_Recv(&x, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never arrives */
    } else if (!strcmp(mode, "exit7")) {
        if (rank == victim) exit(7);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "nofinalize")) {
        if (rank == victim) return 0;
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "abort")) {
        if (rank == victim) {
            printf("about to abort\n");
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "fatal")) {
        int x = 0;
        if (rank == victim) MPI_Send(&x, 1, MPI_INT, size + 10, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "hang")) {
        int x;
        MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (!strcmp(mode, "idle")) {
        /* Every rank but 0 blocks in a receive for 1.5 s; the CPU it uses
         * meanwhile must be a small fraction of that (no spinning). */
        double c0 = cpu_seconds(), p0 = cpu_seconds_of(getppid());
        int x = 0;
        if (rank == 0) {
            usleep(1500000);
            for (int r = 1; r < size; r++) MPI_Send(&x, 1, MPI_INT, r, 0, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        double used = cpu_seconds() - c0, most;
        MPI_Reduce(&used, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("idle cpu max %.3f s\n", most);
        CHECK(rank != 0 || most < 0.3, "a blocked rank used %.3f s of CPU in 1.5 s", most);
        /* mpiexec (this rank's parent) sleeps too. */
        double parent = cpu_seconds_of(getppid()) - p0;
        if (rank == 0) printf("idle mpiexec cpu %.3f s\n", parent);
        CHECK(rank != 0 || (p0 >= 0 && parent < 0.3), "mpiexec used %.3f s of CPU in 1.5 s", parent);
    }
    MPI_Finalize();
    if (rank == 0) printf("OK behave\n");
    return 0;
}
