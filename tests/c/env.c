/* Environment queries: Initialized/Finalized, thread level, Wtime/Wtick,
 * processor name, version. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int flag = 1;
    MPI_Initialized(&flag);
    CHECK(!flag, "initialized before MPI_Init");
    int provided = -1;
    CHECK_RC(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided >= MPI_THREAD_FUNNELED, "provided %d", provided);
    MPI_Initialized(&flag);
    CHECK(flag, "initialized after MPI_Init");
    int q;
    MPI_Query_thread(&q);
    CHECK(q >= MPI_THREAD_FUNNELED, "query thread");
    double t0 = MPI_Wtime(), tick = MPI_Wtick();
    CHECK(tick > 0 && tick < 1e-3, "wtick %g", tick);
    double t1 = MPI_Wtime();
    CHECK(t1 >= t0, "wtime monotonic");
    char name[MPI_MAX_PROCESSOR_NAME];
    int len;
    CHECK_RC(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && (int)strlen(name) == len, "processor name");
    int v, sv;
    MPI_Get_version(&v, &sv);
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 4 && sv == 0, "version %d.%d", v, sv);
    pass("env");
    MPI_Finalized(&flag);
    CHECK(!flag, "finalized too early");
    MPI_Finalize();
    MPI_Finalized(&flag);
    if (!flag) { fprintf(stderr, "FAIL: not finalized\n"); return 1; }
    return 0;
}
