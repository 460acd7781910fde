/* Parallel HDF5 over mpistages' MPI-IO (bench/hdf5): every rank writes
 * its block of rows of a 2-D dataset of doubles, and a strided column
 * block of a second dataset, with collective transfers
 * (H5FD_MPIO_COLLECTIVE), plus an attribute and independent writes of a
 * third dataset; the file is closed, reopened by all, and every value is
 * read back (collective and independent) and checked, also by a rank
 * that did not write it. Prints "hdf5 ok ROWSxCOLS" on success; any
 * mismatch or HDF5 error ends with status 1.
 *
 *   hdf5_dataset FILE [ROWS_PER_RANK] [COLS]
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                              \
    do {                                                                      \
        if ((x) < 0) {                                                        \
            fprintf(stderr, "rank %d: %s failed at line %d\n", rank, #x,     \
                    __LINE__);                                                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                     \
        }                                                                     \
    } while (0)

static int rank, size;

static double value(int set, hsize_t r, hsize_t c) {
    return set * 1e9 + (double)r * 1000.0 + (double)c;
}

/* Opens FILE with the MPI-IO driver on MPI_COMM_WORLD. */
static hid_t open_file(const char *path, int create) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(fapl);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    hid_t f = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                     : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(f);
    H5Pclose(fapl);
    return f;
}

static hid_t transfer(H5FD_mpio_xfer_t mode) {
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK(dxpl);
    CHECK(H5Pset_dxpl_mpio(dxpl, mode));
    return dxpl;
}

/* Selects rows [r0, r0+nr) x columns [c0, c0+nc) of a dataset's space
 * (stride `step` between the columns' blocks of one). */
static hid_t rows(hid_t space, hsize_t r0, hsize_t nr, hsize_t c0, hsize_t nc,
                  hsize_t step) {
    hsize_t start[2] = {r0, c0}, stride[2] = {1, step}, count[2] = {nr, nc};
    CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, stride, count,
                              NULL));
    return space;
}

