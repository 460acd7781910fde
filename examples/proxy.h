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

#ifdef PLAIN
/* Never called in the plain build (nothing is protected), but the
 * application's protect() still names it: a no-op for MPIs without it. */
#define MPIX_Protect(id, buf, count, type) ((void)(id), (void)(buf), (void)(count), (void)(type), MPI_SUCCESS)
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

/* The proxies' options: -s SIZE -i ITERS -k EVERY; 0 on success. An odd
 * option or a missing value is an error (nothing runs then). */
static int proxy_options(int argc, char **argv, const char *name, int *size, int *iters, int *every)
{
    for (int a = 1; a < argc; a += 2) {
        int *to = !strcmp(argv[a], "-s") ? size : !strcmp(argv[a], "-i") ? iters : !strcmp(argv[a], "-k") ? every : NULL;
        if (!to || a + 1 >= argc) {
            fprintf(stderr, "%s: bad option %s (options: -s SIZE -i ITERS -k EVERY)\n", name, argv[a]);
            return -1;
        }
        *to = atoi(argv[a + 1]);
    }
    return 0;
}
static int proxy_back; /* this process is coming back from a failure */
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
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
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

/* One attempt from `epoch`: MPI_SUCCESS, or the error of the first MPI
 * call that failed (MPIX_TRY_RELOAD under stages). */
static int proxy_attempt(int epoch)
{
    struct proxy *p = proxy_app;
    int rc;
    double load = 0;
    if (epoch > 0) {
#ifndef PLAIN
        double t0 = proxy_unix_time();
        if ((rc = MPIX_Checkpoint_restore()) != MPI_SUCCESS) return rc;
        load = proxy_unix_time() - t0;
#endif
    } else if ((rc = p->initial()) != MPI_SUCCESS) {
        return rc;
    }
    if (proxy_back)
        fprintf(stderr, "%s: rank %d back at iteration %d at unix time %.6f (data load %.3f ms)\n", p->name,
                proxy_rank(), *p->iter, proxy_unix_time(), load * 1e3);
    proxy_back = 0;
    for (int it = *p->iter; it < p->iters; it++) {
        if ((rc = p->step(it)) != MPI_SUCCESS) return rc;
        *p->iter = it + 1;
#ifndef PLAIN
        if (p->every > 0 && (it + 1) % p->every == 0) {
            double t0 = proxy_unix_time();
            rc = MPIX_Checkpoint_write();
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
    if ((rc = p->setup()) != MPI_SUCCESS) proxy_fail("set-up", rc);
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
    MPIX_Get_fault_epoch(&epoch);
    if ((rc = p->setup()) != MPI_SUCCESS) proxy_fail("set-up", rc);
    /* A Stages replacement restored its MPI state, unless there was no
     * checkpoint yet (epoch 0 is the state of MPI_Init). */
    int restored_mpi = state == MPIX_REINIT_RESTARTED && mode == MPIX_RECOVERY_STAGES && epoch > 0;
    if (!restored_mpi) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if ((rc = p->setup_mpi()) != MPI_SUCCESS) proxy_fail("set-up", rc);
    }
    if ((rc = p->protect()) != MPI_SUCCESS) proxy_fail("MPIX_Protect", rc);
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
    int rc = MPIX_Reinit(argc, argv, proxy_restart_point);
    if (rc != MPI_SUCCESS) proxy_fail("MPIX_Reinit", rc);
    return 0;
}
#endif

#endif
