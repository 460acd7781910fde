/* MPI-IO: every rank writes and reads back at
 * explicit offsets, at its individual pointer, at the shared pointer and
 * in rank order, and through a strided view, blocking, non-blocking and
 * split, with and without collective buffering, and in the external32
 * representation; sizes, seeks, modes and errors. The directory comes from
 * FILE_TEST_DIR (the harness makes and removes it). */
#include "check.h"
#include <string.h>
#include <unistd.h>

static char dir[512];

static void path(char *out, const char *name) {
    snprintf(out, 600, "%s/%s", dir, name);
}

/* Each rank writes 100 ints (its rank * 1000 + i) at its block with
 * write_at_all, reads a neighbour's block back, and checks the size. */
static void explicit_offsets(int rank, int size) {
    char name[600];
    path(name, "at.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    int buf[100];
    for (int i = 0; i < 100; i++) buf[i] = rank * 1000 + i;
    MPI_Status st;
    CHECK_RC(MPI_File_write_at_all(fh, (MPI_Offset)rank * sizeof buf, buf, 100, MPI_INT, &st));
    int n = -1;
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 100, "wrote %d ints", n);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset sz = -1;
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == (MPI_Offset)size * (MPI_Offset)sizeof buf, "size %lld", (long long)sz);
    int peer = (rank + 1) % size, got[100];
    CHECK_RC(MPI_File_read_at(fh, (MPI_Offset)peer * sizeof got, got, 100, MPI_INT, &st));
    for (int i = 0; i < 100; i++) CHECK(got[i] == peer * 1000 + i, "got[%d] = %d", i, got[i]);
    /* A read past the end gets what there is: the last 10 ints. */
    MPI_Offset last = sz - 10 * (MPI_Offset)sizeof(int);
    CHECK_RC(MPI_File_read_at(fh, last, got, 100, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 10 && got[9] == (size - 1) * 1000 + 99, "short read: %d ints, last %d", n, got[9]);
    /* Everyone has read before anyone writes past the end. */
    MPI_Barrier(MPI_COMM_WORLD);
    /* A strided memory type: every other int of 20 goes to the file. */
    MPI_Datatype every_other;
    MPI_Type_vector(10, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int src[20], dense[10];
    for (int i = 0; i < 20; i++) src[i] = rank * 100 + i;
    MPI_Offset at = sz + (MPI_Offset)rank * sizeof dense;
    CHECK_RC(MPI_File_write_at(fh, at, src, 1, every_other, &st));
    CHECK_RC(MPI_File_read_at(fh, at, dense, 10, MPI_INT, &st));
    for (int i = 0; i < 10; i++) CHECK(dense[i] == rank * 100 + 2 * i, "dense[%d] = %d", i, dense[i]);
    MPI_Type_free(&every_other);
    CHECK_RC(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL, "close must set MPI_FILE_NULL");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK_RC(MPI_File_delete(name, MPI_INFO_NULL));
}

/* The individual pointer: seek to the rank's block, write, seek back,
 * read; get_position and get_byte_offset follow. */
static void individual_pointer(int rank) {
    char name[600];
    path(name, "ind.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    double v[4] = {rank + 0.5, rank + 1.5, rank + 2.5, rank + 3.5}, w[4];
    CHECK_RC(MPI_File_seek(fh, (MPI_Offset)rank * sizeof v, MPI_SEEK_SET));
    CHECK_RC(MPI_File_write_all(fh, v, 4, MPI_DOUBLE, MPI_STATUS_IGNORE));
    MPI_Offset pos = -1, byte = -1;
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)(rank + 1) * sizeof v, "position %lld", (long long)pos);
    CHECK_RC(MPI_File_get_byte_offset(fh, pos, &byte));
    CHECK(byte == pos, "byte offset %lld", (long long)byte);
    CHECK_RC(MPI_File_seek(fh, -(MPI_Offset)sizeof v, MPI_SEEK_CUR));
    CHECK_RC(MPI_File_read(fh, w, 4, MPI_DOUBLE, MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(w[i] == v[i], "w[%d] = %g", i, w[i]);
    CHECK(MPI_File_seek(fh, -1, MPI_SEEK_SET) == MPI_ERR_ARG, "a negative position is refused");
    CHECK(MPI_File_seek(fh, 0, 12345) == MPI_ERR_ARG, "a bad whence is refused");
    int amode = 0;
    CHECK_RC(MPI_File_get_amode(fh, &amode));
    CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE), "amode %#x", amode);
    MPI_Group g, wg;
    int cmp = -1;
    CHECK_RC(MPI_File_get_group(fh, &g));
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_compare(g, wg, &cmp);
    CHECK(cmp == MPI_IDENT, "the file's group is the world's (%d)", cmp);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Offset disp = -1;
    MPI_Datatype et = MPI_DATATYPE_NULL, ft = MPI_DATATYPE_NULL;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK_RC(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(disp == 0 && et == MPI_BYTE && ft == MPI_BYTE && strcmp(rep, "native") == 0, "view %s", rep);
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(name, F_OK) != 0, "MPI_MODE_DELETE_ON_CLOSE left %s", name);
}

