/* Application-level checkpoint files for the MPI Stages examples: the
 * application saves its data as epoch e+1 just before MPIX_Checkpoint_write
 * and, after a recovery, reads epoch MPIX_Get_fault_epoch() back. Files are
 * DIR/NAME.RANK.EPOCH; the one from two epochs back is removed (the
 * committed epoch is at most one behind what a rank wrote last). */
#ifndef APPCKPT_H
#define APPCKPT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void appckpt_path(char *out, size_t n, const char *dir, const char *name, int rank, int epoch)
{
    snprintf(out, n, "%s/%s.%d.%d", dir, name, rank, epoch);
}

/* Writes len bytes as epoch `epoch`; 0 on success. */
static int appckpt_save(const char *dir, const char *name, int rank, int epoch, const void *data, size_t len)
{
    char path[4096], tmp[4200];
    appckpt_path(path, sizeof path, dir, name, rank, epoch);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || w != len || rename(tmp, path) != 0) return -1;
    if (epoch >= 3) {
        appckpt_path(path, sizeof path, dir, name, rank, epoch - 3);
        remove(path);
    }
    return 0;
}

/* Reads exactly len bytes of epoch `epoch`; 0 on success. */
static int appckpt_load(const char *dir, const char *name, int rank, int epoch, void *data, size_t len)
{
    char path[4096];
    appckpt_path(path, sizeof path, dir, name, rank, epoch);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t r = fread(data, 1, len, f);
    int extra = fgetc(f);
    fclose(f);
    return (r == len && extra == EOF) ? 0 : -1;
}

/* Removes this rank's files (epochs 0..last). */
static void appckpt_clean(const char *dir, const char *name, int rank, int last)
{
    char path[4096];
    for (int e = last - 3 < 0 ? 0 : last - 3; e <= last + 1; e++) {
        appckpt_path(path, sizeof path, dir, name, rank, e);
        remove(path);
    }
}

#endif
