/* Line-buffered standard output for ranks started by mpiexec.
 *
 * A rank's standard output is a pipe to mpiexec, which the C library
 * buffers fully: the lines a process printed before it died (a failure, a
 * SIGKILL, MPI_Abort) would be lost with its buffer, and ranks' lines
 * would arrive in large chunks. Open MPI gives ranks a pseudo-terminal,
 * so their output is line buffered; mpistages does the same by setting the
 * buffering before main runs, when setvbuf may still be called. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void mpistages_line_buffered_stdout(void)
{
    if (getenv("MPISTAGES_RANK") && !isatty(STDOUT_FILENO))
        setvbuf(stdout, NULL, _IOLBF, 0);
}
