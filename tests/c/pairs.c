/* Pairs that meet at their first message (lazy connections): every rank
 * sends to both ring neighbours at once, so each pair opens its
 * connection from both ends at the same moment, then the messages go on
 * in both directions, small and large (rendezvous), in order. Prints
 * "rank R: ok SUM" with the sum of everything received, or what was
 * wrong. Usage: pairs [ROUNDS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 50, bad = 0;
    long sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { BIG = 1 << 18 };
    int *out = malloc(BIG * sizeof(int)), *in_l = malloc(BIG * sizeof(int)),
        *in_r = malloc(BIG * sizeof(int));
    for (int i = 0; i < rounds; i++) {
        int n = i % 5 == 4 ? BIG : 1 + i; /* every fifth message is large */
        for (int k = 0; k < n; k++)
            out[k] = rank * 1000 + i + k;
        MPI_Request rq[4];
        MPI_Irecv(in_l, n, MPI_INT, left, i, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(in_r, n, MPI_INT, right, i, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(out, n, MPI_INT, right, i, MPI_COMM_WORLD, &rq[2]);
        MPI_Isend(out, n, MPI_INT, left, i, MPI_COMM_WORLD, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        for (int k = 0; k < n; k++) {
            if (in_l[k] != left * 1000 + i + k || in_r[k] != right * 1000 + i + k) {
                if (!bad++)
                    printf("rank %d: round %d element %d: %d from %d, %d from %d\n", rank, i,
                           k, in_l[k], left, in_r[k], right);
            }
            sum += in_l[k] + in_r[k];
        }
    }
    if (!bad)
        printf("rank %d: ok %ld\n", rank, sum);
    free(out);
    free(in_l);
    free(in_r);
    MPI_Finalize();
    return bad != 0;
}
