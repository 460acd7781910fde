/* The floor of a recovery's notice round on this machine: N sleeping
 * processes, each blocked reading its own Unix socket (as a waiting rank
 * sleeps on its control connection), get one byte each from one process,
 * wake, and answer with one byte; the time from the first write to the
 * last answer is what telling every rank and hearing each back costs at
 * the least, without MPI. Run as: wake_floor N [ROUNDS]; prints one line
 * per round (ms), then the median. No MPI: plain POSIX. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 1 || rounds < 1) {
        fprintf(stderr, "usage: wake_floor N [ROUNDS]\n");
        return 2;
    }
    int *fd = calloc(n, sizeof *fd);
    pid_t *pid = calloc(n, sizeof *pid);
    double *ms = calloc(rounds, sizeof *ms);
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            perror("socketpair");
            return 1;
        }
        pid[i] = fork();
        if (pid[i] == 0) {
            close(sv[0]);
            char c;
            /* Answer every byte until the parent closes its end. */
            while (read(sv[1], &c, 1) == 1)
                if (write(sv[1], &c, 1) != 1) break;
            _exit(0);
        }
        close(sv[1]);
        fd[i] = sv[0];
    }
    for (int r = 0; r < rounds; r++) {
        usleep(200000); /* every child asleep in read() */
        double t0 = now_ms();
        char c = 'x';
        for (int i = 0; i < n; i++)
            if (write(fd[i], &c, 1) != 1) return 1;
        /* In order: an answer that came early waits in its socket; the
         * round ends with the last one either way. */
        for (int i = 0; i < n; i++)
            if (read(fd[i], &c, 1) != 1) return 1;
        ms[r] = now_ms() - t0;
        printf("wake_floor: %d processes, round %d: %.2f ms\n", n, r + 1, ms[r]);
    }
    for (int i = 0; i < n; i++) close(fd[i]);
    for (int i = 0; i < n; i++) waitpid(pid[i], NULL, 0);
    qsort(ms, rounds, sizeof *ms, cmp);
    printf("wake_floor: %d processes: median %.2f ms (min %.2f, max %.2f)\n", n, ms[rounds / 2],
           ms[0], ms[rounds - 1]);
    return 0;
}
