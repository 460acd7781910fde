/* What a replacement pays to get MIB MiB of checkpoint back from its
 * node-local file (tmpfs), by copy and by mapping (issue 37's "a
 * replacement on the same host maps its node-local copy"), counting what
 * the program pays afterwards when it writes every page of its state, as
 * solvers do in their next iteration:
 *   copy: the region is the program's, already touched (the replacement's
 *         set-up allocated it); memcpy from the file's mapping, then the
 *         first writes;
 *   map:  the file mapped MAP_PRIVATE|MAP_FIXED over the region (its old
 *         pages freed), then first reads (minor faults) and first writes
 *         (copy-on-write, a fault and a 4 KiB copy per page);
 *   map+populate: the same with MAP_POPULATE, which on a writable private
 *         mapping breaks copy-on-write at once (a copy in the mmap; the
 *         sum also holds its first reads, about 1 ms).
 *   cc -O2 replacement_map.c -o replacement_map && ./replacement_map [MIB [ROUNDS]] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile long sink; /* keeps the reads */

static char *touched_region(size_t n)
{
    char *r = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) exit(1);
    memset(r, 1, n);
    return r;
}

/* One byte per page: first reads and first writes. */
static long read_pages(const char *r, size_t n)
{
    long s = 0;
    for (size_t i = 0; i < n; i += 4096) s += r[i];
    return s;
}

static void write_pages(char *r, size_t n)
{
    for (size_t i = 0; i < n; i += 4096) r[i]++;
}

/* The file mapped over a touched region with `flags` added: ms to map,
 * for the first reads and for the first writes. */
static void map_file(int fd, size_t n, int flags, double ms[3])
{
    char *r = touched_region(n);
    double t0 = now();
    char *m = mmap(r, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | flags, fd, 0);
    double t1 = now();
    sink += read_pages(m, n);
    double t2 = now();
    write_pages(m, n);
    double t3 = now();
    munmap(m, n);
    ms[0] = (t1 - t0) * 1e3;
    ms[1] = (t2 - t1) * 1e3;
    ms[2] = (t3 - t2) * 1e3;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 256) << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/replacement_map.%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)n)) return 1;
    char *w = mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    for (size_t i = 0; i < n; i += 8) *(long *)(w + i) = (long)i;
    munmap(w, n);
    printf("%zu MiB, ms: copy (copy, first writes) | map (mmap, first reads, first writes) | map+populate (mmap, first writes)\n",
           n >> 20);
    for (int round = 0; round < rounds; round++) {
        char *r = touched_region(n);
        double t0 = now();
        char *f = mmap(0, n, PROT_READ, MAP_SHARED, fd, 0);
        memcpy(r, f, n);
        munmap(f, n);
        double t1 = now();
        write_pages(r, n);
        double t2 = now();
        munmap(r, n);

        double map[3], populated[3];
        map_file(fd, n, 0, map);
        map_file(fd, n, MAP_POPULATE, populated);
        printf("copy %.1f + %.1f = %.1f | map %.1f + %.1f + %.1f = %.1f | map+populate %.1f + %.1f = %.1f\n",
               (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t0) * 1e3, map[0], map[1], map[2], map[0] + map[1] + map[2],
               populated[0], populated[2], populated[0] + populated[1] + populated[2]);
    }
    unlink(path);
    return 0;
}
