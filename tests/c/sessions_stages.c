/* examples/minimal_resilient.c written with a session instead of MPI_Init:
 * the library's communicator comes from the WORLD process set, is made at
 * fault epoch 0 only (a replacement gets it back with the MPI state it
 * restores at MPI_Session_init) and is protected like the data. MPI ends
 * as the program exits. Prints the same sum however ranks are killed. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 10000
#define STEPS 60
#define EVERY 10

static double field[N];
static double sum;
static int step;
static MPI_Comm lib = MPI_COMM_NULL;

static int compute_step(int rank) {
    for (int i = 0; i < N; i++) field[i] += rank + 0.001 * step;
    double mine = field[step % N], all;
    int rc = MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, lib);
    if (rc == MPI_SUCCESS) {
        sum += all;
        step++;
    }
    return rc;
}

static void reload(void) {
    int epoch;
    MPIX_Get_fault_epoch(&epoch);
    if (epoch > 0) {
        if (MPIX_Checkpoint_restore() != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 2);
    } else {
        memset(field, 0, sizeof field);
        sum = 0;
        step = 0;
    }
}

int main(void) {
    MPI_Session s;
    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) != MPI_SUCCESS) return 4;
    int epoch, rank, rc;
    MPIX_Get_fault_epoch(&epoch);
    if (epoch == 0) {
        MPI_Group world;
        MPI_Group_from_session_pset(s, "mpi://WORLD", &world);
        if (MPI_Comm_create_from_group(world, "org.mpistages.test.stages", MPI_INFO_NULL, MPI_ERRORS_RETURN, &lib) !=
            MPI_SUCCESS)
            return 5;
        MPI_Group_free(&world);
    }
    MPIX_Protect(0, field, N, MPI_DOUBLE);
    MPIX_Protect(1, &sum, 1, MPI_DOUBLE);
    MPIX_Protect(2, &step, 1, MPI_INT);
    MPIX_Protect(3, &lib, 1, MPI_INT);
    reload();
    MPI_Comm_rank(lib, &rank);
    while (step < STEPS) {
        rc = compute_step(rank);
        if (rc == MPI_SUCCESS && step % EVERY == 0) rc = MPIX_Checkpoint_write();
        if (rc == MPIX_TRY_RELOAD) {
            while ((rc = MPIX_Checkpoint_read()) == MPIX_TRY_RELOAD) {
            }
            if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
            reload();
        } else if (rc != MPI_SUCCESS) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) printf("sessions_stages: %d steps, sum %.6f\n", step, sum);
    MPI_Session_finalize(&s);
    return 0;
}
