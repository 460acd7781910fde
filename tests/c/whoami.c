/* Says where a rank runs: its program's tag (argv[1]), its directory, a
 * variable (argv[2], "-" for none) and the CPUs it may use, after an
 * allreduce that shows every program's ranks are one job. */
#include "check.h"
#include <string.h>
#include <unistd.h>

static void cpus(char *out, size_t n) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[512];
    snprintf(out, n, "?");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(out, n, "%s", v);
        }
    }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size - 1) / 2, "sum %d at size %d", sum, size);
    char cwd[1024] = "?", cpu[256];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "?");
    cpus(cpu, sizeof cpu);
    const char *var = argc > 2 && strcmp(argv[2], "-") != 0 ? getenv(argv[2]) : NULL;
    printf("rank %d of %d: %s cwd=%s var=%s cpus=%s\n", rank, size,
           argc > 1 ? argv[1] : "-", cwd, var ? var : "(unset)", cpu);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