static long check_set(hid_t f, const char *name, int set, hsize_t R, hsize_t C,
                      hsize_t r0, hsize_t nr, H5FD_mpio_xfer_t mode) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    CHECK(d);
    hid_t fs = H5Dget_space(d);
    hsize_t dims[2];
    CHECK(H5Sget_simple_extent_dims(fs, dims, NULL));
    if (dims[0] != R || dims[1] != C) {
        fprintf(stderr, "rank %d: %s has %llux%llu\n", rank, name,
                (unsigned long long)dims[0], (unsigned long long)dims[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rows(fs, r0, nr, 0, C, 1);
    hsize_t mdims[2] = {nr, C};
    hid_t ms = H5Screate_simple(2, mdims, NULL);
    double *buf = malloc(nr * C * sizeof(double));
    hid_t x = transfer(mode);
    CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, ms, fs, x, buf));
    long bad = 0;
    for (hsize_t r = 0; r < nr; r++)
        for (hsize_t c = 0; c < C; c++)
            if (buf[r * C + c] != value(set, r0 + r, c) && bad++ < 3)
                fprintf(stderr, "rank %d: %s[%llu][%llu] = %g, not %g\n", rank,
                        name, (unsigned long long)(r0 + r),
                        (unsigned long long)c, buf[r * C + c],
                        value(set, r0 + r, c));
    free(buf);
    H5Pclose(x);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    return bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: hdf5_dataset FILE [ROWS_PER_RANK] [COLS]\n");
        MPI_Finalize();
        return 2;
    }
    const char *path = argv[1];
    hsize_t per = argc > 2 ? strtoull(argv[2], NULL, 10) : 64;
    hsize_t C = argc > 3 ? strtoull(argv[3], NULL, 10) : 256;
    hsize_t R = per * size, r0 = per * rank;

    /* Write. */
    hid_t f = open_file(path, 1);
    hsize_t dims[2] = {R, C};
    const char *names[3] = {"rows", "columns", "independent"};
    hid_t d[3];
    for (int i = 0; i < 3; i++) {
        hid_t s = H5Screate_simple(2, dims, NULL);
        d[i] = H5Dcreate2(f, names[i], H5T_NATIVE_DOUBLE, s, H5P_DEFAULT,
                          H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d[i]);
        H5Sclose(s);
    }
    /* rows: this rank's block of rows, collectively. */
    double *buf = malloc(per * C * sizeof(double));
    for (hsize_t r = 0; r < per; r++)
        for (hsize_t c = 0; c < C; c++)
            buf[r * C + c] = value(0, r0 + r, c);
    hid_t coll = transfer(H5FD_MPIO_COLLECTIVE);
    hid_t indep = transfer(H5FD_MPIO_INDEPENDENT);
    hsize_t mdims[2] = {per, C};
    hid_t ms = H5Screate_simple(2, mdims, NULL);
    hid_t fs = rows(H5Dget_space(d[0]), r0, per, 0, C, 1);
    CHECK(H5Dwrite(d[0], H5T_NATIVE_DOUBLE, ms, fs, coll, buf));
    H5Sclose(fs);
    H5Sclose(ms);
    /* columns: rank k writes every size-th column starting at k, all
     * rows, collectively (interleaved in the file). */
    hsize_t ncols = C / size + (rank < (int)(C % size));
    double *cols = malloc(R * (ncols ? ncols : 1) * sizeof(double));
    for (hsize_t r = 0; r < R; r++)
        for (hsize_t j = 0; j < ncols; j++)
            cols[r * ncols + j] = value(1, r, rank + j * size);
    hsize_t cdims[2] = {R, ncols};
    ms = H5Screate_simple(2, cdims, NULL);
    fs = H5Dget_space(d[1]);
    if (ncols)
        rows(fs, 0, R, rank, ncols, size);
    else {
        H5Sselect_none(fs);
        H5Sselect_none(ms);
    }
    CHECK(H5Dwrite(d[1], H5T_NATIVE_DOUBLE, ms, fs, coll, cols));
    H5Sclose(fs);
    H5Sclose(ms);
    /* independent: this rank's rows, one H5Dwrite per row. */
    ms = H5Screate_simple(2, (hsize_t[2]){1, C}, NULL);
    for (hsize_t r = 0; r < per; r++) {
        for (hsize_t c = 0; c < C; c++)
            buf[c] = value(2, r0 + r, c);
        fs = rows(H5Dget_space(d[2]), r0 + r, 1, 0, C, 1);
        CHECK(H5Dwrite(d[2], H5T_NATIVE_DOUBLE, ms, fs, indep, buf));
        H5Sclose(fs);
    }
    H5Sclose(ms);
    /* An attribute of the file's root group, written by all. */
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "ranks", H5T_NATIVE_INT, as, H5P_DEFAULT,
                         H5P_DEFAULT);
    CHECK(a);
    CHECK(H5Awrite(a, H5T_NATIVE_INT, &size));
    H5Aclose(a);
    H5Sclose(as);
    for (int i = 0; i < 3; i++)
        H5Dclose(d[i]);
    CHECK(H5Fclose(f));
    free(cols);
    free(buf);

    /* Read back: each rank reads the rows of the next rank. */
    f = open_file(path, 0);
    int next = (rank + 1) % size, ranks = 0;
    hsize_t n0 = per * next;
    long bad = check_set(f, "rows", 0, R, C, n0, per, H5FD_MPIO_COLLECTIVE);
    bad += check_set(f, "columns", 1, R, C, n0, per, H5FD_MPIO_COLLECTIVE);
    bad += check_set(f, "independent", 2, R, C, n0, per,
                     H5FD_MPIO_INDEPENDENT);
    a = H5Aopen(f, "ranks", H5P_DEFAULT);
    CHECK(a);
    CHECK(H5Aread(a, H5T_NATIVE_INT, &ranks));
    H5Aclose(a);
    if (ranks != size) {
        fprintf(stderr, "rank %d: attribute ranks = %d\n", rank, ranks);
        bad++;
    }
    CHECK(H5Fclose(f));
    H5Pclose(coll);
    H5Pclose(indep);
    long all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all == 0)
            printf("hdf5 ok %llux%llu on %d ranks\n", (unsigned long long)R,
                   (unsigned long long)C, size);
        else
            printf("hdf5 FAILED: %ld wrong values\n", all);
    }
    MPI_Finalize();
    return all != 0;
}
