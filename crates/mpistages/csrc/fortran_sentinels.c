/* The addresses of the Fortran sentinels MPI_BOTTOM, MPI_IN_PLACE,
 * MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE. include/mpif.h puts each in
 * its own COMMON block; gfortran names block /X/ as the symbol x_, which
 * src/abi/fortran/mod.rs defines and the library exports. This file only
 * reads their addresses: compiled as position-independent code, it reaches
 * these external symbols through the GOT, which the dynamic linker points
 * at the copy the program really uses (a program's COMMON block may be
 * copied into the executable). */
#include <stddef.h>

extern int mpistages_bottom_[];
extern int mpistages_in_place_[];
extern int mpistages_status_ignore_[];
extern int mpistages_statuses_ignore_[];

const void *mpistages_fortran_sentinel(int which)
{
    switch (which) {
    case 0: return mpistages_bottom_;
    case 1: return mpistages_in_place_;
    case 2: return mpistages_status_ignore_;
    case 3: return mpistages_statuses_ignore_;
    default: return NULL;
    }
}
