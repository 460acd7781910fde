/* MPI_Pcontrol is variadic, which a Rust function cannot be: it is here.
 * mpistages has no profiling levels of its own, so it accepts any level
 * and does nothing, as the standard allows; a profiling library linked
 * before ours replaces MPI_Pcontrol and calls PMPI_Pcontrol. */
#include "mpi.h"

int PMPI_Pcontrol(const int level, ...);

int PMPI_Pcontrol(const int level, ...)
{
    (void)level;
    return MPI_SUCCESS;
}

int MPI_Pcontrol(const int level, ...)
{
    (void)level;
    return MPI_SUCCESS;
}
