/* Rank DIES (argument, default 1) is SIGKILLed before it calls MPI_Init,
 * the way a process lost with its host during start-up is: the others are
 * at the start-up fence. Under ULFM the job must end with a message that
 * says so and a failure status (it ended with status 0 and no word, the
 * others' MPI_Init failing with "expected a welcome from mpiexec"). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *me = getenv("MPISTAGES_RANK");
    int dies = argc > 1 ? atoi(argv[1]) : 1;
    if (me && atoi(me) == dies) raise(SIGKILL);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d past MPI_Init\n", rank);
    MPI_Finalize();
    return 0;
}
