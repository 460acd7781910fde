/* MPI 4.0's communicators made from groups alone: the even ranks' and the
 * odd ranks' (MPI_Comm_create_from_group, with an error handler), an
 * inter-communicator between them (MPI_Intercomm_create_from_groups), and
 * MPI 4.0's new error classes with their strings. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Group world, evens, odds;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ranks[64], ne = 0, no = 0;
    for (int r = 0; r < n; r += 2) ranks[ne++] = r;
    MPI_Group_incl(world, ne, ranks, &evens);
    for (int r = 1; r < n; r += 2) ranks[no++] = r;
    MPI_Group_incl(world, no, ranks, &odds);
    MPI_Group mine = rank % 2 ? odds : evens, other = rank % 2 ? evens : odds;
    MPI_Comm half;
    CHECK_RC(MPI_Comm_create_from_group(mine, rank % 2 ? "org.test.odds" : "org.test.evens", MPI_INFO_NULL,
                                        MPI_ERRORS_RETURN, &half));
    int size, sum = 0, hr;
    MPI_Comm_size(half, &size);
    MPI_Comm_rank(half, &hr);
    CHECK(size == (rank % 2 ? no : ne) && hr == rank / 2, "half: size %d rank %d", size, hr);
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int want = 0;
    for (int r = rank % 2; r < n; r += 2) want += r;
    CHECK(sum == want, "sum over my half %d, want %d", sum, want);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(half, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "the error handler given");
    if (n > 1) {
        MPI_Comm inter;
        CHECK_RC(MPI_Intercomm_create_from_groups(mine, 0, other, 0, "org.test.pair", MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        int remote, flag;
        MPI_Comm_remote_size(inter, &remote);
        MPI_Comm_test_inter(inter, &flag);
        CHECK(flag && remote == (rank % 2 ? ne : no), "remote size %d", remote);
        /* The two leaders swap their world ranks over it. */
        if (hr == 0) {
            int got = -1;
            CHECK_RC(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 5, &got, 1, MPI_INT, 0, 5, inter, MPI_STATUS_IGNORE));
            CHECK(got == (rank % 2 ? 0 : 1), "leader got %d", got);
        }
        MPI_Comm_free(&inter);
    }
    MPI_Comm_free(&half);
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&world);
    char s[MPI_MAX_ERROR_STRING];
    int len, cls;
    int classes[] = {MPI_ERR_SESSION, MPI_ERR_PROC_ABORTED, MPI_ERR_VALUE_TOO_LARGE};
    for (int i = 0; i < 3; i++) {
        MPI_Error_class(classes[i], &cls);
        MPI_Error_string(classes[i], s, &len);
        CHECK(cls == classes[i] && strncmp(s, "MPI_ERR_", 8) == 0, "class %d: %s", classes[i], s);
    }
    CHECK(MPI_F_SOURCE == 0 && MPI_F_TAG == 1 && MPI_F_ERROR == 2, "Fortran status indexes");
    pass("from_group");
    MPI_Finalize();
    return 0;
}
