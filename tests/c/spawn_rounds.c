/* Spawning again after earlier children ended (mpi4py's test_util_pool
 * does it: a pool of workers started, shut down and started again): every
 * round the parents spawn two children, which connect back to them through
 * a port one child opens (ports reach spawned processes), sum over both
 * inter-communicators, disconnect and end; the parents wait until they
 * are gone and spawn the next round; the last round spawns its two
 * children with MPI_Comm_spawn_multiple, one per command, and each child
 * checks its MPI_APPNUM. Each process prints "round ok <parent|child>
 * <round>". */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 3
#define CHILDREN 2

static void child(MPI_Comm parent, int argc, char **argv) {
    int round = -1, rank, size, *appnum, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == CHILDREN, "a world of %d children", size);
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag));
    int want = argc > 2 ? atoi(argv[2]) : 0;
    CHECK(flag && *appnum == want, "MPI_APPNUM %d, command %d", flag ? *appnum : -1, want);
    CHECK_RC(MPI_Bcast(&round, 1, MPI_INT, 0, parent));
    char port[MPI_MAX_PORT_NAME] = "";
    if (rank == 0) {
        CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_RC(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 7, parent));
    }
    MPI_Comm back;
    CHECK_RC(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &back));
    int psize, one = 1, sum = 0;
    MPI_Comm_remote_size(parent, &psize);
    CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, back));
    CHECK(sum == psize, "round %d: sum %d over the accepted communicator, %d parents", round, sum, psize);
    if (rank == 0) CHECK_RC(MPI_Close_port(port));
    CHECK_RC(MPI_Comm_disconnect(&back));
    CHECK_RC(MPI_Comm_disconnect(&parent));
    printf("round ok child %d\n", round);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        child(parent, argc, argv);
        MPI_Finalize();
        return 0;
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm inter, back;
        char *args[] = {"child", NULL};
        if (round < ROUNDS - 1) {
            CHECK_RC(MPI_Comm_spawn(argv[0], args, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                    MPI_ERRCODES_IGNORE));
        } else {
            char *a0[] = {"child", "0", NULL}, *a1[] = {"child", "1", NULL};
            char **argvs[] = {a0, a1};
            char *cmds[] = {argv[0], argv[0]};
            int procs[] = {1, 1}, codes[2] = {-1, -1};
            MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
            CHECK_RC(MPI_Comm_spawn_multiple(2, cmds, argvs, procs, infos, 0, MPI_COMM_WORLD, &inter, codes));
            CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS, "codes %d %d", codes[0], codes[1]);
        }
        int r = round;
        CHECK_RC(MPI_Bcast(&r, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        char port[MPI_MAX_PORT_NAME] = "";
        if (rank == 0) CHECK_RC(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 7, inter, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &back));
        int one = 1, sum = 0, rsize;
        CHECK_RC(MPI_Comm_remote_size(back, &rsize));
        CHECK(rsize == CHILDREN, "connected to %d children", rsize);
        CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, back));
        CHECK(sum == CHILDREN, "round %d: sum %d over the connected communicator", round, sum);
        CHECK_RC(MPI_Comm_disconnect(&back));
        CHECK_RC(MPI_Comm_disconnect(&inter));
        /* Let the children end before the next round starts. */
        usleep(300 * 1000);
        MPI_Barrier(MPI_COMM_WORLD);
        printf("round ok parent %d\n", round);
    }
    MPI_Finalize();
    return 0;
}
