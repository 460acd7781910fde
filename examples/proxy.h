/* The driver the proxy applications (hydro3d, md) share: one source runs
 * under every `mpiexec --recovery` mode.
 *
 * The application body runs as the restart point of MPIX_Reinit:
 *   set-up (local: mesh / lattice, buffers) -> MPI set-up (communicators and
 *   set-up phases that communicate) -> protect the state ->
 *   attempt(fault epoch): restore the state if the epoch is > 0, else set
 *   the initial conditions; iterate, checkpointing every K iterations.
 * - stages: an MPI call returns MPIX_TRY_RELOAD on the live ranks; they
 *   call MPIX_Checkpoint_read and make a new attempt from the fault epoch,
 *   keeping their set-up. The replacement runs main from the start, but
 *   its MPI state is restored in MPI_Init: it skips the MPI set-up (its
 *   results are in the protected state, communicator handles included).
 * - reinit: the live ranks jump back into MPIX_Reinit and run the restart
 *   point again (REINITED): set-up included, since their MPI state is that
 *   of MPI_Init again. The replacement runs main (RESTARTED).
 * - cpr: every rank starts again (RESTARTED) with the fault epoch of the
 *   last committed checkpoint.
 * - ulfm: nothing restarts. The driver checkpoints the protected regions
 *   itself (a copy in memory and a file per rank, committed with
 *   MPIX_Comm_agree). When an MPI call fails, the survivors revoke the
 *   application's communicator, shrink it, spawn one process per dead
 *   rank, merge and reorder into a communicator of the old size and order
 *   (`proxy_world`), and roll back: survivors from their memory copy, a
 *   respawned rank from its predecessor's file. The application uses
 *   `proxy_world` where it would use MPI_COMM_WORLD.
 * Every rank that comes back from a failure prints, on stderr,
 *   NAME: rank R back at iteration I at unix time T (data load L ms)
 * when it is about to iterate again, and every rank prints at the end
 *   NAME: rank R: C ms of S s in MPIX_Checkpoint_write
 * (S counted from its start or relaunch); `mpistages-bench recovery` reads
 * both.
 *
 * Compiled with -DPLAIN the driver makes no MPIX call at all (the
 * non-resilient build for overhead measurements, which builds against any
 * MPI: bench/transports runs it on Open MPI and MPICH too). */
#ifndef PROXY_H
#define PROXY_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* The application's communicator of every rank: MPI_COMM_WORLD, or under
 * ULFM the one the survivors and the respawned ranks make after a failure. */
static MPI_Comm proxy_world = MPI_COMM_WORLD;

#ifdef PLAIN
/* Never called in the plain build (nothing is protected), but the
 * application's protect() still names it: a no-op for MPIs without it. */
#define MPIX_Protect(id, buf, count, type) ((void)(id), (void)(buf), (void)(count), (void)(type), MPI_SUCCESS)
#else
#include <mpi-ext.h>
#include <unistd.h>

static int proxy_mode = MPIX_RECOVERY_NONE;

/* Under ULFM the driver keeps the protected regions itself. */
#define PROXY_REGIONS 32
static struct {
    char *buf;
    size_t bytes;
} proxy_regions[PROXY_REGIONS];

/* Records each region (its size: the state a restore brings back); under
 * the other modes MPIX_Protect keeps it too. */
static int proxy_protect(int id, void *buf, MPI_Count count, MPI_Datatype type)
{
    int bytes = 0;
    MPI_Type_size(type, &bytes);
    if (id < 0 || id >= PROXY_REGIONS || count < 0) return MPI_ERR_ARG;
    proxy_regions[id].buf = buf;
    proxy_regions[id].bytes = (size_t)count * (size_t)bytes;
    if (proxy_mode != MPIX_RECOVERY_ULFM) return (MPIX_Protect)(id, buf, count, type);
    return MPI_SUCCESS;
}
#define MPIX_Protect proxy_protect
#endif

