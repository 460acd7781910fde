/* A write-protect snapshot (userfaultfd, as QEMU's and CRIU's live
 * snapshots) of MIB MiB against one memcpy: the time the application is
 * blocked to take it (one UFFDIO_WRITEPROTECT of the range), and what it
 * pays afterwards for writing every page while a background thread
 * copies chunk by chunk (a write to a chunk not yet copied faults; the
 * handler copies that chunk first). Checks the snapshot holds the old
 * values. Needs /dev/userfaultfd (root) or vm.unprivileged_userfaultfd.
 * Prototype for issue 37's choice between fork (snapshot_fork.c) and this.
 *   cc -O2 -pthread snapshot_uffd.c -o snapshot_uffd && ./snapshot_uffd MIB [CHUNK_KIB] */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int uffd; static char *reg, *snap; static size_t n, chunk = 1 << 20; static size_t nchunks;
static pthread_mutex_t *locks; static atomic_int *copied; static atomic_long faults;
static void wp(char *at, size_t len, int on) {
  struct uffdio_writeprotect w = {.range = {(unsigned long)at, len}, .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
  if (ioctl(uffd, UFFDIO_WRITEPROTECT, &w)) { perror("WRITEPROTECT"); exit(1); }
}
static void copy_chunk(size_t c) {
  pthread_mutex_lock(&locks[c]);
  if (!copied[c]) { size_t off = c * chunk, len = off + chunk > n ? n - off : chunk;
    memcpy(snap + off, reg + off, len); wp(reg + off, len, 0); copied[c] = 1; }
  pthread_mutex_unlock(&locks[c]);
}
static void *handler(void *x) { (void)x;
  for (;;) { struct pollfd p = {uffd, POLLIN, 0}; if (poll(&p, 1, 1000) <= 0) continue;
    struct uffd_msg m; if (read(uffd, &m, sizeof m) != sizeof m) continue;
    if (m.event != UFFD_EVENT_PAGEFAULT) continue;
    faults++; size_t c = (m.arg.pagefault.address - (unsigned long)reg) / chunk;
    pthread_mutex_lock(&locks[c]); int done = copied[c]; pthread_mutex_unlock(&locks[c]);
    if (!done) copy_chunk(c); else { /* unprotected meanwhile: wake */ struct uffdio_range r = {m.arg.pagefault.address & ~4095UL, 4096}; ioctl(uffd, UFFDIO_WAKE, &r); } }
  return 0; }
static void *copier(void *x) { (void)x; for (size_t c = 0; c < nchunks; c++) copy_chunk(c); return 0; }
int main(int argc, char **argv) {
  n = (size_t)atoi(argv[1]) << 20; if (argc > 2) chunk = (size_t)atoi(argv[2]) << 10; nchunks = (n + chunk - 1) / chunk;
  reg = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); snap = malloc(n); char *cp = malloc(n);
  memset(reg, 1, n); memset(snap, 0, n); memset(cp, 0, n);
  locks = calloc(nchunks, sizeof *locks); copied = calloc(nchunks, sizeof *copied);
  for (size_t c = 0; c < nchunks; c++) pthread_mutex_init(&locks[c], 0);
  int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  uffd = dev >= 0 ? ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK) : (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (uffd < 0) { perror("userfaultfd"); return 1; }
  struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
  if (ioctl(uffd, UFFDIO_API, &api)) { perror("API"); return 1; }
  struct uffdio_register r = {.range = {(unsigned long)reg, n}, .mode = UFFDIO_REGISTER_MODE_WP};
  if (ioctl(uffd, UFFDIO_REGISTER, &r)) { perror("REGISTER"); return 1; }
  pthread_t h; pthread_create(&h, 0, handler, 0);
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now(); memcpy(cp, reg, n); double t1 = now();
    for (size_t c = 0; c < nchunks; c++) copied[c] = 0; faults = 0;
    double t2 = now(); wp(reg, n, 1); double t3 = now();
    pthread_t cpt; pthread_create(&cpt, 0, copier, 0);
    unsigned char v = reg[0] + 1;
    for (size_t i = 0; i < n; i += 4096) reg[i] = v; /* the application writes everything */
    double t4 = now(); pthread_join(cpt, 0); double t5 = now();
    for (size_t i = 0; i < n; i += 4096) reg[i]++; double t6 = now();
    int ok = snap[0] == (char)(v - 1) && snap[n - 1] == reg[n - 1];
    printf("%zu MiB chunk %zu KiB: memcpy %.1f ms | blocked %.2f ms (%.3f of memcpy) | app writes all pages %.1f ms (%ld faults) | copier done +%.1f | writes after %.2f ms | snapshot %s\n",
      n >> 20, chunk >> 10, (t1 - t0) * 1e3, (t3 - t2) * 1e3, (t3 - t2) / (t1 - t0), (t4 - t3) * 1e3, (long)faults, (t5 - t4) * 1e3, (t6 - t5) * 1e3, ok ? "ok" : "WRONG");
  }
  return 0;
}
