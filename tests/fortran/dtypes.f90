! Datatypes from Fortran (`use mpi`): sizes of the Fortran types and sized
! kinds, a vector over a column-major array, indexed and struct types with
! MPI_GET_ADDRESS and MPI_BOTTOM, extents, resized, pack/unpack, and the
! deprecated MPI-1 calls with INTEGER addresses.
program dtypes
  use mpi
  use checks
  implicit none
  integer :: rank, np, ierr, right, left, i, j, sz, rowtype, idxtype, blktype, st(MPI_STATUS_SIZE)
  integer :: structtype, contig, resized, dup, hvec, oldstruct, pos, psize
  integer :: types(2), blens(2), ext_int, idispl(2)
  integer(kind=MPI_ADDRESS_KIND) :: lb, extent, addrs(2), displs(2), tlb, textent
  integer(kind=MPI_COUNT_KIND) :: bigsize
  integer :: a(4, 5), b(4, 5), n, tag
  double precision :: vals(3), vals2(3)
  integer :: key, key2
  character(len=1) :: packbuf(100)
  integer, parameter :: ntypes = 19
  integer :: handles(ntypes) = (/ MPI_INTEGER, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_COMPLEX, &
      MPI_DOUBLE_COMPLEX, MPI_LOGICAL, MPI_CHARACTER, MPI_2REAL, MPI_2DOUBLE_PRECISION, MPI_2INTEGER, &
      MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8, MPI_REAL4, MPI_REAL8, MPI_COMPLEX8, &
      MPI_COMPLEX16, MPI_LOGICAL1 /)
  integer :: sizes(ntypes) = (/ 4, 4, 8, 8, 16, 4, 1, 8, 16, 8, 1, 2, 4, 8, 4, 8, 8, 16, 1 /)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  right = mod(rank + 1, np)
  left = mod(rank - 1 + np, np)

  do i = 1, ntypes
    call MPI_TYPE_SIZE(handles(i), sz, ierr)
    call check(ierr == MPI_SUCCESS .and. sz == sizes(i), 'MPI_TYPE_SIZE of a Fortran type')
  end do
  call MPI_TYPE_SIZE(MPI_LOGICAL4, sz, ierr)
  call check(sz == 4, 'MPI_TYPE_SIZE of MPI_LOGICAL4')

  ! Row 2 of a column-major 4x5 array: 5 elements, stride 4.
  call MPI_TYPE_VECTOR(5, 1, 4, MPI_INTEGER, rowtype, ierr)
  call MPI_TYPE_COMMIT(rowtype, ierr)
  call MPI_TYPE_SIZE(rowtype, sz, ierr)
  call MPI_TYPE_GET_EXTENT(rowtype, lb, extent, ierr)
  call check(sz == 20 .and. lb == 0 .and. extent == 17 * 4, 'vector size and extent')
  a = reshape((/ (rank * 100 + i, i = 1, 20) /), (/ 4, 5 /))
  b = -1
  call MPI_SENDRECV(a(2, 1), 1, rowtype, right, 1, b(3, 1), 1, rowtype, left, 1, MPI_COMM_WORLD, st, ierr)
  call check(all(b(3, :) == left * 100 + (/ (2 + 4 * j, j = 0, 4) /)), 'row of a column-major array')
  call check(all(b(1:2, :) == -1) .and. all(b(4, :) == -1), 'the other rows are untouched')
  call MPI_GET_ELEMENTS(st, MPI_INTEGER, n, ierr)
  call check(n == 5, 'MPI_GET_ELEMENTS of a vector')

  ! Indexed and indexed-block: the diagonal, then the corners.
  blens = (/ 1, 2 /)
  idispl = (/ 0, 18 /)
  call MPI_TYPE_INDEXED(2, blens, idispl, MPI_INTEGER, idxtype, ierr)
  call MPI_TYPE_CREATE_INDEXED_BLOCK(2, 1, (/ 3, 12 /), MPI_INTEGER, blktype, ierr)
  call MPI_TYPE_COMMIT(idxtype, ierr)
  call MPI_TYPE_COMMIT(blktype, ierr)
  b = 0
  call MPI_SENDRECV(a, 1, idxtype, right, 2, b, 2, blktype, left, 2, MPI_COMM_WORLD, st, ierr)
  call MPI_GET_COUNT(st, blktype, n, ierr)
  ! 3 elements arrived, 2 per receive type: not a whole number of them.
  call check(n == MPI_UNDEFINED, 'MPI_GET_COUNT of a partial derived type')
  ! Elements 1, 19, 20 of a land at 4, 13, 14 of b (blocks at 3 and 12:
  ! lower bound 3, extent 10, so the second copy starts at 3 + 10).
  call check(b(4, 1) == left * 100 + 1 .and. b(1, 4) == left * 100 + 19 .and. b(2, 4) == left * 100 + 20, &
             'indexed to indexed-block')
  call check(count(b /= 0) == 3, 'nothing else written')

  ! A struct over separate variables by absolute address, sent from MPI_BOTTOM.
  key = rank * 7
  vals = (/ 1.5d0, dble(rank), -2d0 /)
  call MPI_GET_ADDRESS(key, addrs(1), ierr)
  call MPI_GET_ADDRESS(vals, addrs(2), ierr)
  types = (/ MPI_INTEGER, MPI_DOUBLE_PRECISION /)
  blens = (/ 1, 3 /)
  call MPI_TYPE_CREATE_STRUCT(2, blens, addrs, types, structtype, ierr)
  call MPI_TYPE_COMMIT(structtype, ierr)
  call MPI_TYPE_SIZE(structtype, sz, ierr)
  call check(sz == 28, 'struct size')
  ! Relative displacements describe the receive side.
  call MPI_GET_ADDRESS(key2, displs(1), ierr)
  call MPI_GET_ADDRESS(vals2, displs(2), ierr)
  call MPI_TYPE_CREATE_STRUCT(2, blens, displs, types, oldstruct, ierr)
  call MPI_TYPE_COMMIT(oldstruct, ierr)
  call MPI_SENDRECV(MPI_BOTTOM, 1, structtype, right, 3, MPI_BOTTOM, 1, oldstruct, left, 3, &
                    MPI_COMM_WORLD, st, ierr)
  call check(ierr == MPI_SUCCESS .and. key2 == left * 7 .and. vals2(2) == dble(left) .and. vals2(3) == -2d0, &
             'struct by absolute addresses through MPI_BOTTOM')
  call MPI_TYPE_FREE(oldstruct, ierr)

  ! Contiguous, resized, dup, true extent, size_x.
  call MPI_TYPE_CONTIGUOUS(3, MPI_DOUBLE_PRECISION, contig, ierr)
  call MPI_TYPE_COMMIT(contig, ierr)
  call MPI_TYPE_CREATE_RESIZED(contig, -8_MPI_ADDRESS_KIND, 40_MPI_ADDRESS_KIND, resized, ierr)
  call MPI_TYPE_GET_EXTENT(resized, lb, extent, ierr)
  call MPI_TYPE_GET_TRUE_EXTENT(resized, tlb, textent, ierr)
  call check(lb == -8 .and. extent == 40 .and. tlb == 0 .and. textent == 24, 'resized extents')
  call MPI_TYPE_DUP(resized, dup, ierr)
  call MPI_TYPE_SIZE_X(dup, bigsize, ierr)
  call check(bigsize == 24_MPI_COUNT_KIND, 'MPI_TYPE_SIZE_X of a dup')
  call MPI_TYPE_FREE(dup, ierr)
  call check(dup == MPI_DATATYPE_NULL, 'MPI_TYPE_FREE sets MPI_DATATYPE_NULL')

  ! Pack an INTEGER and three DOUBLE PRECISIONs, unpack them.
  call MPI_PACK_SIZE(3, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, psize, ierr)
  call check(psize >= 24, 'MPI_PACK_SIZE')
  pos = 0
  call MPI_PACK(key, 1, MPI_INTEGER, packbuf, 100, pos, MPI_COMM_WORLD, ierr)
  call MPI_PACK(vals, 1, contig, packbuf, 100, pos, MPI_COMM_WORLD, ierr)
  call check(pos == 28, 'MPI_PACK position')
  pos = 0
  key2 = -1
  vals2 = 0
  call MPI_UNPACK(packbuf, 100, pos, key2, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_UNPACK(packbuf, 100, pos, vals2, 3, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call check(key2 == key .and. all(vals2 == vals) .and. pos == 28, 'MPI_UNPACK')

  ! MPI-1 calls with INTEGER addresses: hvector, struct, extent work;
  ! MPI_ADDRESS refuses an address that does not fit in an INTEGER.
  call MPI_TYPE_HVECTOR(2, 1, 16, MPI_INTEGER, hvec, ierr)
  call MPI_TYPE_EXTENT(hvec, ext_int, ierr)
  call check(ierr == MPI_SUCCESS .and. ext_int == 20, 'MPI_TYPE_HVECTOR / MPI_TYPE_EXTENT')
  call MPI_TYPE_STRUCT(2, (/ 1, 1 /), (/ 0, 8 /), (/ MPI_INTEGER, MPI_DOUBLE_PRECISION /), oldstruct, ierr)
  call MPI_TYPE_EXTENT(oldstruct, ext_int, ierr)
  call check(ierr == MPI_SUCCESS .and. ext_int == 16, 'MPI_TYPE_STRUCT with INTEGER displacements')
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_ADDRESS(vals, i, ierr)
  if (addrs(2) > huge(i)) then
    call check(ierr == MPI_ERR_ARG, 'MPI_ADDRESS of an address beyond an INTEGER is MPI_ERR_ARG')
  else
    call check(ierr == MPI_SUCCESS .and. i == addrs(2), 'MPI_ADDRESS')
  end if

  tag = 0
  call MPI_TYPE_FREE(rowtype, ierr)
  call MPI_TYPE_FREE(idxtype, ierr)
  call MPI_TYPE_FREE(blktype, ierr)
  call MPI_TYPE_FREE(structtype, ierr)
  call MPI_TYPE_FREE(contig, ierr)
  call MPI_TYPE_FREE(resized, ierr)
  call MPI_TYPE_FREE(hvec, ierr)
  call MPI_TYPE_FREE(oldstruct, ierr)
  call check(rowtype == MPI_DATATYPE_NULL .and. oldstruct == MPI_DATATYPE_NULL, 'all freed')
  call checks_done('dtypes')
  call MPI_FINALIZE(ierr)
end program dtypes
