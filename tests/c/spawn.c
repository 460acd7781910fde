/* MPI_Comm_spawn: the parents (every rank of MPI_COMM_WORLD) spawn
 * CHILDREN copies of this program with an argument; the children see
 * their own world, their parents through MPI_Comm_get_parent, exchange
 * values over the inter-communicator (point-to-point and a collective),
 * merge it, and everyone sums over the merged communicator. With
 * "respawn" (under --with-ft ulfm) the last parent dies first and the
 * survivors shrink and spawn its replacement, as ULFM codes do; the
 * merged communicator then has the original size. Every process prints
 * "spawn ok <parent|child> <rank in merged>" at the end. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHILDREN 2
static int me;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%d: line %d: ", me, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

int main(int argc, char **argv) {
    MPI_Comm parent, inter, merged;
    int size, rank, rsize, n, sum, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    int respawn = argc > 1 && !strcmp(argv[1], "respawn");
    int child = argc > 1 && !strcmp(argv[argc - 1], "child");

    if (parent == MPI_COMM_NULL) {
        CHECK(!child, "a child without a parent");
        MPI_Comm from = MPI_COMM_WORLD;
        int want = CHILDREN;
        if (respawn) {
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Barrier(MPI_COMM_WORLD);
            if (me == size - 1) raise(SIGKILL);
            int rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &from);
            CHECK(rc == MPI_SUCCESS, "shrink: %d", rc);
            MPI_Comm_size(from, &n);
            CHECK(n == size - 1, "shrunk to %d", n);
            want = size - n;
        }
        char *args[] = {respawn ? "respawn" : "plain", "child", NULL};
        int codes[CHILDREN];
        int rc = MPI_Comm_spawn(argv[0], args, want, MPI_INFO_NULL, 0, from, &inter, codes);
        CHECK(rc == MPI_SUCCESS && codes[0] == MPI_SUCCESS, "spawn: %d", rc);
        MPI_Comm_remote_size(inter, &rsize);
        CHECK(rsize == want, "%d children, %d asked for", rsize, want);
        MPI_Comm_rank(from, &rank);
        /* Parent r sends r + 100 to child r % want; the children answer. */
        x = rank + 100;
        MPI_Send(&x, 1, MPI_INT, rank % want, 5, inter);
        int total = 0;
        MPI_Allreduce(&x, &total, 1, MPI_INT, MPI_SUM, inter);
        CHECK(total == 1000 * want, "allreduce over the inter-communicator gave %d", total);
        MPI_Intercomm_merge(inter, 0, &merged);
        if (from != MPI_COMM_WORLD) MPI_Comm_free(&from);
    } else {
        CHECK(child, "a parent with a parent");
        int psize;
        MPI_Comm_remote_size(parent, &psize);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        CHECK(rank == me && me < size, "child rank %d of %d", me, size);
        /* Messages from the parents r with r % size == me. */
        for (int r = me; r < psize; r += size) {
            MPI_Recv(&x, 1, MPI_INT, r, 5, parent, MPI_STATUS_IGNORE);
            CHECK(x == r + 100, "child %d got %d from parent %d", me, x, r);
        }
        x = 1000;
        int total = 0;
        MPI_Allreduce(&x, &total, 1, MPI_INT, MPI_SUM, parent);
        int want = 0;
        for (int r = 0; r < psize; r++) want += r + 100;
        CHECK(total == want, "allreduce over the inter-communicator gave %d, not %d", total, want);
        MPI_Intercomm_merge(parent, 1, &merged);
        inter = parent;
    }
    MPI_Comm_rank(merged, &rank);
    MPI_Comm_size(merged, &n);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == n * (n - 1) / 2, "allreduce over the merged communicator: %d", sum);
    if (!child) {
        /* The parents alive, then the children. */
        int parents = respawn ? size - 1 : size;
        CHECK(n == parents + (respawn ? 1 : CHILDREN) && rank < parents, "merged size %d, rank %d", n, rank);
    } else {
        CHECK(rank >= n - size, "a child's merged rank %d of %d", rank, n);
    }
    printf("spawn ok %s %d\n", child ? "child" : "parent", rank);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Finalize();
    return 0;
}
