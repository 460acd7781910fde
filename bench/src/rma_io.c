/* One-sided and MPI-IO benchmarks for bench/rma-io, the same source for
 * every MPI:
 *
 *   rma_io put            (2 ranks) MPI_Put latency: one put of S bytes
 *                         and MPI_Win_flush, in a passive epoch
 *                         (lock_all), rank 0 to rank 1; and bandwidth:
 *                         64 puts of S bytes, then one flush.
 *                         Prints "put_latency S us" and
 *                         "put_bandwidth S MB/s" per size.
 *   rma_io write PATH MB  (N ranks) each rank writes MB MiB with
 *                         MPI_File_write_all, in calls of 16 MiB, its
 *                         block after the previous rank's (contiguous),
 *                         then the same amount interleaved (a view whose
 *                         filetype gives each rank every N-th 1 MiB
 *                         block). Prints "write_contiguous BYTES MB/s"
 *                         and "write_interleaved BYTES MB/s" (the slowest
 *                         rank's time, from a barrier before to the close
 *                         after, sync included), and checks a sample of
 *                         the file. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void put_bench(void)
{
    const int window = 64;
    const size_t max = 4 << 20;
    char *buf = malloc(max);
    memset(buf, rank + 1, max);
    char *base;
    MPI_Win win;
    MPI_Win_allocate(max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_lock_all(0, win);
    for (size_t s = 8; s <= max; s *= 4) {
        int iters = s <= 65536 ? 1000 : 50;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (int i = 0; i < 10; i++) {
                MPI_Put(buf, (int)s, MPI_BYTE, 1, 0, (int)s, MPI_BYTE, win);
                MPI_Win_flush(1, win);
            }
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                MPI_Put(buf, (int)s, MPI_BYTE, 1, 0, (int)s, MPI_BYTE, win);
                MPI_Win_flush(1, win);
            }
            double lat = (MPI_Wtime() - t0) / iters;
            int rounds = s <= 65536 ? 100 : 4;
            t0 = MPI_Wtime();
            for (int i = 0; i < rounds; i++) {
                for (int k = 0; k < window; k++) MPI_Put(buf, (int)s, MPI_BYTE, 1, 0, (int)s, MPI_BYTE, win);
                MPI_Win_flush(1, win);
            }
            double bw = (double)s * window * rounds / (MPI_Wtime() - t0) / 1e6;
            printf("put_latency %zu %.3f\n", s, lat * 1e6);
            printf("put_bandwidth %zu %.1f\n", s, bw);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win_unlock_all(win);
    if (rank == 1 && base[0] != 1) fprintf(stderr, "rma_io: the target holds %d, not 1\n", base[0]);
    MPI_Win_free(&win);
    free(buf);
}

/* One collective write of `mb` MiB per rank through the file's current
 * view, at etype offset 0, in calls of 16 MiB; returns the slowest rank's
 * MB/s of the whole file. */
static double write_all(MPI_File fh, char *buf, long mb)
{
    const long chunk = 16;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long done = 0; done < mb; done += chunk) {
        long n = mb - done < chunk ? mb - done : chunk;
        MPI_File_write_all(fh, buf + (done << 20), (int)(n << 20), MPI_BYTE, MPI_STATUS_IGNORE);
    }
    MPI_File_sync(fh);
    double mine = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return (double)(mb << 20) * size / slowest / 1e6;
}

static void write_bench(const char *path, long mb)
{
    char *buf = malloc(mb << 20);
    for (long i = 0; i < mb << 20; i++) buf[i] = (char)(rank * 31 + (i >> 20));
    MPI_File fh;
    MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    /* Contiguous: this rank's block after the others'. */
    MPI_File_set_view(fh, (MPI_Offset)rank * (mb << 20), MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    double contiguous = write_all(fh, buf, mb);
    /* Interleaved: every size-th MiB is this rank's. */
    MPI_Datatype block, tiled;
    MPI_Type_contiguous(1 << 20, MPI_BYTE, &block);
    MPI_Type_create_resized(block, 0, (MPI_Aint)size << 20, &tiled);
    MPI_Type_commit(&tiled);
    MPI_File_set_view(fh, (MPI_Offset)rank << 20, MPI_BYTE, tiled, "native", MPI_INFO_NULL);
    double interleaved = write_all(fh, buf, mb);
    /* A sample: the last rank's third MiB, its first byte. */
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    char b = 0;
    long k = mb < 3 ? 0 : 2;
    MPI_File_read_at(fh, ((MPI_Offset)k * size + (size - 1)) << 20, &b, 1, MPI_BYTE, MPI_STATUS_IGNORE);
    if (b != (char)((size - 1) * 31 + k)) fprintf(stderr, "rma_io: the file holds %d, not %d\n", b, (size - 1) * 31 + (int)k);
    MPI_File_close(&fh);
    if (rank == 0) {
        printf("write_contiguous %ld %.1f\n", (mb << 20) * size, contiguous);
        printf("write_interleaved %ld %.1f\n", (mb << 20) * size, interleaved);
        MPI_File_delete(path, MPI_INFO_NULL);
    }
    MPI_Type_free(&tiled);
    MPI_Type_free(&block);
    free(buf);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && !strcmp(argv[1], "put") && size == 2) {
        put_bench();
    } else if (argc > 3 && !strcmp(argv[1], "write")) {
        write_bench(argv[2], atol(argv[3]));
    } else if (rank == 0) {
        fprintf(stderr, "usage: rma_io put (2 ranks) | rma_io write PATH MB\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
