/* Derived datatypes: contiguous, vector, hvector, indexed, hindexed,
 * indexed_block, struct (with the padding C gives it), resized; sizes and
 * extents; send one layout, receive another; MPI_Pack / MPI_Unpack. */
#include "check.h"
#include <stddef.h>
#include <string.h>

typedef struct { char c; double d; int i[3]; } rec;

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    MPI_Aint lb, ext;
    int sz;

    /* Column of a 6x5 matrix (vector), received as contiguous. */
    double m[6][5], col[6];
    for (int i = 0; i < 6; i++) for (int j = 0; j < 5; j++) m[i][j] = rank * 100 + i * 10 + j;
    MPI_Datatype column;
    MPI_Type_vector(6, 1, 5, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    MPI_Type_size(column, &sz);
    MPI_Type_get_extent(column, &lb, &ext);
    CHECK(sz == 48 && lb == 0 && ext == (5 * 5 + 1) * 8, "vector size %d extent %ld", sz, (long)ext);
    MPI_Sendrecv(&m[0][2], 1, column, right, 1, col, 6, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 6; i++) CHECK(col[i] == left * 100 + i * 10 + 2, "column %d", i);

    /* Two columns via resized column type (count 2). */
    MPI_Datatype colr;
    MPI_Type_create_resized(column, 0, sizeof(double), &colr);
    MPI_Type_commit(&colr);
    double two[12];
    MPI_Sendrecv(&m[0][1], 2, colr, right, 2, two, 12, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 6; i++) CHECK(two[i] == left * 100 + i * 10 + 1 && two[6 + i] == left * 100 + i * 10 + 2, "resized columns");

    /* Indexed / hindexed / indexed_block into a gappy receive. */
    int src[10], dst[10];
    for (int i = 0; i < 10; i++) { src[i] = rank * 10 + i; dst[i] = -1; }
    int bl[3] = {2, 1, 3}, dp[3] = {7, 0, 3};
    MPI_Datatype idx, hidx, blk;
    MPI_Type_indexed(3, bl, dp, MPI_INT, &idx);
    MPI_Type_commit(&idx);
    MPI_Type_size(idx, &sz);
    CHECK(sz == 24, "indexed size");
    MPI_Aint hd[3] = {7 * 4, 0, 3 * 4};
    MPI_Type_create_hindexed(3, bl, hd, MPI_INT, &hidx);
    MPI_Type_commit(&hidx);
    MPI_Sendrecv(src, 1, idx, right, 3, dst, 1, hidx, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int want[10] = {0, -1, -1, 3, 4, 5, -1, 7, 8, -1};
    for (int i = 0; i < 10; i++) CHECK(dst[i] == (want[i] < 0 ? -1 : left * 10 + want[i]), "indexed dst[%d]=%d", i, dst[i]);
    int bd[2] = {1, 6};
    MPI_Type_create_indexed_block(2, 2, bd, MPI_INT, &blk);
    MPI_Type_commit(&blk);
    int packed4[4];
    MPI_Sendrecv(src, 1, blk, right, 4, packed4, 4, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(packed4[0] == left * 10 + 1 && packed4[1] == left * 10 + 2 && packed4[2] == left * 10 + 6 && packed4[3] == left * 10 + 7, "indexed_block");

    /* Struct matching the C layout, array of 3, hvector of it. */
    rec r[3], got[3];
    memset(r, 0, sizeof r);
    memset(got, 0, sizeof got);
    for (int k = 0; k < 3; k++) { r[k].c = 'a' + rank + k; r[k].d = rank + k * 0.5; r[k].i[0] = k; r[k].i[1] = rank; r[k].i[2] = -k; }
    int sbl[3] = {1, 1, 3};
    MPI_Aint sdp[3] = {offsetof(rec, c), offsetof(rec, d), offsetof(rec, i)};
    MPI_Datatype sty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, st;
    MPI_Type_create_struct(3, sbl, sdp, sty, &st);
    MPI_Type_commit(&st);
    MPI_Type_get_extent(st, &lb, &ext);
    MPI_Type_size(st, &sz);
    CHECK(ext == sizeof(rec) && sz == 1 + 8 + 12, "struct extent %ld size %d", (long)ext, sz);
    MPI_Sendrecv(r, 3, st, right, 5, got, 3, st, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int k = 0; k < 3; k++)
        CHECK(got[k].c == 'a' + left + k && got[k].d == left + k * 0.5 && got[k].i[1] == left && got[k].i[2] == -k, "struct %d", k);
    MPI_Aint tlb, text;
    MPI_Type_get_true_extent(st, &tlb, &text);
    CHECK(tlb == 0 && text == offsetof(rec, i) + 12, "true extent %ld", (long)text);
    /* Fortran 90's parameterized types: predefined, their envelope says
     * how they were asked for, the same handle for the same question. */
    MPI_Datatype f1, f2, f3;
    CHECK_RC(MPI_Type_create_f90_integer(9, &f1));
    CHECK_RC(MPI_Type_create_f90_integer(9, &f2));
    int fsz, fni, fna, fnt, fcomb, fints[2];
    MPI_Type_size(f1, &fsz);
    CHECK(f1 == f2 && fsz == 4, "f90 integer of range 9: %d bytes", fsz);
    CHECK_RC(MPI_Type_get_envelope(f1, &fni, &fna, &fnt, &fcomb));
    CHECK(fcomb == MPI_COMBINER_F90_INTEGER && fni == 1 && fna == 0 && fnt == 0, "f90 integer envelope %d", fcomb);
    CHECK_RC(MPI_Type_get_contents(f1, 1, 0, 0, fints, NULL, NULL));
    CHECK(fints[0] == 9, "f90 integer contents %d", fints[0]);
    CHECK_RC(MPI_Type_create_f90_real(15, 300, &f3));
    MPI_Type_size(f3, &fsz);
    CHECK(fsz == 8, "f90 real (15, 300): %d bytes", fsz);
    CHECK_RC(MPI_Type_create_f90_complex(6, MPI_UNDEFINED, &f3));
    MPI_Type_size(f3, &fsz);
    CHECK(fsz == 8, "f90 complex of precision 6: %d bytes", fsz);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Type_create_f90_real(30, 4000, &f3) == MPI_ERR_ARG, "no real of precision 30");
    CHECK(MPI_Type_free(&f1) == MPI_ERR_TYPE, "an f90 type is not freed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Count xlb, xext, xtlb, xtext;
    CHECK_RC(MPI_Type_get_extent_x(st, &xlb, &xext));
    CHECK_RC(MPI_Type_get_true_extent_x(st, &xtlb, &xtext));
    CHECK(xlb == lb && xext == ext && xtlb == tlb && xtext == text, "the _x extents: %lld %lld %lld %lld", xlb, xext, xtlb,
          xtext);
    MPI_Datatype hv;
    MPI_Type_create_hvector(2, 1, 2 * sizeof(rec), st, &hv);
    MPI_Type_commit(&hv);
    rec four[4], pair[2];
    memset(four, 0, sizeof four);
    for (int k = 0; k < 4; k++) four[k].d = k + rank * 10;
    MPI_Sendrecv(four, 1, hv, right, 6, pair, 2, st, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(pair[0].d == left * 10 && pair[1].d == 2 + left * 10, "hvector of struct");

    /* Contiguous of vector; Pack / Unpack round trip. */
    MPI_Datatype cv;
    MPI_Type_contiguous(2, column, &cv);
    MPI_Type_commit(&cv);
    MPI_Type_size(cv, &sz);
    CHECK(sz == 96, "contiguous of vector");
    char pbuf[256];
    int pos = 0, psz;
    MPI_Pack_size(1, column, MPI_COMM_WORLD, &psz);
    CHECK(psz >= 48, "pack size");
    int tagv = 42;
    CHECK_RC(MPI_Pack(&tagv, 1, MPI_INT, pbuf, sizeof pbuf, &pos, MPI_COMM_WORLD));
    CHECK_RC(MPI_Pack(&m[0][4], 1, column, pbuf, sizeof pbuf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 4 + 48, "pack position %d", pos);
    MPI_Sendrecv_replace(pbuf, pos, MPI_PACKED, right, 7, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int t2, upos = 0;
    double c2[6];
    CHECK_RC(MPI_Unpack(pbuf, pos, &upos, &t2, 1, MPI_INT, MPI_COMM_WORLD));
    CHECK_RC(MPI_Unpack(pbuf, pos, &upos, c2, 6, MPI_DOUBLE, MPI_COMM_WORLD));
    CHECK(t2 == 42 && c2[5] == left * 100 + 54, "unpack");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pos = 250;
    CHECK(MPI_Pack(&m[0][0], 1, column, pbuf, sizeof pbuf, &pos, MPI_COMM_WORLD) != MPI_SUCCESS, "pack overflow detected");

    /* Predefined sizes. */
    int sizes[][2] = {{MPI_CHAR, 1}, {MPI_SHORT, 2}, {MPI_INT, 4}, {MPI_LONG, 8}, {MPI_LONG_LONG, 8}, {MPI_FLOAT, 4},
                      {MPI_DOUBLE, 8}, {MPI_LONG_DOUBLE, 16}, {MPI_C_BOOL, 1}, {MPI_INT64_T, 8}, {MPI_UINT16_T, 2},
                      {MPI_C_DOUBLE_COMPLEX, 16}, {MPI_DOUBLE_INT, 12}, {MPI_2INT, 8}, {MPI_BYTE, 1}, {MPI_AINT, 8}};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        MPI_Type_size(sizes[k][0], &sz);
        CHECK(sz == sizes[k][1], "size of predefined type %d: %d", sizes[k][0], sz);
    }
    MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext);
    CHECK(ext == 16, "double_int extent");

    /* An uncommitted type cannot communicate; a predefined one cannot be freed. */
    MPI_Datatype raw;
    MPI_Type_contiguous(2, MPI_INT, &raw);
    int two_i[2];
    CHECK(MPI_Send(two_i, 1, raw, right, 8, MPI_COMM_WORLD) == MPI_ERR_TYPE, "uncommitted type used");
    MPI_Datatype pd = MPI_INT;
    CHECK(MPI_Type_free(&pd) == MPI_ERR_TYPE, "free a predefined type");
    MPI_Type_free(&raw);

    MPI_Type_free(&column); MPI_Type_free(&colr); MPI_Type_free(&idx); MPI_Type_free(&hidx);
    MPI_Type_free(&blk); MPI_Type_free(&st); MPI_Type_free(&hv); MPI_Type_free(&cv);
    CHECK(cv == MPI_DATATYPE_NULL, "type free resets the handle");
    pass("datatypes");
    MPI_Finalize();
    return 0;
}
