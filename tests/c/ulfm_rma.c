/* Windows and files under `mpiexec --with-ft ulfm` when a member dies:
 * the survivors' fence and collective write fail with
 * MPIX_ERR_PROC_FAILED, freeing the window and closing the file release
 * them (returning the error), and a window and a file on the shrunk
 * communicator work. The last rank dies (a real SIGKILL) at the start of
 * the second epoch, holding a lock on rank 0's window, which rank 1 then
 * gets (a dead member's locks are released for it). Every survivor
 * prints "ulfm rma ok <rank>". */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: line %d: ", me, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static int class_of(int rc) {
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

/* A ring of puts between two fences over `comm`; returns the fence's
 * code. `slot` gets the left neighbour's rank. */
static int ring(MPI_Win win, MPI_Comm comm, int *slot) {
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    *slot = -1;
    if ((rc = MPI_Win_fence(0, win))) return rc;
    MPI_Put(&rank, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win);
    return MPI_Win_fence(0, win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 3, "run with at least 3 ranks");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *dir = getenv("FILE_TEST_DIR");
    CHECK(dir != NULL, "FILE_TEST_DIR is not set");
    char path[600];
    snprintf(path, sizeof path, "%s/ulfm.bin", dir);
    int slot = -1, rc;
    MPI_Win win;
    CHECK(MPI_Win_create(&slot, sizeof slot, sizeof slot, MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS, "create");
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS,
          "open");
    /* The first epoch: everyone alive. */
    rc = ring(win, MPI_COMM_WORLD, &slot);
    CHECK(rc == MPI_SUCCESS && slot == (me + size - 1) % size, "first epoch: rc %d, slot %d", rc, slot);
    /* The last rank dies holding an exclusive lock on rank 0's window. */
    int dead = size - 1;
    if (me == dead) CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS, "lock");
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == dead) raise(SIGKILL);
    /* Its lock is released for it once its death is known: rank 1 gets
     * the lock instead of waiting forever. */
    if (me == 1) {
        int seen = 0;
        rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        CHECK(rc == MPI_SUCCESS, "lock after the holder died: %d", rc);
        CHECK(MPI_Get(&seen, 1, MPI_INT, 0, 0, 1, MPI_INT, win) == MPI_SUCCESS, "get");
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS, "unlock");
        /* Rank 0 may have cleared its slot for the next epoch already. */
        CHECK(seen == size - 1 || seen == -1, "rank 0's slot: %d", seen);
    }
    /* The fence cannot complete: a member is dead. */
    rc = ring(win, MPI_COMM_WORLD, &slot);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "fence with a dead member: %d", rc);
    rc = MPI_Win_free(&win);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED && win == MPI_WIN_NULL, "free: %d, handle %d", rc, (int)win);
    /* A collective write fails the same way; closing releases the file. */
    rc = MPI_File_write_at_all(fh, me * sizeof(int), &me, 1, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "write_at_all with a dead member: %d", rc);
    rc = MPI_File_close(&fh);
    CHECK(rc != MPI_SUCCESS && fh == MPI_FILE_NULL, "close: %d", rc);
    /* The survivors shrink and go on with a new window and a new file. */
    MPI_Comm alive;
    CHECK(MPIX_Comm_shrink(MPI_COMM_WORLD, &alive) == MPI_SUCCESS, "shrink");
    int n, r;
    MPI_Comm_size(alive, &n);
    MPI_Comm_rank(alive, &r);
    CHECK(n == size - 1, "shrunk to %d", n);
    CHECK(MPI_Win_create(&slot, sizeof slot, sizeof slot, MPI_INFO_NULL, alive, &win) == MPI_SUCCESS, "new window");
    rc = ring(win, alive, &slot);
    CHECK(rc == MPI_SUCCESS && slot == (r + n - 1) % n, "ring on the survivors: rc %d, slot %d", rc, slot);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS, "free");
    snprintf(path, sizeof path, "%s/ulfm2.bin", dir);
    CHECK(MPI_File_open(alive, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                        &fh) == MPI_SUCCESS,
          "open on the survivors");
    CHECK(MPI_File_write_at_all(fh, r * sizeof(int), &r, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS, "write");
    int back = -1, other = (r + 1) % n;
    MPI_Barrier(alive);
    CHECK(MPI_File_read_at_all(fh, other * sizeof(int), &back, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
              back == other,
          "read back %d", back);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
    MPI_Comm_free(&alive);
    printf("ulfm rma ok %d\n", me);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
