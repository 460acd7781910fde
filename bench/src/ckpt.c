/* Checkpoint write / restore throughput of one storage configuration
 * (MPISTAGES_CKPT, set by bench/storage), beside the plain baseline of
 * writing the same bytes to the same directory with one write() per file.
 *
 *   mpiexec -n R ./ckpt MIB REPS BASEDIR
 *
 * The protected field is a smooth floating-point field with a little noise
 * (what a solver's state looks like to a compressor). Times are the
 * slowest rank's, medians over REPS; throughput is aggregate over ranks.
 * The measured checkpoints come after WARMUP unmeasured ones: a long run's
 * checkpoints reuse the memory and files of epochs no longer kept, and
 * only the first ones of a job allocate (they cost 2-4x more here).
 * Prints one line per metric: `METRIC MIB RANKS VALUE`. */
#include <mpi.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { WARMUP = 3 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Slowest rank's time of `t`. */
static double slowest(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* One write() of the whole buffer to a new file, as an application would
 * without a checkpoint library; fsync when the level is durable. */
static double plain_write(const char *dir, int rank, const char *buf, size_t n, int sync)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plain.%d", dir, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t done = 0;
    while (fd >= 0 && done < n) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (fd >= 0 && sync) fsync(fd);
    if (fd >= 0) close(fd);
    double t = MPI_Wtime() - t0;
    unlink(path);
    if (done != n) {
        fprintf(stderr, "ckpt bench: plain write to %s failed\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return slowest(t);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (!rank) fprintf(stderr, "usage: ckpt MIB REPS BASEDIR\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t mib = (size_t)atol(argv[1]), n = mib << 20;
    int reps = atoi(argv[2]);
    const char *dir = argv[3];
    int sync = getenv("BENCH_SYNC") != NULL;
    size_t count = n / sizeof(double);
    double *field = malloc(n);
    if (!field) MPI_Abort(MPI_COMM_WORLD, 2);
    /* BENCH_THP=1: the field in transparent huge pages, as where THP is
     * "always" (this machine's is "madvise"). */
    if (getenv("BENCH_THP")) {
        uintptr_t a = ((uintptr_t)field + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
        madvise((void *)a, n - (a - (uintptr_t)field), MADV_HUGEPAGE);
    }
    srand(rank + 1);
    for (size_t i = 0; i < count; i++)
        field[i] = sin(i * 1e-4) * cos(i * 3e-7 + rank) + 1e-6 * (rand() / (double)RAND_MAX);
    MPIX_Protect(0, field, (MPI_Count)count, MPI_DOUBLE);

    double *w = malloc(reps * sizeof(double)), *r = malloc(reps * sizeof(double)),
           *p = malloc(reps * sizeof(double)), *c = malloc(reps * sizeof(double));
    /* The yardstick of a checkpoint's cost: one memcpy of the protected
     * bytes, in the same process, into memory already touched. */
    char *copy = malloc(n);
    if (!copy) MPI_Abort(MPI_COMM_WORLD, 2);
    memset(copy, 0, n);
    for (int k = 0; k < WARMUP; k++)
        if (MPIX_Checkpoint_write() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
    for (int k = 0; k < reps; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        memcpy(copy, field, n);
        c[k] = slowest(MPI_Wtime() - t0);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        if (MPIX_Checkpoint_write() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
        w[k] = slowest(MPI_Wtime() - t0);
        double saved = field[k];
        field[k] += 1.0; /* the restore must bring the old value back */
        /* A rollback comes a failure's detection and agreement after the
         * checkpoint, not at once: the files a thread writes in the
         * background are written by then (a restore waits for them
         * otherwise). The pause is long enough for that here. */
        usleep((useconds_t)(50000 + 8e6 * c[k]));
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        if (MPIX_Checkpoint_restore() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
        r[k] = slowest(MPI_Wtime() - t0);
        if (field[k] != saved) {
            fprintf(stderr, "ckpt bench: restore gave %g, not %g\n", field[k], saved);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        p[k] = plain_write(dir, rank, (const char *)field, n, sync);
    }
    double gib = (double)n * size / (1 << 30);
    /* Per repetition, write and restore as multiples of that memcpy. */
    double *wc = malloc(reps * sizeof(double)), *rc = malloc(reps * sizeof(double));
    for (int k = 0; k < reps; k++) {
        wc[k] = w[k] / c[k];
        rc[k] = r[k] / c[k];
    }
    double wt = median(w, reps), rt = median(r, reps), pt = median(p, reps), ct = median(c, reps);
    double wcm = median(wc, reps), rcm = median(rc, reps);
    /* With BENCH_TMPFS=ROOT (a tmpfs level's root): how much the newest
     * checkpoint file of rank 0 takes, against the raw bytes. */
    const char *root = getenv("BENCH_TMPFS"), *job = getenv("MPISTAGES_JOB_ID");
    if (!rank && root && job) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/job-%s/epoch-%d/rank-0.ckpt", root, job, reps + WARMUP);
        if (stat(path, &st) == 0) printf("stored_ratio %zu %d %.3f\n", mib, size, (double)n / st.st_size);
    }
    if (!rank) {
        printf("write_gibs %zu %d %.3f\n", mib, size, gib / wt);
        printf("restore_gibs %zu %d %.3f\n", mib, size, gib / rt);
        printf("plain_gibs %zu %d %.3f\n", mib, size, gib / pt);
        printf("write_ms %zu %d %.3f\n", mib, size, wt * 1e3);
        printf("restore_ms %zu %d %.3f\n", mib, size, rt * 1e3);
        printf("memcpy_ms %zu %d %.3f\n", mib, size, ct * 1e3);
        printf("write_per_memcpy %zu %d %.3f\n", mib, size, wcm);
        printf("restore_per_memcpy %zu %d %.3f\n", mib, size, rcm);
    }
    MPIX_Unprotect(0);
    free(copy);
    free(field);
    MPI_Finalize();
    return 0;
}
