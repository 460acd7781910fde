/* One-sided communication: windows made by create, allocate and
 * create_dynamic; put, get, accumulate, get_accumulate, fetch_and_op,
 * compare_and_swap and the request-based calls; fence, post/start/
 * complete/wait, lock/unlock (exclusive and shared, lock_all), flushes;
 * shared windows with direct loads and stores; attributes, names,
 * errors. Passive-target operations complete while
 * the target computes without calling MPI. */
#include "check.h"
#include <string.h>
#include <unistd.h>
#include <time.h>

static int win_errors, deleted;
static int on_delete(MPI_Win w, int key, void *value, void *extra) {
    (void)w;
    (void)key;
    (void)extra;
    if (*(int *)value == 42) deleted++;
    return MPI_SUCCESS;
}
static void on_win_error(MPI_Win *w, int *code, ...) {
    (void)w;
    if (*code == MPI_ERR_OTHER) win_errors++;
}

/* Fence: each rank puts its rank into slot `rank` of everyone's window,
 * gets its right neighbour's slot 0, and accumulates into slot size. */
static void fence(int rank, int size) {
    int *mem = calloc((size_t)size + 1, sizeof(int));
    MPI_Win win;
    CHECK_RC(MPI_Win_create(mem, (MPI_Aint)(size + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_RC(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    int one = 1, mine = rank + 100, got = -1;
    for (int r = 0; r < size; r++) {
        CHECK_RC(MPI_Put(&mine, 1, MPI_INT, r, rank, 1, MPI_INT, win));
        CHECK_RC(MPI_Accumulate(&one, 1, MPI_INT, r, size, 1, MPI_INT, MPI_SUM, win));
    }
    CHECK_RC(MPI_Win_fence(0, win));
    for (int r = 0; r < size; r++) CHECK(mem[r] == r + 100, "fence: slot %d = %d", r, mem[r]);
    CHECK(mem[size] == size, "fence: the sum is %d", mem[size]);
    CHECK_RC(MPI_Get(&got, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(got == 100, "fence: got %d", got);
    /* A strided target type: every other int of the neighbour's window. */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int pair[2] = {-1, -1};
    CHECK_RC(MPI_Win_fence(0, win));
    if (size >= 3) CHECK_RC(MPI_Get(pair, 2, MPI_INT, (rank + 1) % size, 0, 1, every_other, win));
    CHECK_RC(MPI_Win_fence(0, win));
    if (size >= 3) CHECK(pair[0] == 100 && pair[1] == 102, "strided get: %d %d", pair[0], pair[1]);
    MPI_Type_free(&every_other);
    /* Errors return on this window: out of range, a bad lock type. */
    CHECK_RC(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK(MPI_Put(&one, 1, MPI_INT, 0, size + 1, 1, MPI_INT, win) == MPI_ERR_RMA_RANGE, "a put past the window");
    CHECK(MPI_Put(&one, 1, MPI_INT, size, 0, 1, MPI_INT, win) == MPI_ERR_RANK, "a put to no rank");
    CHECK(MPI_Win_lock(7, 0, 0, win) == MPI_ERR_LOCKTYPE, "a bad lock type");
    CHECK(MPI_Win_unlock(0, win) == MPI_ERR_RMA_SYNC, "an unlock without a lock");
    /* Attributes and names. */
    void *base;
    MPI_Aint *wsize;
    int *unit, *flavor, *model, flag;
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == mem, "WIN_BASE");
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag));
    CHECK(flag && *wsize == (MPI_Aint)(size + 1) * 4, "WIN_SIZE %ld", (long)*wsize);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag));
    CHECK(flag && *unit == 4, "WIN_DISP_UNIT %d", *unit);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_CREATE, "WIN_CREATE_FLAVOR %d", *flavor);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED, "WIN_MODEL %d", *model);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    CHECK_RC(MPI_Win_set_name(win, "slots"));
    CHECK_RC(MPI_Win_get_name(win, name, &len));
    CHECK(strcmp(name, "slots") == 0 && len == 5, "name '%s'", name);
    MPI_Group g;
    int gsize;
    CHECK_RC(MPI_Win_get_group(win, &g));
    MPI_Group_size(g, &gsize);
    CHECK(gsize == size, "group of %d", gsize);
    MPI_Group_free(&g);
    /* An attribute of the program's, deleted with the window. */
    int key, answer = 42, *seen;
    CHECK_RC(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, on_delete, &key, NULL));
    CHECK_RC(MPI_Win_set_attr(win, key, &answer));
    CHECK_RC(MPI_Win_get_attr(win, key, &seen, &flag));
    CHECK(flag && seen == &answer, "user attribute");
    /* Info and a handler of the program's, called by name. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "no_locks", "true");
    CHECK_RC(MPI_Win_set_info(win, info));
    MPI_Info_free(&info);
    CHECK_RC(MPI_Win_get_info(win, &info));
    char value[16];
    MPI_Info_get(info, "no_locks", sizeof value - 1, value, &flag);
    CHECK(flag && strcmp(value, "true") == 0, "win info");
    MPI_Info_free(&info);
    MPI_Errhandler eh;
    CHECK_RC(MPI_Win_create_errhandler(on_win_error, &eh));
    CHECK_RC(MPI_Win_set_errhandler(win, eh));
    CHECK_RC(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK(win_errors == 1, "the window's handler ran %d times", win_errors);
    MPI_Errhandler now;
    CHECK_RC(MPI_Win_get_errhandler(win, &now));
    CHECK(now == eh, "get_errhandler");
    MPI_Errhandler_free(&eh);
    CHECK_RC(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "free sets MPI_WIN_NULL");
    CHECK(deleted == 1, "the delete callback ran %d times", deleted);
    CHECK_RC(MPI_Win_free_keyval(&key));
    free(mem);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Passive target: rank 0 owns a counter and computes for a while without
 * calling MPI; everyone adds to it under an exclusive lock, 20 times,
 * and fetch_and_op's results are all distinct. Then a compare-and-swap
 * spin lock guards a read-modify-write of a second slot. */
