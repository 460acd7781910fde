/* A rank that dies of a fault says where, as Open MPI's and MPICH's ranks
 * do: the signal, the faulting address, the thread and a backtrace go to
 * its standard error (mpiexec forwards it) before the default action ends
 * the process with that signal, so mpiexec still reports it as killed by
 * it. Installed before main runs, for ranks started by mpiexec, only where
 * the signal's disposition is still the default (a program's or a
 * debugger's own handler wins), and not at all with MPISTAGES_BACKTRACE=0.
 *
 * The handler calls only what is safe after a fault: write(2), prctl,
 * backtrace (made ready in the constructor, so that its first call's
 * loading of the unwinder does not happen here) and
 * backtrace_symbols_fd, which writes without allocating. */
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static char rank_text[16] = "?";

/* Appends `s` to buf[*len], keeping room for the terminator. */
static void put(char *buf, size_t cap, size_t *len, const char *s)
{
    while (*s && *len + 1 < cap) buf[(*len)++] = *s++;
}

/* Appends `v` in base 10 or 16 (with 0x). */
static void put_num(char *buf, size_t cap, size_t *len, unsigned long v, int hex)
{
    char digits[32];
    int n = 0;
    do {
        unsigned d = (unsigned)(v % (hex ? 16 : 10));
        digits[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= hex ? 16 : 10;
    } while (v && n < (int)sizeof digits);
    if (hex) put(buf, cap, len, "0x");
    while (n > 0 && *len + 1 < cap) buf[(*len)++] = digits[--n];
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    default: return "a fatal signal";
    }
}

static const char *fault_reason(int sig, int code)
{
    if (sig == SIGSEGV && code == SEGV_MAPERR) return "address not mapped";
    if (sig == SIGSEGV && code == SEGV_ACCERR) return "no permission for the access";
    if (sig == SIGBUS && code == BUS_ADRERR) return "address beyond the object (a truncated file?)";
    if (sig == SIGFPE && code == FPE_INTDIV) return "integer division by zero";
    return NULL;
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context)
{
    char line[512], thread[17] = {0};
    size_t len = 0;
    void *frames[64];
    (void)context;
    prctl(PR_GET_NAME, thread, 0, 0, 0);
    put(line, sizeof line, &len, "mpistages: rank ");
    put(line, sizeof line, &len, rank_text);
    put(line, sizeof line, &len, " (pid ");
    put_num(line, sizeof line, &len, (unsigned long)getpid(), 0);
    put(line, sizeof line, &len, ", thread ");
    put(line, sizeof line, &len, thread[0] ? thread : "?");
    put(line, sizeof line, &len, ") received ");
    put(line, sizeof line, &len, signal_name(sig));
    if (info->si_code > 0) {
        const char *why = fault_reason(sig, info->si_code);
        put(line, sizeof line, &len, " at address ");
        put_num(line, sizeof line, &len, (unsigned long)info->si_addr, 1);
        if (why) {
            put(line, sizeof line, &len, " (");
            put(line, sizeof line, &len, why);
            put(line, sizeof line, &len, ")");
        }
    }
    put(line, sizeof line, &len, "; backtrace (addr2line -e <file> <offset> names a frame):\n");
    (void)!write(STDERR_FILENO, line, len);
    /* The first two frames are this handler and the kernel's return
     * trampoline; the next one is where the signal struck. */
    int depth = backtrace(frames, 64);
    if (depth > 2) backtrace_symbols_fd(frames + 2, depth - 2, STDERR_FILENO);
    /* The handler was installed with SA_RESETHAND: a fault happens again
     * with the default action when the instruction is retried; a signal
     * sent by kill(2) is raised again. */
    if (info->si_code <= 0) raise(sig);
}

__attribute__((constructor)) static void mpistages_report_fatal_signals(void)
{
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    const char *rank = getenv("MPISTAGES_RANK");
    const char *wanted = getenv("MPISTAGES_BACKTRACE");
    void *warm[1];
    if (!rank || (wanted && !strcmp(wanted, "0"))) return;
    strncpy(rank_text, rank, sizeof rank_text - 1);
    backtrace(warm, 1);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction now, ours;
        if (sigaction(fatal[i], NULL, &now) != 0 || now.sa_handler != SIG_DFL) continue;
        memset(&ours, 0, sizeof ours);
        ours.sa_sigaction = on_fatal_signal;
        ours.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
        sigemptyset(&ours.sa_mask);
        sigaction(fatal[i], &ours, NULL);
    }
}
