/* The platform's floor for a background flush: writes a FILE_MIB file to
 * DIR over and over at RATE MB/s (1e6 bytes) for SECONDS, the way the pfs
 * flush does at its least (direct I/O in 4 MiB pieces, then fsync), from one
 * buffer allocated and touched once, so it costs the guest as little CPU as
 * such a write can. bench/storage runs the stencil beside it, without a pfs
 * level, to show what writing that many bytes costs the application on this
 * machine whoever writes them. Prints "diowriter MB/s cpu_s".
 * Usage: diowriter DIR FILE_MIB RATE SECONDS */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: diowriter DIR FILE_MIB RATE_MBPS SECONDS\n");
        return 2;
    }
    size_t bytes = (size_t)atoi(argv[2]) << 20, piece = 4 << 20;
    double rate = atof(argv[3]) * 1e6, seconds = atof(argv[4]);
    char path[4096];
    snprintf(path, sizeof path, "%s/diowriter.%d", argv[1], (int)getpid());
    char *buf = aligned_alloc(4096, bytes);
    if (!buf || bytes == 0 || rate <= 0) {
        fprintf(stderr, "diowriter: bad arguments\n");
        return 2;
    }
    for (size_t i = 0; i < bytes; i++) buf[i] = (char)(i * 2654435761u >> 13);
    double t0 = now(), written = 0;
    while (now() - t0 < seconds) {
        int fd = open(path, O_WRONLY | O_CREAT | O_DIRECT, 0600);
        if (fd < 0) {
            perror("diowriter: open");
            return 1;
        }
        for (size_t off = 0; off < bytes; off += piece) {
            size_t n = bytes - off < piece ? bytes - off : piece;
            if (pwrite(fd, buf + off, n, (off_t)off) != (ssize_t)n) {
                perror("diowriter: pwrite");
                unlink(path);
                return 1;
            }
        }
        fsync(fd);
        close(fd);
        written += bytes;
        /* Keep to the rate: sleep until this many bytes are due. */
        double due = t0 + written / rate - now();
        if (due > 0) usleep((useconds_t)(due * 1e6));
    }
    unlink(path);
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    double cpu = r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
    printf("diowriter %.0f %.3f\n", written / (now() - t0) / 1e6, cpu);
    free(buf);
    return 0;
}