static void passive(int rank, int size) {
    long *mem;
    MPI_Win win;
    CHECK_RC(MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    mem[0] = 0;
    mem[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        /* No MPI call for a while: the others' operations still complete. */
        double until = now() + 0.3;
        volatile double x = 0;
        while (now() < until) x += 1;
    }
    long one = 1, seen[20];
    for (int i = 0; i < 20; i++) {
        CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_RC(MPI_Fetch_and_op(&one, &seen[i], MPI_LONG, 0, 0, MPI_SUM, win));
        CHECK_RC(MPI_Win_unlock(0, win));
    }
    for (int i = 1; i < 20; i++) CHECK(seen[i] > seen[i - 1], "fetch_and_op went back: %ld then %ld", seen[i - 1], seen[i]);
    /* Slot 1 of rank 0 as a spin lock's counter; our own lock word is
     * slot 0 of the last rank (compare_and_swap 0 -> rank+1). */
    int last = size - 1, rounds = size >= 2 ? 5 : 0;
    for (int i = 0; i < rounds; i++) {
        long zero = 0, me = rank + 1, old = -1;
        CHECK_RC(MPI_Win_lock_all(0, win));
        do {
            CHECK_RC(MPI_Compare_and_swap(&me, &zero, &old, MPI_LONG, last, 1, win));
            CHECK_RC(MPI_Win_flush(last, win));
        } while (old != 0);
        long v = -1, inc = 1;
        CHECK_RC(MPI_Get(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, win));
        CHECK_RC(MPI_Win_flush(0, win));
        v += inc;
        CHECK_RC(MPI_Put(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, win));
        CHECK_RC(MPI_Win_flush(0, win));
        CHECK_RC(MPI_Compare_and_swap(&zero, &me, &old, MPI_LONG, last, 1, win));
        CHECK_RC(MPI_Win_unlock_all(win));
        CHECK(old == me, "the spin lock was %ld, not ours", old);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(mem[0] == 20L * size, "counter %ld, want %ld", mem[0], 20L * size);
        CHECK(mem[1] == (long)rounds * size, "guarded counter %ld, want %ld", mem[1], (long)rounds * size);
    }
    /* Shared locks and request-based calls. */
    long out = rank * 10, in = -1, res = -1;
    MPI_Request reqs[3];
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK_RC(MPI_Rput(&out, 1, MPI_LONG, rank, 0, 1, MPI_LONG, win, &reqs[0]));
    CHECK_RC(MPI_Win_flush(rank, win));
    CHECK_RC(MPI_Rget(&in, 1, MPI_LONG, rank, 0, 1, MPI_LONG, win, &reqs[1]));
    CHECK_RC(MPI_Rget_accumulate(&one, 1, MPI_LONG, &res, 1, MPI_LONG, rank, 0, 1, MPI_LONG, MPI_SUM, win, &reqs[2]));
    CHECK_RC(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
    CHECK_RC(MPI_Win_unlock(rank, win));
    CHECK(in == rank * 10 && res == rank * 10 && mem[0] == rank * 10 + 1, "requests: %ld %ld %ld", in, res, mem[0]);
    /* Raccumulate, then the local and global flushes. */
    MPI_Request acc;
    CHECK_RC(MPI_Win_lock_all(0, win));
    CHECK_RC(MPI_Raccumulate(&one, 1, MPI_LONG, rank, 0, 1, MPI_LONG, MPI_SUM, win, &acc));
    CHECK_RC(MPI_Win_flush_local(rank, win));
    CHECK_RC(MPI_Wait(&acc, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Win_flush_local_all(win));
    CHECK_RC(MPI_Win_flush_all(win));
    CHECK_RC(MPI_Win_unlock_all(win));
    CHECK(mem[0] == rank * 10 + 2, "raccumulate: %ld", mem[0]);
    /* Get_accumulate with MPI_NO_OP reads atomically. */
    CHECK_RC(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK_RC(MPI_Get_accumulate(NULL, 0, MPI_LONG, &res, 1, MPI_LONG, rank, 0, 1, MPI_LONG, MPI_NO_OP, win));
    CHECK_RC(MPI_Win_unlock(rank, win));
    CHECK(res == rank * 10 + 2, "no-op read %ld", res);
    CHECK_RC(MPI_Win_free(&win));
}

/* Post/start/complete/wait in a ring: each rank exposes its window to
 * its left neighbour, which puts its rank there. */
static void pscw(int rank, int size) {
    int slot = -1;
    MPI_Win win;
    CHECK_RC(MPI_Win_create(&slot, sizeof slot, sizeof slot, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Group world, left, right;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int l = (rank + size - 1) % size, r = (rank + 1) % size;
    MPI_Group_incl(world, 1, &l, &left);
    MPI_Group_incl(world, 1, &r, &right);
    for (int round = 0; round < 3; round++) {
        CHECK_RC(MPI_Win_post(left, 0, win));
        CHECK_RC(MPI_Win_start(right, 0, win));
        int v = rank * 10 + round;
        CHECK_RC(MPI_Put(&v, 1, MPI_INT, r, 0, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_complete(win));
        if (round == 2) {
            int done = 0;
            while (!done) CHECK_RC(MPI_Win_test(win, &done));
        } else {
            CHECK_RC(MPI_Win_wait(win));
        }
        CHECK(slot == l * 10 + round, "round %d: slot %d", round, slot);
    }
    MPI_Group_free(&left);
    MPI_Group_free(&right);
    MPI_Group_free(&world);
    CHECK_RC(MPI_Win_free(&win));
}

/* MPI_Win_test by the target after the origin completed and both passed
 * a barrier: the origin's notice was sent before its barrier, so the test
 * must see it (and not before the origin completes). Rank 0 is the origin
 * of every other rank. */
static void test_after_barrier(int rank, int size) {
    if (size < 2) return;
    int slot = -1;
    MPI_Win win;
    CHECK_RC(MPI_Win_create(&slot, sizeof slot, sizeof slot, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK(MPI_Win_f2c(MPI_Win_c2f(win)) == win, "MPI_Win_c2f and _f2c");
    MPI_Group world, peers;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0;
    if (rank == 0)
        MPI_Group_excl(world, 1, &zero, &peers);
    else
        MPI_Group_incl(world, 1, &zero, &peers);
    for (int round = 0; round < 20; round++) {
        if (rank == 0) {
            CHECK_RC(MPI_Win_start(peers, 0, win));
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK_RC(MPI_Win_complete(win));
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            CHECK_RC(MPI_Win_post(peers, 0, win));
            int done = -1;
            CHECK_RC(MPI_Win_test(win, &done));
            CHECK(!done, "round %d: MPI_Win_test true before the origin completed", round);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK_RC(MPI_Win_test(win, &done));
            CHECK(done, "round %d: MPI_Win_test false after the origin completed and a barrier", round);
        }
    }
    MPI_Group_free(&peers);
    MPI_Group_free(&world);
    CHECK_RC(MPI_Win_free(&win));
}

/* A dynamic window: each rank attaches a buffer, publishes its address,
 * and everyone writes into its right neighbour's. */
static void dynamic(int rank, int size) {
    MPI_Win win;
    CHECK_RC(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    double buf[4] = {0, 0, 0, 0};
    CHECK_RC(MPI_Win_attach(win, buf, sizeof buf));
    MPI_Aint mine, *addrs = malloc(sizeof(MPI_Aint) * size);
    MPI_Get_address(buf, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
    int r = (rank + 1) % size;
    double v[2] = {rank + 0.25, rank + 0.5};
    CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, r, 0, win));
    CHECK_RC(MPI_Put(v, 2, MPI_DOUBLE, r, addrs[r] + sizeof(double), 2, MPI_DOUBLE, win));
    CHECK_RC(MPI_Win_unlock(r, win));
    /* Past the attached region: the target refuses, the unlock says so. */
    CHECK_RC(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, r, 0, win));
    CHECK_RC(MPI_Put(v, 2, MPI_DOUBLE, r, addrs[r] + 3 * sizeof(double), 2, MPI_DOUBLE, win));
    CHECK(MPI_Win_unlock(r, win) == MPI_ERR_RMA_RANGE, "a put outside the attached memory");
    MPI_Barrier(MPI_COMM_WORLD);
    int l = (rank + size - 1) % size;
    CHECK(buf[0] == 0 && buf[1] == l + 0.25 && buf[2] == l + 0.5 && buf[3] == 0, "dynamic: %g %g %g %g", buf[0],
          buf[1], buf[2], buf[3]);
    CHECK_RC(MPI_Win_detach(win, buf));
    CHECK(MPI_Win_detach(win, buf) == MPI_ERR_RMA_ATTACH, "a second detach");
    CHECK_RC(MPI_Win_free(&win));
    free(addrs);
}

/* A shared window on the ranks of this host: everyone stores into its
 * own share directly, reads its neighbours' through shared_query, and
 * puts / gets (copies through the mapping) agree with the loads. */
static void shared(int rank) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int me, n;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &n);
    int *mine;
    MPI_Win win;
    /* Rank 1 of the node asks for nothing: a share may be empty. */
    MPI_Aint want = me == 1 ? 0 : 4 * sizeof(int);
    CHECK_RC(MPI_Win_allocate_shared(want, sizeof(int), MPI_INFO_NULL, node, &mine, &win));
    int flavor_ok, *flavor;
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flavor_ok));
    CHECK(flavor_ok && *flavor == MPI_WIN_FLAVOR_SHARED, "flavor %d", *flavor);
    CHECK_RC(MPI_Win_lock_all(0, win));
    if (want)
        for (int i = 0; i < 4; i++) mine[i] = me * 10 + i;
    CHECK_RC(MPI_Win_sync(win));
    MPI_Barrier(node);
    CHECK_RC(MPI_Win_sync(win));
    for (int r = 0; r < n; r++) {
        MPI_Aint size;
        int unit, *theirs;
        CHECK_RC(MPI_Win_shared_query(win, r, &size, &unit, &theirs));
        CHECK(unit == sizeof(int) && size == (r == 1 ? 0 : 16), "rank %d's share: %ld bytes, unit %d", r, (long)size, unit);
        if (size) {
            CHECK(theirs[3] == r * 10 + 3, "load from rank %d: %d", r, theirs[3]);
            int got = -1;
            CHECK_RC(MPI_Get(&got, 1, MPI_INT, r, 2, 1, MPI_INT, win));
            CHECK_RC(MPI_Win_flush(r, win));
            CHECK(got == r * 10 + 2, "get from rank %d: %d", r, got);
        }
    }
    /* The shares are one after the other: rank 0's pointer reaches rank
     * 2's share after its own 4 ints (rank 1's is empty). */
    if (n >= 3) {
        int *first;
        MPI_Aint size;
        int unit;
        CHECK_RC(MPI_Win_shared_query(win, MPI_PROC_NULL, &size, &unit, &first));
        CHECK(first[4] == 20, "contiguous shares: %d", first[4]);
    }
    CHECK_RC(MPI_Win_unlock_all(win));
    MPI_Barrier(node);
    /* A put into the next rank's share, seen by its loads. */
    int next = (me + 1) % n, v = 1000 + me;
    CHECK_RC(MPI_Win_fence(0, win));
    if (next != 1 || n == 1) CHECK_RC(MPI_Put(&v, 1, MPI_INT, next, 0, 1, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(0, win));
    int prev = (me + n - 1) % n;
    if (want && (me != 1 || n == 1)) CHECK(mine[0] == 1000 + prev, "put by rank %d: %d", prev, mine[0]);
    CHECK_RC(MPI_Win_free(&win));
    /* Not a shared window: shared_query says so. */
    CHECK_RC(MPI_Win_create(NULL, 0, 1, MPI_INFO_NULL, node, &win));
    CHECK_RC(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Aint size;
    int unit;
    void *p;
    CHECK(MPI_Win_shared_query(win, 0, &size, &unit, &p) == MPI_ERR_RMA_FLAVOR, "shared_query of a created window");
    CHECK_RC(MPI_Win_free(&win));
    MPI_Comm_free(&node);
}

/* Accumulates from every rank at once to one element under a shared
 * lock, with no other synchronization: fetch_and_op's results over all
 * ranks are 0 .. n-1 each once, and no update is lost (on one host the
 * origins update a window in shared memory with the CPU's atomics, the
 * agents with the same compare-and-swaps). */
static void atomics(int rank, int size) {
    enum { N = 300 };
    long *mem;
    MPI_Win win;
    CHECK_RC(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < 4; i++) mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    long one = 1, *got = malloc(N * sizeof(long));
    int ione = 1, iold = -1;
    double half = 0.5;
    CHECK_RC(MPI_Win_lock_all(0, win));
    for (int i = 0; i < N; i++) {
        CHECK_RC(MPI_Fetch_and_op(&one, &got[i], MPI_LONG, 0, 0, MPI_SUM, win));
        CHECK_RC(MPI_Accumulate(&ione, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
        CHECK_RC(MPI_Get_accumulate(&ione, 1, MPI_INT, &iold, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
        CHECK_RC(MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, 3, 1, MPI_DOUBLE, MPI_SUM, win));
        CHECK_RC(MPI_Win_flush(0, win));
    }
    /* Each rank takes slot 1 from 0 to its rank + 1 once, in turn. */
    long zero = 0, mine = rank + 1, seen = -1;
    do {
        long expect = rank;
        CHECK_RC(MPI_Compare_and_swap(&mine, &expect, &seen, MPI_LONG, 0, 1, win));
        CHECK_RC(MPI_Win_flush(0, win));
    } while (seen != rank);
    (void)zero;
    CHECK_RC(MPI_Win_unlock_all(win));
    long *all = rank == 0 ? malloc((size_t)size * N * sizeof(long)) : NULL;
    MPI_Gather(got, N, MPI_LONG, all, N, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        long total = (long)size * N;
        char *hit = calloc((size_t)total, 1);
        for (long i = 0; i < total; i++) {
            CHECK(all[i] >= 0 && all[i] < total && !hit[all[i]], "fetch_and_op gave %ld twice or out of range", all[i]);
            hit[all[i]] = 1;
        }
        CHECK(mem[0] == total, "counter %ld, want %ld", mem[0], total);
        int *ints = (int *)&mem[2];
        CHECK(ints[0] == 2 * total && ints[1] == 0, "int counter %d, want %ld", ints[0], 2 * total);
        double *d = (double *)&mem[3];
        CHECK(*d == 0.5 * total, "double sum %g, want %g", *d, 0.5 * total);
        CHECK(mem[1] == size, "compare-and-swap chain ended at %ld, want %d", mem[1], size);
        free(hit);
        free(all);
    }
    free(got);
    CHECK_RC(MPI_Win_free(&win));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fence(rank, size);
    passive(rank, size);
    atomics(rank, size);
    pscw(rank, size);
    test_after_barrier(rank, size);
    dynamic(rank, size);
    shared(rank);
    pass("rma.c");
    MPI_Finalize();
    return 0;
}
