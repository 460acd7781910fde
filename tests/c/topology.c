/* Process topologies: Dims_create, a periodic Cartesian grid (coords,
 * rank, shift, sub), a graph, distributed graphs (adjacent and general),
 * and neighbourhood collectives on each, blocking and non-blocking, with
 * the values each rank must receive. */
#include "check.h"
#include <string.h>

static void cartesian(int rank, int n) {
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    CHECK_RC(MPI_Dims_create(n, 2, dims));
    CHECK(dims[0] * dims[1] == n && dims[0] >= dims[1], "dims %d x %d for %d", dims[0], dims[1], n);
    MPI_Comm cart;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    int kind;
    MPI_Topo_test(cart, &kind);
    CHECK(kind == MPI_CART, "topo_test %d", kind);
    int nd, d2[2], p2[2], c2[2];
    MPI_Cartdim_get(cart, &nd);
    MPI_Cart_get(cart, 2, d2, p2, c2);
    CHECK(nd == 2 && d2[0] == dims[0] && p2[0] == 1 && p2[1] == 0, "cart_get");
    CHECK(c2[0] == rank / dims[1] && c2[1] == rank % dims[1], "coords %d,%d of %d", c2[0], c2[1], rank);
    int back;
    MPI_Cart_rank(cart, c2, &back);
    CHECK(back == rank, "cart_rank %d", back);
    /* Periodic in dimension 0: the shift wraps; not in 1: PROC_NULL at the edge. */
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    int up = ((c2[0] + dims[0] - 1) % dims[0]) * dims[1] + c2[1];
    int down = ((c2[0] + 1) % dims[0]) * dims[1] + c2[1];
    CHECK(src == up && dst == down, "shift 0: %d %d want %d %d", src, dst, up, down);
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    CHECK(src == (c2[1] == 0 ? MPI_PROC_NULL : rank - 1), "shift 1 src %d", src);
    CHECK(dst == (c2[1] == dims[1] - 1 ? MPI_PROC_NULL : rank + 1), "shift 1 dst %d", dst);

    /* Neighbour allgather: from each of the 4 neighbours (-0, +0, -1, +1)
     * its rank, or the untouched -1 where there is none. */
    int got[4] = {-1, -1, -1, -1};
    CHECK_RC(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, cart));
    int want[4] = {up, down, c2[1] == 0 ? -1 : rank - 1, c2[1] == dims[1] - 1 ? -1 : rank + 1};
    for (int k = 0; k < 4; k++) CHECK(got[k] == want[k], "neighbor_allgather[%d] %d want %d", k, got[k], want[k]);
    /* Neighbour alltoall, non-blocking: block k goes to neighbour k, which
     * receives it from its opposite side. */
    int out[4], in[4] = {-1, -1, -1, -1};
    for (int k = 0; k < 4; k++) out[k] = 100 * rank + k;
    MPI_Request rq;
    CHECK_RC(MPI_Ineighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, cart, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    int from[4] = {100 * up + 1, 100 * down + 0, c2[1] == 0 ? -1 : 100 * (rank - 1) + 3,
                   c2[1] == dims[1] - 1 ? -1 : 100 * (rank + 1) + 2};
    for (int k = 0; k < 4; k++) CHECK(in[k] == from[k], "neighbor_alltoall[%d] %d want %d", k, in[k], from[k]);

    /* Cart_sub keeping dimension 1: a row. */
    int remain[2] = {0, 1};
    MPI_Comm row;
    CHECK_RC(MPI_Cart_sub(cart, remain, &row));
    int rr, rn, sum;
    MPI_Comm_rank(row, &rr);
    MPI_Comm_size(row, &rn);
    CHECK(rn == dims[1] && rr == c2[1], "row %d of %d", rr, rn);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row);
    int first = c2[0] * dims[1];
    CHECK(sum == dims[1] * first + dims[1] * (dims[1] - 1) / 2, "row sum %d", sum);
    MPI_Comm_free(&row);
    MPI_Comm dup;
    MPI_Comm_dup(cart, &dup);
    MPI_Topo_test(dup, &kind);
    CHECK(kind == MPI_CART, "a dup keeps the topology");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&cart);
}

static void graphs(int rank, int n) {
    /* A ring as a graph: node i's neighbours are i-1 and i+1. */
    int index[64], edges[128];
    for (int i = 0; i < n; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + n - 1) % n;
        edges[2 * i + 1] = (i + 1) % n;
    }
    MPI_Comm g;
    CHECK_RC(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    int kind, nn, ne, count, nb[2];
    MPI_Topo_test(g, &kind);
    MPI_Graphdims_get(g, &nn, &ne);
    MPI_Graph_neighbors_count(g, rank, &count);
    MPI_Graph_neighbors(g, rank, 2, nb);
    CHECK(kind == MPI_GRAPH && nn == n && ne == 2 * n && count == 2, "graph %d %d %d %d", kind, nn, ne, count);
    CHECK(nb[0] == (rank + n - 1) % n && nb[1] == (rank + 1) % n, "graph neighbours");
    int got[2] = {-1, -1};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, g);
    CHECK(got[0] == nb[0] && got[1] == nb[1], "graph allgather %d %d", got[0], got[1]);
    MPI_Comm_free(&g);

    /* Distributed graph, adjacent: everyone sends to rank+1 and receives
     * from rank-1, weighted by the source. */
    int s = (rank + n - 1) % n, d = (rank + 1) % n, sw = s, dw = rank;
    MPI_Comm dg;
    CHECK_RC(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &s, &sw, 1, &d, &dw, MPI_INFO_NULL, 0, &dg));
    int indeg, outdeg, weighted, srcs[1], ws[1], dsts[1], wd[1];
    MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
    MPI_Dist_graph_neighbors(dg, 1, srcs, ws, 1, dsts, wd);
    CHECK(indeg == 1 && outdeg == 1 && weighted && srcs[0] == s && ws[0] == s && dsts[0] == d, "adjacent graph");
    int v = -1, mine = 7 * rank;
    MPI_Neighbor_alltoall(&mine, 1, MPI_INT, &v, 1, MPI_INT, dg);
    CHECK(v == 7 * s, "dist graph alltoall %d want %d", v, 7 * s);
    MPI_Comm_free(&dg);

    /* General form: rank 0 alone gives every edge i -> (i+2)%n. */
    int cnt = rank == 0 ? n : 0;
    int sources[64], degrees[64], dests[64];
    for (int i = 0; i < cnt; i++) {
        sources[i] = i;
        degrees[i] = 1;
        dests[i] = (i + 2) % n;
    }
    CHECK_RC(MPI_Dist_graph_create(MPI_COMM_WORLD, cnt, sources, degrees, dests, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg));
    MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
    CHECK(indeg == 1 && outdeg == 1 && !weighted, "general graph degrees %d %d %d", indeg, outdeg, weighted);
    MPI_Dist_graph_neighbors(dg, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED);
    CHECK(srcs[0] == (rank + n - 2) % n && dsts[0] == (rank + 2) % n, "general graph edges %d %d", srcs[0], dsts[0]);
    MPI_Comm_free(&dg);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int d3[3] = {0, 3, 0};
    CHECK_RC(MPI_Dims_create(24, 3, d3));
    CHECK(d3[0] == 4 && d3[1] == 3 && d3[2] == 2, "dims 24 = %d x %d x %d", d3[0], d3[1], d3[2]);
    int bad[2] = {5, 0};
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Dims_create(12, 2, bad), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_DIMS, "12 nodes do not split by 5: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    cartesian(rank, n);
    graphs(rank, n);
    pass("topology");
    MPI_Finalize();
    return 0;
}
