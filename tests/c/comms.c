/* Communicators and groups: Comm_dup isolates traffic with the same tag
 * and source, Comm_split orders by key then old rank, Comm_create, group
 * algebra, Comm_compare, attributes. */
#include "check.h"
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;

    /* Dup isolation: same tag and peer on WORLD and on the dup; receives
     * posted on the dup first must not take WORLD's message. */
    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int r2, n2;
    MPI_Comm_rank(dup, &r2);
    MPI_Comm_size(dup, &n2);
    CHECK(r2 == rank && n2 == n, "dup rank/size");
    int a = -1, b = -1, xw = 1000 + rank, xd = 2000 + rank;
    MPI_Request rq[2];
    MPI_Irecv(&a, 1, MPI_INT, left, 5, dup, &rq[0]);
    MPI_Send(&xw, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
    MPI_Send(&xd, 1, MPI_INT, right, 5, dup);
    MPI_Irecv(&b, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(a == 2000 + left && b == 1000 + left, "dup isolation: dup got %d, world got %d", a, b);
    int res;
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
    CHECK(res == MPI_CONGRUENT, "compare dup %d", res);
    MPI_Comm_compare(dup, dup, &res);
    CHECK(res == MPI_IDENT, "compare self");
    /* Collectives on the dup and on WORLD interleaved. */
    int s1, s2, one = 1;
    MPI_Allreduce(&one, &s1, 1, MPI_INT, MPI_SUM, dup);
    MPI_Allreduce(&rank, &s2, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(s1 == n && s2 == n * (n - 1) / 2, "collectives on dup");

    /* Split: two colors, key reverses the order. */
    MPI_Comm half;
    int color = rank % 2;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, color, n - rank, &half));
    int hr, hn;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hn);
    int members = (n + 1 - color) / 2;
    CHECK(hn == members, "split size %d want %d", hn, members);
    /* Highest old rank of my color gets new rank 0. */
    int expect = 0;
    for (int q = rank + 2; q < n; q += 2) expect++;
    CHECK(hr == expect, "split key order: rank %d got %d want %d", rank, hr, expect);
    int sum;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
    int want = 0;
    for (int q = color; q < n; q += 2) want += q;
    CHECK(sum == want, "allreduce on split");
    /* Equal keys keep the old order; MPI_UNDEFINED opts out. */
    MPI_Comm same, none;
    MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &same);
    MPI_Comm_rank(same, &hr);
    CHECK(hr == rank, "equal keys keep order");
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
    CHECK((rank == 0) == (none == MPI_COMM_NULL), "MPI_UNDEFINED color");
    if (none != MPI_COMM_NULL) MPI_Comm_free(&none);

    /* Groups. */
    MPI_Group world, evens, odds, u, inter, diff;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *ev = malloc(sizeof(int) * n), ne = 0;
    for (int q = 0; q < n; q += 2) ev[ne++] = q;
    MPI_Group_incl(world, ne, ev, &evens);
    MPI_Group_excl(world, ne, ev, &odds);
    int gs, gr;
    MPI_Group_size(evens, &gs);
    MPI_Group_rank(evens, &gr);
    CHECK(gs == ne && gr == (rank % 2 ? MPI_UNDEFINED : rank / 2), "group rank");
    MPI_Group_union(odds, evens, &u);
    MPI_Group_size(u, &gs);
    CHECK(gs == n, "union size");
    MPI_Group_compare(u, world, &res);
    CHECK(res == (n > 2 ? MPI_SIMILAR : (n == 2 ? MPI_SIMILAR : MPI_IDENT)), "union compare %d", res);
    MPI_Group_intersection(world, evens, &inter);
    MPI_Group_compare(inter, evens, &res);
    CHECK(res == MPI_IDENT, "intersection");
    MPI_Group_difference(world, evens, &diff);
    MPI_Group_compare(diff, odds, &res);
    CHECK(res == MPI_IDENT, "difference");
    int q0 = 0, t;
    MPI_Group_translate_ranks(evens, 1, &q0, world, &t);
    CHECK(t == 0, "translate");
    if (n > 1) {
        int q1 = 1;
        MPI_Group_translate_ranks(world, 1, &q1, evens, &t);
        CHECK(t == MPI_UNDEFINED, "translate to a group without the process");
    }

    /* Create from the even group. */
    MPI_Comm ec;
    CHECK_RC(MPI_Comm_create(MPI_COMM_WORLD, evens, &ec));
    CHECK((rank % 2 == 0) == (ec != MPI_COMM_NULL), "create membership");
    if (ec != MPI_COMM_NULL) {
        int er;
        MPI_Comm_rank(ec, &er);
        CHECK(er == rank / 2, "create rank");
        int bc = er == 0 ? 77 : 0;
        MPI_Bcast(&bc, 1, MPI_INT, 0, ec);
        CHECK(bc == 77, "bcast on created comm");
        MPI_Comm_free(&ec);
        CHECK(ec == MPI_COMM_NULL, "free resets the handle");
    }

    /* Attributes. */
    int *tag_ub, *wtg, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && *tag_ub >= 32767, "tag ub");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &wtg, &flag);
    CHECK(flag && (*wtg == 0 || *wtg == 1), "wtime is global");

    MPI_Group_free(&world); MPI_Group_free(&evens); MPI_Group_free(&odds);
    MPI_Group_free(&u); MPI_Group_free(&inter); MPI_Group_free(&diff);
    CHECK(world == MPI_GROUP_NULL, "group free");
    MPI_Comm_free(&dup); MPI_Comm_free(&half); MPI_Comm_free(&same);
    free(ev);
    pass("comms");
    MPI_Finalize();
    return 0;
}
