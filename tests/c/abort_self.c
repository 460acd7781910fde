/* MPI_Abort on MPI_COMM_SELF (ULFM tutorials inject failures so): under
 * --with-ft ulfm only the caller ends and the others go on, shrink and
 * finish ("abort_self ok <rank>"); without fault tolerance the job ends. */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 1) MPI_Abort(MPI_COMM_SELF, 3);
    int rc = MPI_Barrier(MPI_COMM_WORLD), cls;
    MPI_Error_class(rc, &cls);
    if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_REVOKED) {
        fprintf(stderr, "rank %d: barrier gave class %d\n", rank, cls);
        return 1;
    }
    MPI_Comm shrunk;
    int n = -1;
    if (MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) return 1;
    MPI_Comm_size(shrunk, &n);
    if (n != size - 1) {
        fprintf(stderr, "rank %d: shrunk to %d\n", rank, n);
        return 1;
    }
    printf("abort_self ok %d\n", rank);
    MPI_Comm_free(&shrunk);
    MPI_Finalize();
    return 0;
}