struct proxy {
    const char *name;
    int iters; /* iterations to run */
    int every; /* checkpoint every `every` iterations (0: never) */
    /* The application; each returns an MPI error code. */
    int (*setup)(void);             /* the local set-up phase (may run again) */
    int (*setup_mpi)(void);         /* MPI objects and communicating set-up */
    int (*protect)(void);           /* MPIX_Protect the state */
    int (*initial)(void);           /* the initial conditions */
    int (*step)(int iter);          /* one iteration */
    int *iter;                      /* the next iteration, in the protected state */
    MPI_Comm *comm;                 /* the communicator it computes on (ULFM revokes it) */
    /* ULFM's shrinking recovery (optional): load the state of the
     * checkpoint of iteration `iter`, which `writers` ranks wrote, into the
     * new decomposition. */
    int (*reload)(int iter, int writers);
};

static struct proxy *proxy_app;

/* Frees `old` and returns `bytes` of zeroed memory (set-up may run again
 * after a Reinit jump); aborts the job when memory is out. */
static void *proxy_alloc(void *old, size_t bytes)
{
    free(old);
    void *m = calloc(1, bytes ? bytes : 1);
    if (!m) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return m;
}

/* -m MB: this much more protected state per rank (`proxy_ballast`). */
static int proxy_state_mb;

/* The proxies' options: -s SIZE -i ITERS -k EVERY -m MB; 0 on success. An
 * odd option or a missing value is an error (nothing runs then). */
static int proxy_options(int argc, char **argv, const char *name, int *size, int *iters, int *every)
{
    for (int a = 1; a < argc; a += 2) {
        int *to = !strcmp(argv[a], "-s")   ? size
                  : !strcmp(argv[a], "-i") ? iters
                  : !strcmp(argv[a], "-k") ? every
                  : !strcmp(argv[a], "-m") ? &proxy_state_mb
                                           : NULL;
        if (to == every && a + 1 < argc && !strcmp(argv[a + 1], "auto")) {
            *every = -1; /* MPIX_Checkpoint_needed decides */
            continue;
        }
        if (!to || a + 1 >= argc || atoi(argv[a + 1]) < 0) {
            fprintf(stderr, "%s: bad option %s (options: -s SIZE -i ITERS -k EVERY|auto -m MB)\n", name, argv[a]);
            return -1;
        }
        *to = atoi(argv[a + 1]);
    }
    return 0;
}
static int proxy_back; /* this process is coming back from a failure */

/* The ballast of -m MB: state the application does not compute with but
 * must get back, as a larger code's would be. Each iteration writes the
 * iteration into the first word of every 4 KiB page (every page changes,
 * cheaply); the rest is a pattern of the rank. After a restore every page
 * must hold the restored iteration and the pattern. */
static unsigned long long *proxy_ballast;
static size_t proxy_ballast_words;
#define PROXY_PAGE_WORDS 512

static unsigned long long proxy_pattern(int rank, size_t i)
{
    return (unsigned long long)rank * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
}

static void proxy_ballast_fill(int rank)
{
    size_t words = (size_t)proxy_state_mb << 17;
    free(proxy_ballast);
    proxy_ballast = words ? malloc(words * sizeof *proxy_ballast) : NULL;
    proxy_ballast_words = proxy_ballast ? words : 0;
    for (size_t i = 0; i < proxy_ballast_words; i++) proxy_ballast[i] = i % PROXY_PAGE_WORDS ? proxy_pattern(rank, i) : 0;
}

static void proxy_ballast_step(int iter)
{
    for (size_t i = 0; i < proxy_ballast_words; i += PROXY_PAGE_WORDS) proxy_ballast[i] = (unsigned long long)iter;
}

static int proxy_rank(void);

/* The application's set-up, with a new ballast. */
static int proxy_setup(struct proxy *p)
{
    int rc = p->setup();
    proxy_ballast_fill(proxy_rank());
    return rc;
}

