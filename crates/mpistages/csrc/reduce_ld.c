/* Reduction kernels for long double and long double _Complex, which Rust
 * cannot express. Buffers may be unaligned, so elements go through memcpy.
 * op values are the MPI_Op handles of include/mpi.h. */
#include <string.h>
#include <stddef.h>
#include <complex.h>

enum { OP_MAX = 1, OP_MIN, OP_SUM, OP_PROD, OP_MINLOC = 11, OP_MAXLOC = 12 };

int mpistages_reduce_ld(int op, size_t n, const unsigned char *in, unsigned char *inout)
{
    for (size_t i = 0; i < n; i++) {
        long double a, b;
        memcpy(&a, in + 16 * i, sizeof a);
        memcpy(&b, inout + 16 * i, sizeof b);
        switch (op) {
        case OP_MAX: b = a > b ? a : b; break;
        case OP_MIN: b = a < b ? a : b; break;
        case OP_SUM: b = a + b; break;
        case OP_PROD: b = a * b; break;
        default: return -1;
        }
        memcpy(inout + 16 * i, &b, sizeof b);
    }
    return 0;
}

int mpistages_reduce_cld(int op, size_t n, const unsigned char *in, unsigned char *inout)
{
    for (size_t i = 0; i < n; i++) {
        long double _Complex a, b;
        memcpy(&a, in + 32 * i, sizeof a);
        memcpy(&b, inout + 32 * i, sizeof b);
        switch (op) {
        case OP_SUM: b = a + b; break;
        case OP_PROD: b = a * b; break;
        default: return -1;
        }
        memcpy(inout + 32 * i, &b, sizeof b);
    }
    return 0;
}

/* MPI_LONG_DOUBLE_INT: { long double value; int index; } with a 32-byte extent. */
int mpistages_reduce_ldint(int op, size_t n, size_t stride, const unsigned char *in, unsigned char *inout)
{
    for (size_t i = 0; i < n; i++) {
        long double a, b;
        int ia, ib;
        memcpy(&a, in + stride * i, sizeof a);
        memcpy(&b, inout + stride * i, sizeof b);
        memcpy(&ia, in + stride * i + 16, sizeof ia);
        memcpy(&ib, inout + stride * i + 16, sizeof ib);
        int take;
        if (op == OP_MINLOC) take = a < b || (a == b && ia < ib);
        else if (op == OP_MAXLOC) take = a > b || (a == b && ia < ib);
        else return -1;
        if (take) {
            memcpy(inout + stride * i, &a, sizeof a);
            memcpy(inout + stride * i + 16, &ia, sizeof ia);
        }
    }
    return 0;
}