/* The shared pointer: each rank appends its record once; every record
 * lands exactly once. Then write_ordered puts records in rank order. */
static void shared_pointer(int rank, int size) {
    char name[600];
    path(name, "shared.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh));
    int rec[3] = {rank, rank * rank, -rank};
    CHECK_RC(MPI_File_write_shared(fh, rec, 3, MPI_INT, MPI_STATUS_IGNORE));
    /* Only the shared pointer exists in sequential mode. */
    CHECK(MPI_File_write_at(fh, 0, rec, 3, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_UNSUPPORTED_OPERATION,
          "write_at on a sequential file is refused");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset sp = -1;
    CHECK_RC(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == (MPI_Offset)size * sizeof rec, "shared pointer at %lld", (long long)sp);
    int mine[2] = {rank, 7};
    CHECK_RC(MPI_File_write_ordered(fh, mine, rank == 0 ? 1 : 2, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_close(&fh));

    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    int all[3 * 64], seen[64] = {0};
    CHECK_RC(MPI_File_read_at_all(fh, 0, all, 3 * size, MPI_INT, MPI_STATUS_IGNORE));
    for (int i = 0; i < size; i++) {
        int r = all[3 * i];
        CHECK(r >= 0 && r < size && all[3 * i + 1] == r * r && all[3 * i + 2] == -r, "record %d: %d %d %d", i, r, all[3 * i + 1], all[3 * i + 2]);
        seen[r]++;
    }
    for (int r = 0; r < size; r++) CHECK(seen[r] == 1, "rank %d's record %d times", r, seen[r]);
    /* Ordered: rank 0's one int, then (r, 7) for each other rank. */
    int ord[128];
    MPI_Offset base = (MPI_Offset)size * sizeof rec;
    CHECK_RC(MPI_File_read_at(fh, base, ord, 2 * size - 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(ord[0] == 0, "ordered[0] = %d", ord[0]);
    for (int r = 1; r < size; r++) CHECK(ord[2 * r - 1] == r && ord[2 * r] == 7, "ordered rank %d: %d %d", r, ord[2 * r - 1], ord[2 * r]);
    /* read_shared hands out consecutive records; seek_shared moves it. */
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int one[3];
    CHECK_RC(MPI_File_read_shared(fh, one, 3, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(one[1] == one[0] * one[0], "read_shared got %d %d", one[0], one[1]);
    /* Writing a read-only file fails, to this file's handler (RETURN). */
    CHECK(MPI_File_write_at(fh, 0, one, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_READ_ONLY, "write to RDONLY");
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK_RC(MPI_File_delete(name, MPI_INFO_NULL));
    /* No side file of the shared pointer is left behind. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
        CHECK(system(cmd) == 0, "files left in %s", dir);
    }
}

/* Sizes, modes and errors. */
static int handled;
static void on_error(MPI_File *fh, int *code, ...) {
    (void)fh;
    handled = *code;
}

static void sizes_and_errors(int rank) {
    char name[600], missing[600];
    path(name, "size.bin");
    path(missing, "no/such/dir/file");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_set_size(fh, 4096));
    MPI_Offset sz = -1;
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 4096, "set_size: %lld", (long long)sz);
    CHECK_RC(MPI_File_preallocate(fh, 100));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 4096, "preallocate must not shrink: %lld", (long long)sz);
    CHECK_RC(MPI_File_preallocate(fh, 8192));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 8192, "preallocate grows: %lld", (long long)sz);
    CHECK_RC(MPI_File_set_size(fh, 10));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 10, "truncate: %lld", (long long)sz);
    int flag = -1;
    CHECK_RC(MPI_File_set_atomicity(fh, 1));
    CHECK_RC(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 1, "atomicity %d", flag);
    MPI_Aint ext = 0;
    CHECK_RC(MPI_File_get_type_extent(fh, MPI_DOUBLE, &ext));
    CHECK(ext == sizeof(double), "extent %ld", (long)ext);
    int x;
    CHECK(MPI_File_read_at(fh, 0, &x, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_ACCESS, "read of WRONLY");
    /* A program's handler on the file sees the error. */
    MPI_Errhandler eh, got;
    CHECK_RC(MPI_File_create_errhandler(on_error, &eh));
    CHECK_RC(MPI_File_set_errhandler(fh, eh));
    CHECK_RC(MPI_File_get_errhandler(fh, &got));
    CHECK(got == eh, "get_errhandler");
    handled = 0;
    MPI_File_read_at(fh, 0, &x, 1, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(handled == MPI_ERR_ACCESS, "handler saw %d", handled);
    CHECK_RC(MPI_File_call_errhandler(fh, MPI_ERR_OTHER));
    CHECK(handled == MPI_ERR_OTHER, "call_errhandler: %d", handled);
    MPI_Errhandler_free(&eh);
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);

    /* Open errors return (MPI_FILE_NULL's handler is MPI_ERRORS_RETURN),
     * the same class on every rank, with a text. */
    int rc = MPI_File_open(MPI_COMM_WORLD, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_NO_SUCH_FILE, "open of a missing file: %d", rc);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    CHECK(len > 0 && strstr(text, "MPI_ERR_NO_SUCH_FILE"), "text: %s", text);
    rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_ERR_FILE_EXISTS, "EXCL on an existing file: %d", rc);
    rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_ERR_AMODE, "RDONLY|CREATE: %d", rc);
    rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_ERR_AMODE, "two access modes: %d", rc);
    MPI_File bogus = 12345;
    CHECK(MPI_File_close(&bogus) == MPI_ERR_FILE, "close of an invalid handle");
    CHECK(MPI_File_sync(MPI_FILE_NULL) == MPI_ERR_FILE, "sync of MPI_FILE_NULL");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK_RC(MPI_File_delete(name, MPI_INFO_NULL));
        CHECK(MPI_File_delete(name, MPI_INFO_NULL) == MPI_ERR_NO_SUCH_FILE, "second delete");
    }
    /* Files on a sub-communicator: each half writes its own file. */
    int color = rank % 2;
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
    char hn[600];
    snprintf(hn, sizeof hn, "%s/half%d.bin", dir, color);
    CHECK_RC(MPI_File_open(half, hn, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    MPI_Comm_free(&half);  /* the file keeps its own communicator */
    CHECK_RC(MPI_File_write_ordered(fh, &rank, 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_close(&fh));
}

/* Views: each rank sees every size-th block of 2 ints (a strided
 * filetype after a 16-byte header), writes its blocks through the view
 * collectively, and the file holds the blocks interleaved by rank. */
static void views(int rank, int size) {
    char name[600];
    path(name, "view.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    MPI_Datatype block, filetype;
    MPI_Type_contiguous(2, MPI_INT, &block);
    MPI_Datatype shifted;
    int bl = 1;
    MPI_Aint disp = (MPI_Aint)rank * 8;
    MPI_Type_create_struct(1, &bl, &disp, &block, &shifted);
    MPI_Type_create_resized(shifted, 0, (MPI_Aint)size * 8, &filetype);
    MPI_Type_commit(&filetype);
    CHECK(MPI_File_set_view(fh, 16, MPI_INT, shifted, "native", MPI_INFO_NULL) == MPI_ERR_TYPE,
          "an uncommitted filetype is refused");
    CHECK(MPI_File_set_view(fh, 16, MPI_INT, filetype, "external64", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP,
          "an unknown data representation is refused");
    CHECK_RC(MPI_File_set_view(fh, 16, MPI_INT, filetype, "native", MPI_INFO_NULL));
    int out[6];
    for (int i = 0; i < 6; i++) out[i] = rank * 100 + i;
    CHECK_RC(MPI_File_write_all(fh, out, 6, MPI_INT, MPI_STATUS_IGNORE));
    MPI_Offset pos, byte;
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == 6, "position %lld etypes", (long long)pos);
    /* Etype 3 is the second int of this rank's second block. */
    CHECK_RC(MPI_File_get_byte_offset(fh, 3, &byte));
    CHECK(byte == 16 + (MPI_Offset)size * 8 + rank * 8 + 4, "byte offset of etype 3: %lld", (long long)byte);
    CHECK_RC(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset sz;
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 16 + (MPI_Offset)size * 24, "size %lld", (long long)sz);
    /* Read back through the view, from an explicit offset. */
    int back[4] = {-1, -1, -1, -1};
    MPI_Status st;
    CHECK_RC(MPI_File_read_at_all(fh, 2, back, 4, MPI_INT, &st));
    for (int i = 0; i < 4; i++) CHECK(back[i] == rank * 100 + 2 + i, "back[%d] = %d", i, back[i]);
    /* The end of the file in this view: 6 etypes; seek there and read
     * nothing. */
    CHECK_RC(MPI_File_seek(fh, 0, MPI_SEEK_END));
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == 6, "end at %lld etypes", (long long)pos);
    int n = -1;
    CHECK_RC(MPI_File_read(fh, back, 2, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 0, "read past the end: %d ints", n);
    /* The view as given; the filetype comes back as a new handle. */
    MPI_Offset d;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK_RC(MPI_File_get_view(fh, &d, &et, &ft, rep));
    int ftsize;
    MPI_Type_size(ft, &ftsize);
    CHECK(d == 16 && et == MPI_INT && ftsize == 8 && strcmp(rep, "native") == 0, "get_view: %lld %s %d", (long long)d,
          rep, ftsize);
    MPI_Type_free(&ft);
    /* The whole file through the default view: header untouched (zeros),
     * then the blocks in rank order. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int all[4 + 6 * 64];
    CHECK(size <= 64, "at most 64 ranks");
    CHECK_RC(MPI_File_read_at(fh, 0, all, 4 + 6 * size, MPI_INT, &st));
    for (int i = 0; i < 4; i++) CHECK(all[i] == 0, "header[%d] = %d", i, all[i]);
    for (int b = 0; b < 3; b++)
        for (int r = 0; r < size; r++)
            for (int k = 0; k < 2; k++) {
                int v = all[4 + (b * size + r) * 2 + k];
                CHECK(v == r * 100 + 2 * b + k, "block %d of rank %d, int %d: %d", b, r, k, v);
            }
    MPI_Type_free(&shifted);
    MPI_Type_free(&filetype);
    MPI_Type_free(&block);
    CHECK_RC(MPI_File_close(&fh));
}

/* The external32 representation: ints and doubles written through it
 * are big-endian in the file (checked byte by byte through a native
 * view), and read back through it as written, collectively and not. */
static void external32(int rank, int size) {
    char name[600];
    path(name, "external32.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    struct { int i; double d; } rec = {0x01020300 + rank, 1.5 + rank}, back = {0, 0};
    MPI_Datatype rt;
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, bl, disp, types, &rt);
    MPI_Type_commit(&rt);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset d;
    MPI_Datatype et, ft;
    CHECK_RC(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(strcmp(rep, "external32") == 0, "get_view: %s", rep);
    /* 12 bytes per record in the file (int, then double). */
    CHECK_RC(MPI_File_write_at_all(fh, rank * 12, &rec, 1, rt, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_read_at(fh, rank * 12, &back, 1, rt, MPI_STATUS_IGNORE));
    CHECK(back.i == rec.i && back.d == rec.d, "read back %x %g", back.i, back.d);
    back.i = 0;
    back.d = 0;
    int next = (rank + 1) % size;
    CHECK_RC(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(MPI_File_read_at_all(fh, next * 12, &back, 1, rt, MPI_STATUS_IGNORE));
    CHECK(back.i == 0x01020300 + next && back.d == 1.5 + next, "next's record %x %g", back.i, back.d);
    /* The bytes themselves. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[12];
    CHECK_RC(MPI_File_read_at(fh, rank * 12, raw, 12, MPI_BYTE, MPI_STATUS_IGNORE));
    CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == rank, "int bytes %d %d %d %d", raw[0], raw[1], raw[2],
          raw[3]);
    double be = 1.5 + rank;
    unsigned char *b = (unsigned char *)&be;
    for (int k = 0; k < 8; k++) CHECK(raw[4 + k] == b[7 - k], "double byte %d: %d", k, raw[4 + k]);
    CHECK(et == MPI_BYTE && ft == MPI_BYTE, "predefined types come back as they are");
    MPI_Type_free(&rt);
    CHECK_RC(MPI_File_close(&fh));
}

/* A representation of the program's own: ints are stored negated (the
 * conversion functions see the program's buffer and datatype, here
 * MPI_INT); one with MPI_CONVERSION_FN_NULL stores them as memory does;
 * one whose file extent is not the memory's is refused; names are
 * registered once. */
static int conversions;
static int negate_ints(void *user, MPI_Datatype t, int count, void *file, MPI_Offset pos, void *extra) {
    (void)pos;
    (void)extra;
    if (t != MPI_INT) return MPI_ERR_TYPE;
    for (int i = 0; i < count; i++) ((int *)file)[i] = -((int *)user)[i];
    conversions++;
    return MPI_SUCCESS;
}
static int negate_back(void *user, MPI_Datatype t, int count, void *file, MPI_Offset pos, void *extra) {
    (void)pos;
    (void)extra;
    if (t != MPI_INT) return MPI_ERR_TYPE;
    for (int i = 0; i < count; i++) ((int *)user)[i] = -((int *)file)[i];
    conversions++;
    return MPI_SUCCESS;
}
static int same_extent(MPI_Datatype t, MPI_Aint *extent, void *extra) {
    int size;
    MPI_Type_size(t, &size);
    *extent = size * *(int *)extra;
    return MPI_SUCCESS;
}
static void user_datarep(int rank) {
    static int one = 1, two = 2;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPI_Register_datarep("org.test.negated", negate_back, negate_ints, same_extent, &one));
    CHECK(MPI_Register_datarep("org.test.negated", negate_back, negate_ints, same_extent, &one) == MPI_ERR_DUP_DATAREP,
          "a name registered twice");
    CHECK(MPI_Register_datarep("native", NULL, NULL, same_extent, &one) == MPI_ERR_DUP_DATAREP, "a predefined name");
    CHECK_RC(MPI_Register_datarep_c("org.test.plain", MPI_CONVERSION_FN_NULL_C, MPI_CONVERSION_FN_NULL_C, same_extent, &one));
    CHECK_RC(MPI_Register_datarep("org.test.wide", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, same_extent, &two));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    char name[600], own[32];
    snprintf(own, sizeof own, "datarep-%d.bin", rank);
    path(name, own);
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    int v[3] = {rank + 1, 20, -300}, back[3] = {0, 0, 0}, raw[3];
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "org.test.negated", MPI_INFO_NULL));
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset d;
    MPI_Datatype et, ft;
    CHECK_RC(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(strcmp(rep, "org.test.negated") == 0, "get_view: %s", rep);
    conversions = 0;
    CHECK_RC(MPI_File_write_at(fh, 0, v, 3, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_read_at(fh, 0, back, 3, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(conversions == 2 && back[0] == rank + 1 && back[1] == 20 && back[2] == -300, "through the conversions: %d %d %d (%d)",
          back[0], back[1], back[2], conversions);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, raw, 3, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(raw[0] == -(rank + 1) && raw[1] == -20 && raw[2] == 300, "as stored: %d %d %d", raw[0], raw[1], raw[2]);
    /* MPI_CONVERSION_FN_NULL: the bytes of memory. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "org.test.plain", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, back, 3, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(back[0] == raw[0] && back[2] == raw[2], "unconverted: %d %d", back[0], back[2]);
    /* Twice the memory's extent: refused, saying so. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "org.test.wide", MPI_INFO_NULL));
    CHECK(MPI_File_write_at(fh, 0, v, 3, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_UNSUPPORTED_DATAREP,
          "a representation of other extents");
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "org.test.unknown", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP,
          "an unknown representation");
    CHECK_RC(MPI_File_close(&fh));
}

/* Non-blocking and split collective accesses, and collective buffering:
 * interleaved blocks of every rank written and read back collectively
 * with two-phase I/O forced on (small buffers, two aggregators), left
 * automatic, and off; short collective reads at the end of the file. */
static void nonblocking_and_collective(int rank, int size) {
    char name[600];
    path(name, "nb.bin");
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    /* Independent: iwrite_at of this rank's 50 ints, iread_at back. */
    int a[50], b[50];
    for (int i = 0; i < 50; i++) a[i] = rank * 1000 + i;
    MPI_Request req;
    MPI_Status st;
    int n = -1;
    CHECK_RC(MPI_File_iwrite_at(fh, (MPI_Offset)rank * sizeof a, a, 50, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 50 && req == MPI_REQUEST_NULL, "iwrite_at: %d ints", n);
    CHECK_RC(MPI_File_iread_at(fh, (MPI_Offset)rank * sizeof a, b, 50, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    for (int i = 0; i < 50; i++) CHECK(b[i] == a[i], "iread_at b[%d] = %d", i, b[i]);
    /* Collective: everyone's next block with iwrite_at_all, a
     * neighbour's read back with iread_at_all. */
    MPI_Offset base = (MPI_Offset)size * sizeof a;
    for (int i = 0; i < 50; i++) a[i] = -(rank * 1000 + i);
    CHECK_RC(MPI_File_iwrite_at_all(fh, base + (MPI_Offset)rank * sizeof a, a, 50, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 50, "iwrite_at_all: %d ints", n);
    int peer = (rank + 1) % size;
    CHECK_RC(MPI_File_iread_at_all(fh, base + (MPI_Offset)peer * sizeof b, b, 50, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    for (int i = 0; i < 50; i++) CHECK(b[i] == -(peer * 1000 + i), "iread_at_all b[%d] = %d", i, b[i]);
    /* The individual pointer moves at the call: two iwrites in a row. */
    MPI_Request two[2];
    CHECK_RC(MPI_File_seek(fh, 2 * base + (MPI_Offset)rank * 8, MPI_SEEK_SET));
    int x = rank, y = rank + 100;
    CHECK_RC(MPI_File_iwrite(fh, &x, 1, MPI_INT, &two[0]));
    CHECK_RC(MPI_File_iwrite(fh, &y, 1, MPI_INT, &two[1]));
    CHECK_RC(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
    MPI_Offset pos;
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == 2 * base + (MPI_Offset)rank * 8 + 8, "position after two iwrites: %lld", (long long)pos);
    CHECK_RC(MPI_File_seek(fh, -8, MPI_SEEK_CUR));
    int xy[2] = {-1, -1};
    CHECK_RC(MPI_File_iread(fh, xy, 2, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(xy[0] == rank && xy[1] == rank + 100, "iread: %d %d", xy[0], xy[1]);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Interleaved blocks of 3 ints through a view, collectively, with
     * each way of buffering; split collectives for two of them. */
    const char *modes[3] = {"enable", "automatic", "disable"};
    MPI_Datatype block, filetype;
    MPI_Type_contiguous(3, MPI_INT, &block);
    MPI_Type_create_resized(block, 0, (MPI_Aint)size * 12, &filetype);
    MPI_Type_commit(&filetype);
    for (int mode = 0; mode < 3; mode++) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "romio_cb_write", modes[mode]);
        MPI_Info_set(info, "romio_cb_read", modes[mode]);
        MPI_Info_set(info, "cb_nodes", "2");
        MPI_Info_set(info, "cb_buffer_size", "40");
        MPI_Offset disp = 4096 * (mode + 1) + (MPI_Offset)rank * 12;
        CHECK_RC(MPI_File_set_view(fh, disp, MPI_INT, filetype, "native", info));
        MPI_Info_free(&info);
        int out[30], in[30];
        for (int i = 0; i < 30; i++) out[i] = mode * 100000 + rank * 100 + i;
        if (mode == 0) {
            CHECK_RC(MPI_File_write_all_begin(fh, out, 30, MPI_INT));
            CHECK(MPI_File_write_all_begin(fh, out, 30, MPI_INT) == MPI_ERR_OTHER, "a second begin is refused");
            CHECK_RC(MPI_File_write_all_end(fh, out, &st));
        } else {
            CHECK_RC(MPI_File_write_all(fh, out, 30, MPI_INT, &st));
        }
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(n == 30, "%s: wrote %d ints", modes[mode], n);
        for (int i = 0; i < 30; i++) in[i] = -1;
        if (mode == 1) {
            CHECK_RC(MPI_File_read_at_all_begin(fh, 0, in, 30, MPI_INT));
            CHECK_RC(MPI_File_read_at_all_end(fh, in, &st));
        } else {
            CHECK_RC(MPI_File_read_at_all(fh, 0, in, 30, MPI_INT, &st));
        }
        for (int i = 0; i < 30; i++) CHECK(in[i] == out[i], "%s: in[%d] = %d", modes[mode], i, in[i]);
        /* Past the end: the file ends with the last rank's tenth block
         * (later regions are not written yet), so everyone's 6 etypes
         * from etype 27 are 3 in the file. */
        CHECK_RC(MPI_File_read_at_all(fh, 27, in, 6, MPI_INT, &st));
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(n == 3 && in[2] == out[29], "%s: read %d ints at the end", modes[mode], n);
    }
    CHECK(MPI_File_write_all_end(fh, NULL, &st) == MPI_ERR_OTHER, "an end without a begin is refused");
    /* The three regions through the default view, every block in place. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int all[30 * 64];
    CHECK(size <= 64, "at most 64 ranks");
    for (int mode = 0; mode < 3; mode++) {
        CHECK_RC(MPI_File_read_at(fh, 4096 * (mode + 1), all, 30 * size, MPI_INT, &st));
        for (int k = 0; k < 10; k++)
            for (int r = 0; r < size; r++)
                for (int j = 0; j < 3; j++) {
                    int v = all[(k * size + r) * 3 + j];
                    CHECK(v == mode * 100000 + r * 100 + 3 * k + j, "%s: block %d of rank %d: %d", modes[mode], k, r,
                          v);
                }
    }
    /* Non-blocking at the shared pointer: everyone's two ints somewhere
     * in [0, 8 * size), each pair whole. */
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int pair[2] = {rank, -rank};
    CHECK_RC(MPI_File_iwrite_shared(fh, pair, 2, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 2, "iwrite_shared: %d ints", n);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int got2[2] = {-1, -1};
    CHECK_RC(MPI_File_iread_shared(fh, got2, 2, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(got2[0] >= 0 && got2[0] < size && got2[1] == -got2[0], "iread_shared: %d %d", got2[0], got2[1]);
    /* Collective at the individual pointer: non-blocking and split. */
    CHECK_RC(MPI_File_seek(fh, 8 * (MPI_Offset)rank, MPI_SEEK_SET));
    int three[2] = {rank + 7, rank + 8};
    CHECK_RC(MPI_File_iwrite_all(fh, three, 2, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_seek(fh, 8 * (MPI_Offset)rank, MPI_SEEK_SET));
    int back3[2] = {-1, -1};
    CHECK_RC(MPI_File_iread_all(fh, back3, 2, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(back3[0] == rank + 7 && back3[1] == rank + 8, "iread_all: %d %d", back3[0], back3[1]);
    int nine = rank + 9;
    CHECK_RC(MPI_File_write_at_all_begin(fh, 4 * (MPI_Offset)rank, &nine, 1, MPI_INT));
    CHECK_RC(MPI_File_write_at_all_end(fh, &nine, &st));
    CHECK_RC(MPI_File_seek(fh, 4 * (MPI_Offset)((rank + 1) % size), MPI_SEEK_SET));
    int ten = -1;
    CHECK_RC(MPI_File_read_all_begin(fh, &ten, 1, MPI_INT));
    CHECK_RC(MPI_File_read_all_end(fh, &ten, &st));
    CHECK(ten == (rank + 1) % size + 9, "read_all_begin/end: %d", ten);
    /* Ordered, split: rank order at the shared pointer. */
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int mine[2] = {rank, rank * 7};
    CHECK_RC(MPI_File_write_ordered_begin(fh, mine, 2, MPI_INT));
    CHECK_RC(MPI_File_write_ordered_end(fh, mine, &st));
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int back[2] = {-1, -1};
    CHECK_RC(MPI_File_read_ordered_begin(fh, back, 2, MPI_INT));
    CHECK_RC(MPI_File_read_ordered_end(fh, back, &st));
    CHECK(back[0] == rank && back[1] == rank * 7, "ordered: %d %d", back[0], back[1]);
    MPI_Type_free(&filetype);
    MPI_Type_free(&block);
    CHECK_RC(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *d = getenv("FILE_TEST_DIR");
    CHECK(d != NULL, "FILE_TEST_DIR is not set");
    snprintf(dir, sizeof dir, "%s", d);
    explicit_offsets(rank, size);
    individual_pointer(rank);
    shared_pointer(rank, size);
    sizes_and_errors(rank);
    views(rank, size);
    external32(rank, size);
    user_datarep(rank);
    nonblocking_and_collective(rank, size);
    pass("file.c");
    MPI_Finalize();
    return 0;
}