#ifndef PLAIN
/* The application's protected state, and the ballast (the last region). */
static int proxy_protect_all(struct proxy *p)
{
    int rc = p->protect();
    if (rc == MPI_SUCCESS && proxy_ballast_words)
        rc = MPIX_Protect(31, proxy_ballast, (MPI_Count)(proxy_ballast_words * sizeof *proxy_ballast), MPI_BYTE);
    return rc;
}
#endif

/* Whether the ballast is what iteration `iter` of rank `rank` left. */
static int proxy_ballast_ok(int rank, int iter)
{
    for (size_t i = 0; i < proxy_ballast_words; i++) {
        unsigned long long want = i % PROXY_PAGE_WORDS ? proxy_pattern(rank, i) : (unsigned long long)iter;
        if (proxy_ballast[i] != want) return 0;
    }
    return 1;
}
#ifndef PLAIN
static double proxy_start;  /* when this process started the application */
static double proxy_ckpt_s; /* time spent in MPIX_Checkpoint_write */
#endif

static double proxy_unix_time(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static int proxy_rank(void)
{
    int r = 0;
    MPI_Comm_rank(proxy_world, &r);
    return r;
}

static void proxy_fail(const char *what, int code)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    fprintf(stderr, "%s: rank %d: %s: %s\n", proxy_app->name, proxy_rank(), what, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#ifndef PLAIN
/* ULFM: the checkpoint the ranks committed last (its iteration, 0: none),
 * its copy in memory, and the file a respawned rank reads it from. */
static int proxy_committed;
/* The size of the world that wrote it; a shrink's stale files (of the
 * checkpoint before it, by that many writers), removed by rank 0 once a
 * newer checkpoint is committed; the recovery this driver makes. */
static int proxy_ckpt_size, proxy_stale_iter = -1, proxy_stale_writers, proxy_shrinking;
static char *proxy_copy, *proxy_next;
static size_t proxy_copy_len;
static int proxy_argc;
static char **proxy_argv;

static size_t proxy_state_bytes(void)
{
    size_t n = 0;
    for (int i = 0; i < PROXY_REGIONS; i++) n += proxy_regions[i].bytes;
    return n;
}

/* `DIR/NAME-JOB-RANK.ITER`: node-local (tmpfs) unless PROXY_ULFM_DIR says. */
static void proxy_ckpt_path(char *out, size_t len, int rank, int iter)
{
    const char *dir = getenv("PROXY_ULFM_DIR"), *job = getenv("MPISTAGES_JOB_ID");
    snprintf(out, len, "%s/%s-%s-%d.%d", dir ? dir : "/dev/shm", proxy_app->name, job ? job : "0", rank, iter);
}

/* After a shrink, rank 0 removes the files of the checkpoint it rolled
 * back to, every rank having read them and committed a newer one (or
 * finished). */
static void proxy_remove_stale(void)
{
    if (proxy_stale_iter < 0 || proxy_rank() != 0) return;
    for (int w = 0; w < proxy_stale_writers; w++) {
        char path[4096];
        proxy_ckpt_path(path, sizeof path, w, proxy_stale_iter);
        unlink(path);
    }
    proxy_stale_iter = -1;
}

/* Copies the regions to memory and to this rank's file, then commits the
 * checkpoint of iteration `iter` with an agreement among the ranks. */
static int proxy_ulfm_checkpoint(int iter)
{
    size_t n = proxy_state_bytes(), at = 0;
    char path[4096], old[4096];
    proxy_next = realloc(proxy_next, n ? n : 1);
    if (!proxy_next) return MPI_ERR_NO_MEM;
    for (int i = 0; i < PROXY_REGIONS; i++) {
        memcpy(proxy_next + at, proxy_regions[i].buf, proxy_regions[i].bytes);
        at += proxy_regions[i].bytes;
    }
    proxy_ckpt_path(path, sizeof path, proxy_rank(), iter);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(proxy_next, 1, n, f) == n;
    if (f && fclose(f)) ok = 0;
    int rc = MPIX_Comm_agree(proxy_world, &ok);
    if (rc != MPI_SUCCESS) return rc;
    if (!ok) {
        fprintf(stderr, "%s: rank %d: a checkpoint file could not be written (%s)\n", proxy_app->name, proxy_rank(),
                path);
        return MPI_ERR_IO;
    }
    char *t = proxy_copy;
    proxy_copy = proxy_next;
    proxy_next = t;
    proxy_copy_len = n;
    if (proxy_committed > 0) {
        proxy_ckpt_path(old, sizeof old, proxy_rank(), proxy_committed);
        unlink(old);
    }
    proxy_committed = iter;
    MPI_Comm_size(proxy_world, &proxy_ckpt_size);
    proxy_remove_stale();
    return MPI_SUCCESS;
}

/* Back to the checkpoint of iteration `iter`: from memory, or (a respawned
 * rank) from its predecessor's file. */
static int proxy_ulfm_load(int iter)
{
    size_t n = proxy_state_bytes(), at = 0;
    char *from = proxy_copy;
    if (proxy_committed != iter || proxy_copy_len != n) {
        char path[4096];
        proxy_ckpt_path(path, sizeof path, proxy_rank(), iter);
        FILE *f = fopen(path, "rb");
        proxy_copy = realloc(proxy_copy, n ? n : 1);
        int ok = f && proxy_copy && fread(proxy_copy, 1, n, f) == n;
        if (f) fclose(f);
        if (!ok) {
            fprintf(stderr, "%s: rank %d: cannot read the checkpoint %s\n", proxy_app->name, proxy_rank(), path);
            return MPI_ERR_IO;
        }
        from = proxy_copy;
        proxy_copy_len = n;
        proxy_committed = iter;
    }
    for (int i = 0; i < PROXY_REGIONS; i++) {
        memcpy(proxy_regions[i].buf, from + at, proxy_regions[i].bytes);
        at += proxy_regions[i].bytes;
    }
    return MPI_SUCCESS;
}

/* The survivors of `comm` (NULL in a respawned process) and one new
 * process per dead rank make a communicator of the old size, each rank in
 * its old place (a new process in its predecessor's). */
static int proxy_replace(MPI_Comm comm, MPI_Comm *out)
{
    MPI_Comm shrunk, inter, merged;
    int rc, rank, n, ns, key;
    if (comm == MPI_COMM_NULL) {
        MPI_Comm_get_parent(&inter);
        /* Rank 0 of the survivors tells each new process its place. */
        if ((rc = MPI_Recv(&key, 1, MPI_INT, 0, 77, inter, MPI_STATUS_IGNORE))) return rc;
        if ((rc = MPI_Intercomm_merge(inter, 1, &merged))) return rc;
    } else {
        MPI_Group all, alive, dead;
        if ((rc = MPIX_Comm_shrink(comm, &shrunk))) return rc;
        MPI_Comm_size(comm, &n);
        MPI_Comm_size(shrunk, &ns);
        MPI_Comm_rank(comm, &key);
        MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
        if ((rc = MPI_Comm_spawn(proxy_argv[0], proxy_argv + 1, n - ns, MPI_INFO_NULL, 0, shrunk, &inter,
                                 MPI_ERRCODES_IGNORE)))
            return rc;
        MPI_Comm_rank(shrunk, &rank);
        if (rank == 0) {
            MPI_Comm_group(comm, &all);
            MPI_Comm_group(shrunk, &alive);
            MPI_Group_difference(all, alive, &dead);
            for (int d = 0; d < n - ns; d++) {
                int place;
                MPI_Group_translate_ranks(dead, 1, &d, all, &place);
                if ((rc = MPI_Send(&place, 1, MPI_INT, d, 77, inter))) return rc;
            }
            MPI_Group_free(&dead);
            MPI_Group_free(&alive);
            MPI_Group_free(&all);
        }
        if ((rc = MPI_Intercomm_merge(inter, 0, &merged))) return rc;
        MPI_Comm_free(&shrunk);
    }
    MPI_Comm_free(&inter);
    rc = MPI_Comm_split(merged, 0, key, out);
    MPI_Comm_free(&merged);
    if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return rc;
}

static int proxy_attempt(int epoch);

/* The ULFM driver: runs, and after a failure repairs the communicator and
 * rolls every rank back to the last committed checkpoint. */
static void proxy_ulfm(void)
{
    struct proxy *p = proxy_app;
    MPI_Comm parent;
    int rc;
    const char *how = getenv("PROXY_ULFM");
    proxy_shrinking = how && !strcmp(how, "shrink");
    if (how && !proxy_shrinking && strcmp(how, "respawn")) {
        fprintf(stderr, "%s: PROXY_ULFM=%s: expected shrink or respawn\n", p->name, how);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (proxy_shrinking && !p->reload) {
        fprintf(stderr, "%s: cannot recover by shrinking (it has no reload)\n", p->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_dup(MPI_COMM_WORLD, &proxy_world);
        MPI_Comm_set_errhandler(proxy_world, MPI_ERRORS_RETURN);
    } else {
        proxy_back = 1;
        if ((rc = proxy_replace(MPI_COMM_NULL, &proxy_world))) proxy_fail("joining the repaired world", rc);
    }
    if ((rc = proxy_setup(p)) != MPI_SUCCESS) proxy_fail("set-up", rc);
    if (!proxy_back && (rc = p->setup_mpi()) != MPI_SUCCESS) proxy_fail("set-up", rc);
    if ((rc = proxy_protect_all(p)) != MPI_SUCCESS) proxy_fail("MPIX_Protect", rc);
    for (;;) {
        /* Every rank rolls back to the newest checkpoint all committed (a
         * new process knows none). */
        int epoch = 0, mine = proxy_back && parent != MPI_COMM_NULL ? 1 << 30 : proxy_committed;
        if (proxy_back && (rc = MPI_Allreduce(&mine, &epoch, 1, MPI_INT, MPI_MIN, proxy_world)))
            proxy_fail("agreeing on the checkpoint", rc);
        if (epoch == 1 << 30) epoch = 0;
        rc = proxy_attempt(epoch);
        if (rc == MPI_SUCCESS) break;
        int cls = rc;
        MPI_Error_class(rc, &cls);
        /* A failure shows as these (MPI_Waitall's in the statuses). */
        if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_REVOKED && cls != MPIX_ERR_PROC_FAILED_PENDING &&
            cls != MPI_ERR_IN_STATUS)
            proxy_fail("iteration", rc);
        /* Ranks that wait for one that gave up are interrupted. */
        MPIX_Comm_revoke(*p->comm);
        MPIX_Comm_revoke(proxy_world);
        MPI_Comm repaired;
        if (proxy_shrinking) {
            /* Go on with the live ranks: the application decomposes its
             * problem over them again (set-up), and reloads. */
            if ((rc = MPIX_Comm_shrink(proxy_world, &repaired))) proxy_fail("shrinking the world", rc);
            MPI_Comm_set_errhandler(repaired, MPI_ERRORS_RETURN);
        } else if ((rc = proxy_replace(proxy_world, &repaired))) {
            proxy_fail("repairing the world", rc);
        }
        MPI_Comm_free(&proxy_world);
        proxy_world = repaired;
        parent = MPI_COMM_NULL;
        proxy_back = 1;
        if (proxy_shrinking) {
            if ((rc = proxy_setup(p)) != MPI_SUCCESS) proxy_fail("set-up", rc);
            if ((rc = proxy_protect_all(p)) != MPI_SUCCESS) proxy_fail("MPIX_Protect", rc);
            if (proxy_committed > 0) {
                proxy_stale_iter = proxy_committed;
                proxy_stale_writers = proxy_ckpt_size;
            }
            proxy_copy_len = 0; /* the regions changed: the copy no longer fits */
        }
    }
    proxy_remove_stale();
    if (proxy_committed > 0) {
        char path[4096];
        proxy_ckpt_path(path, sizeof path, proxy_rank(), proxy_committed);
        unlink(path);
    }
}
#endif

/* One attempt from `epoch`: MPI_SUCCESS, or the error of the first MPI
 * call that failed (MPIX_TRY_RELOAD under stages). */
static int proxy_attempt(int epoch)
{
    struct proxy *p = proxy_app;
    int rc;
    double load = 0;
#ifndef PLAIN
    /* Under ULFM the communicators are made again on the repaired world:
     * before the initial conditions, which use them, and after a restore,
     * which brings back the state's old handles. */
    int remake = proxy_mode == MPIX_RECOVERY_ULFM && proxy_back;
#else
    int remake = 0;
#endif
    if (epoch > 0) {
#ifndef PLAIN
        double t0 = proxy_unix_time();
        if (remake && proxy_shrinking) {
            /* Fewer ranks: each reads every writer's file and keeps the
             * state of its new domain (its communicator made first). */
            if ((rc = p->setup_mpi()) != MPI_SUCCESS) return rc;
            t0 = proxy_unix_time();
            rc = p->reload(epoch, proxy_ckpt_size);
            remake = 0;
        } else {
            rc = proxy_mode == MPIX_RECOVERY_ULFM ? proxy_ulfm_load(epoch) : MPIX_Checkpoint_restore();
        }
        if (rc != MPI_SUCCESS) return rc;
        load = proxy_unix_time() - t0;
#endif
        if (remake && (rc = p->setup_mpi()) != MPI_SUCCESS) return rc;
    } else {
        if (remake && (rc = p->setup_mpi()) != MPI_SUCCESS) return rc;
        if ((rc = p->initial()) != MPI_SUCCESS) return rc;
    }
    if (proxy_back) {
        size_t bytes = 0;
#ifndef PLAIN
        for (int i = 0; i < PROXY_REGIONS; i++) bytes += proxy_regions[i].bytes;
#endif
        fprintf(stderr, "%s: rank %d back at iteration %d at unix time %.6f (data load %.3f ms, %zu bytes)\n", p->name,
                proxy_rank(), *p->iter, proxy_unix_time(), load * 1e3, bytes);
        /* A shrink has no ballast of the dead to load: a new one. */
#ifndef PLAIN
        if (proxy_mode == MPIX_RECOVERY_ULFM && proxy_shrinking) {
            proxy_ballast_fill(proxy_rank());
            proxy_ballast_step(*p->iter);
        }
#endif
        if (epoch > 0 && !proxy_ballast_ok(proxy_rank(), *p->iter)) proxy_fail("the restored state", MPI_ERR_OTHER);
    }
    proxy_back = 0;
    for (int it = *p->iter; it < p->iters; it++) {
        if ((rc = p->step(it)) != MPI_SUCCESS) return rc;
        *p->iter = it + 1;
        proxy_ballast_step(it + 1);
#ifndef PLAIN
        int due = p->every > 0 && (it + 1) % p->every == 0;
        /* -k auto: when it pays (MPIX_Checkpoint_needed). */
        if (p->every < 0 && (rc = MPIX_Checkpoint_needed(&due)))
            return rc;
        if (due) {
            double t0 = proxy_unix_time();
            rc = proxy_mode == MPIX_RECOVERY_ULFM ? proxy_ulfm_checkpoint(it + 1) : MPIX_Checkpoint_write();
            proxy_ckpt_s += proxy_unix_time() - t0;
            if (rc != MPI_SUCCESS) return rc;
        }
#endif
    }
    return MPI_SUCCESS;
}

#ifdef PLAIN
static int proxy_run(int argc, char **argv, struct proxy *p)
{
    int rc;
    (void)argc;
    (void)argv;
    proxy_app = p;
    if ((rc = proxy_setup(p)) != MPI_SUCCESS) proxy_fail("set-up", rc);
    if ((rc = p->setup_mpi()) != MPI_SUCCESS) proxy_fail("set-up", rc);
    if ((rc = proxy_attempt(0)) != MPI_SUCCESS) proxy_fail("run", rc);
    return 0;
}
#else
static int proxy_restart_point(int argc, char **argv, MPIX_Reinit_state state)
{
    struct proxy *p = proxy_app;
    int rc = MPI_SUCCESS, epoch = 0, mode = MPIX_RECOVERY_NONE;
    (void)argc;
    (void)argv;
    proxy_back = state != MPIX_REINIT_NEW;
    MPIX_Get_recovery_mode(&mode);
    if (mode == MPIX_RECOVERY_ULFM) {
        proxy_ulfm();
        fprintf(stderr, "%s: rank %d: %.3f ms of %.3f s in checkpoints\n", p->name, proxy_rank(),
                proxy_ckpt_s * 1e3, proxy_unix_time() - proxy_start);
        return 0;
    }
    MPIX_Get_fault_epoch(&epoch);
    if ((rc = proxy_setup(p)) != MPI_SUCCESS) proxy_fail("set-up", rc);
    /* A Stages replacement restored its MPI state, unless there was no
     * checkpoint yet (epoch 0 is the state of MPI_Init). */
    int restored_mpi = state == MPIX_REINIT_RESTARTED && mode == MPIX_RECOVERY_STAGES && epoch > 0;
    if (!restored_mpi) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        /* A failure during the MPI set-up is rolled back from like any
         * other (the loop makes the set-up again at epoch 0). */
        rc = p->setup_mpi();
        if (rc != MPI_SUCCESS && rc != MPIX_TRY_RELOAD) proxy_fail("set-up", rc);
    }
    int prc = proxy_protect_all(p); /* local: registrations only */
    if (prc != MPI_SUCCESS) proxy_fail("MPIX_Protect", prc);
    for (;;) {
        if (rc == MPIX_TRY_RELOAD) {
            proxy_back = 1;
            rc = MPIX_Checkpoint_read();
            if (rc == MPIX_TRY_RELOAD) continue; /* another failure meanwhile */
            if (rc != MPI_SUCCESS) proxy_fail("MPIX_Checkpoint_read", rc);
            MPIX_Get_fault_epoch(&epoch);
            if (epoch == 0) { /* back to the MPI state of MPI_Init */
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
                rc = p->setup_mpi();
                if (rc == MPIX_TRY_RELOAD) continue;
                if (rc != MPI_SUCCESS) proxy_fail("set-up", rc);
            }
        }
        MPIX_Get_fault_epoch(&epoch);
        rc = proxy_attempt(epoch);
        if (rc == MPI_SUCCESS) {
            fprintf(stderr, "%s: rank %d: %.3f ms of %.3f s in MPIX_Checkpoint_write\n", p->name, proxy_rank(),
                    proxy_ckpt_s * 1e3, proxy_unix_time() - proxy_start);
            return 0;
        }
        if (rc != MPIX_TRY_RELOAD) proxy_fail("iteration", rc);
    }
}

static int proxy_run(int argc, char **argv, struct proxy *p)
{
    proxy_app = p;
    proxy_start = proxy_unix_time();
    proxy_argc = argc;
    proxy_argv = argv;
    MPIX_Get_recovery_mode(&proxy_mode);
    if (p->every < 0 && proxy_mode == MPIX_RECOVERY_ULFM) {
        /* MPIX_Checkpoint_needed is collective over every rank of the job;
         * after a failure under ULFM they are not all there. */
        fprintf(stderr, "%s: -k auto needs --recovery stages, reinit or cpr, not ulfm\n", p->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rc = MPIX_Reinit(argc, argv, proxy_restart_point);
    if (rc != MPI_SUCCESS) proxy_fail("MPIX_Reinit", rc);
    return 0;
}
#endif

#endif
