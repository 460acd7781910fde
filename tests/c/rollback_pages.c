/* Checkpoints and restores of large regions, as a survivor's rollback
 * does them: the memory level's copy is made by a snapshot (when the
 * kernel gives userfaultfd write-protection) and a restore gives the
 * program the copy's pages instead of copying them. Checked byte for byte:
 * - regions at several offsets into a page (4 MiB + 3 bytes at 5 bytes
 *   in, 300 KiB page-aligned, a small one copied either way), written
 *   right after each checkpoint (the snapshot must keep the old bytes);
 * - a second restore of the same epoch (its copy in memory was given
 *   away: it comes from the tmpfs file);
 * - a region unprotected, freed, allocated anew and protected again;
 * - the next checkpoints reuse the pages the restores left.
 * Prints "OK rollback_pages". */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

enum { ROUNDS = 6 };

static unsigned char byte_of(int rank, int round, int region, size_t i)
{
    return (unsigned char)(rank * 31 + round * 7 + region * 3 + i % 251);
}

static void fill(unsigned char *p, size_t n, int rank, int round, int region)
{
    for (size_t i = 0; i < n; i++) p[i] = byte_of(rank, round, region, i);
}

static void check(const unsigned char *p, size_t n, int rank, int round, int region)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == byte_of(rank, round, region, i),
              "round %d region %d byte %zu: %u, not %u", round, region, i, p[i],
              byte_of(rank, round, region, i));
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t len[3] = {(4u << 20) + 3, 300u << 10, 1000};
    unsigned char *block = malloc(len[0] + 2 * 4096);
    unsigned char *r[3];
    r[0] = (unsigned char *)((((uintptr_t)block + 4095) & ~(uintptr_t)4095) + 5);
    r[1] = aligned_alloc(4096, len[1]);
    r[2] = malloc(len[2]);
    CHECK(block && r[1] && r[2], "out of memory");
    for (int k = 0; k < 3; k++) CHECK_RC(MPIX_Protect(k, r[k], (MPI_Count)len[k], MPI_BYTE));
    for (int round = 0; round < ROUNDS; round++) {
        if (round == ROUNDS / 2) {
            /* Freed and allocated anew between two checkpoints. */
            CHECK_RC(MPIX_Unprotect(1));
            free(r[1]);
            r[1] = aligned_alloc(4096, len[1]);
            CHECK(r[1], "out of memory");
            CHECK_RC(MPIX_Protect(1, r[1], (MPI_Count)len[1], MPI_BYTE));
        }
        for (int k = 0; k < 3; k++) fill(r[k], len[k], rank, round, k);
        CHECK_RC(MPIX_Checkpoint_write());
        /* The program goes on writing while the copy is made. */
        for (int k = 0; k < 3; k++) memset(r[k], 0xEE, len[k]);
        CHECK_RC(MPIX_Checkpoint_restore());
        for (int k = 0; k < 3; k++) check(r[k], len[k], rank, round, k);
        for (int k = 0; k < 3; k++) memset(r[k], 0x11, len[k]);
        CHECK_RC(MPIX_Checkpoint_restore());
        for (int k = 0; k < 3; k++) check(r[k], len[k], rank, round, k);
    }
    for (int k = 0; k < 3; k++) CHECK_RC(MPIX_Unprotect(k));
    free(block);
    free(r[1]);
    free(r[2]);
    pass("rollback_pages");
    MPI_Finalize();
    return 0;
}
