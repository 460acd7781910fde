/* hydro3d: a LULESH-style proxy. Lagrangian shock hydrodynamics (a Sedov
 * blast from the origin) on a grid of ranks px x py x pz (as MPI_Dims_create
 * makes it: a cube for 1, 8, 27 ... as LULESH needs; 2 x 2 x 1 for 4,
 * 4 x 2 x 2 for 16), each holding an N^3 block of hexahedral elements and
 * its (N+1)^3 nodes:
 * - nodal fields: coordinates, velocities, forces, mass; element fields:
 *   energy, pressure, artificial viscosity, relative volume, sound speed;
 * - forces on a node shared by several ranks are summed over the 26
 *   neighbours with Isend/Irecv/Waitall; the time step is the minimum of the
 *   Courant and volume-change limits over all ranks (Allreduce MIN);
 * - the set-up phase builds what LULESH's domain constructor builds: node
 *   coordinates, element connectivity, symmetry planes, material regions
 *   (random, seeded), reference volumes and masses, nodal masses summed
 *   over the neighbours, the neighbour lists and buffers.
 * Prints the final origin energy (element 0 of rank 0, as LULESH does) and
 * the total energy; both are identical whatever the number of failures.
 *
 *   mpiexec -n 8 [--recovery MODE] ./hydro3d [-s N] [-i ITERS] [-k EVERY]
 *
 * -s N: elements per rank per edge (default 30); -i: iterations (default
 * 100); -k: checkpoint every K iterations (default 10, 0: never). Built with
 * -DPLAIN (hydro3d_plain) it never checkpoints. See proxy.h for the modes. */
#include <math.h>
#include "proxy.h"

#define GAMMA 1.4
#define NREG 11

static int n = 30, px, py, pz, pmax, rank, size, cx, cy, cz;
static int nn, ne; /* nodes and elements of this rank */
static MPI_Comm hcomm = MPI_COMM_NULL;

/* The protected state. */
static struct {
    int iter;
    MPI_Comm comm; /* hcomm, for a Stages replacement */
    double time, dt;
} hdr;
static double *x, *y, *z, *xd, *yd, *zd;     /* nodes */
static double *e, *p, *q, *v, *vdov, *ss;   /* elements */
static double *nmass; /* from the MPI set-up */
/* Set up, not checkpointed. */
static double *fx, *fy, *fz, *volo, *emass;
static int *nodelist, *region, *rep;
static int *symx, *symy, *symz, nsymx, nsymy, nsymz;
/* Neighbours: for each of the 26 directions, the rank (or -1) and the nodes
 * this rank shares with it, in global order. */
static int nbr[26], nshared[26], *shared[26];
static double *sendbuf[26], *recvbuf[26];

#define NODE(i, j, k) (((k) * (n + 1) + (j)) * (n + 1) + (i))

/* Direction index d <-> offsets (dx, dy, dz) in {-1, 0, 1}^3 \ {0}. */
static void offsets(int d, int *dx, int *dy, int *dz)
{
    int c = d < 13 ? d : d + 1;
    *dx = c % 3 - 1;
    *dy = c / 3 % 3 - 1;
    *dz = c / 9 - 1;
}

static int direction(int dx, int dy, int dz)
{
    int c = (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1);
    return c < 13 ? c : c - 1;
}

/* Sums nodal values `a` (ncomp arrays) over the ranks sharing each node. */
static int sum_shared(double **a, int ncomp)
{
    MPI_Request req[52];
    int k = 0, rc;
    for (int d = 0; d < 26; d++) {
        if (nbr[d] < 0) continue;
        int dx, dy, dz;
        offsets(d, &dx, &dy, &dz);
        if ((rc = MPI_Irecv(recvbuf[d], nshared[d] * ncomp, MPI_DOUBLE, nbr[d], direction(-dx, -dy, -dz), hcomm,
                            &req[k++])))
            return rc;
    }
    for (int d = 0; d < 26; d++) {
        if (nbr[d] < 0) continue;
        for (int s = 0; s < nshared[d]; s++)
            for (int c = 0; c < ncomp; c++) sendbuf[d][s * ncomp + c] = a[c][shared[d][s]];
        if ((rc = MPI_Isend(sendbuf[d], nshared[d] * ncomp, MPI_DOUBLE, nbr[d], d, hcomm, &req[k++]))) return rc;
    }
    if ((rc = MPI_Waitall(k, req, MPI_STATUSES_IGNORE))) return rc;
    for (int d = 0; d < 26; d++) /* a fixed order: the same sums every run */
        if (nbr[d] >= 0)
            for (int s = 0; s < nshared[d]; s++)
                for (int c = 0; c < ncomp; c++) a[c][shared[d][s]] += recvbuf[d][s * ncomp + c];
    return MPI_SUCCESS;
}

/* LULESH's volume derivative of a hexahedron: VoluDer for one node from
 * six of the others. */
static void voluder(const double *px, const double *py, const double *pz, const int *o, double *dx, double *dy,
                    double *dz)
{
    double x0 = px[o[0]], x1 = px[o[1]], x2 = px[o[2]], x3 = px[o[3]], x4 = px[o[4]], x5 = px[o[5]];
    double y0 = py[o[0]], y1 = py[o[1]], y2 = py[o[2]], y3 = py[o[3]], y4 = py[o[4]], y5 = py[o[5]];
    double z0 = pz[o[0]], z1 = pz[o[1]], z2 = pz[o[2]], z3 = pz[o[3]], z4 = pz[o[4]], z5 = pz[o[5]];
    *dx = (y1 + y2) * (z0 + z1) - (y0 + y1) * (z1 + z2) + (y0 + y4) * (z3 + z4) - (y3 + y4) * (z0 + z4) -
          (y2 + y5) * (z3 + z5) + (y3 + y5) * (z2 + z5);
    *dy = -(x1 + x2) * (z0 + z1) + (x0 + x1) * (z1 + z2) - (x0 + x4) * (z3 + z4) + (x3 + x4) * (z0 + z4) +
          (x2 + x5) * (z3 + z5) - (x3 + x5) * (z2 + z5);
    *dz = -(y1 + y2) * (x0 + x1) + (y0 + y1) * (x1 + x2) - (y0 + y4) * (x3 + x4) + (y3 + y4) * (x0 + x4) +
          (y2 + y5) * (x3 + x5) - (y3 + y5) * (x2 + x5);
    *dx /= 12.0;
    *dy /= 12.0;
    *dz /= 12.0;
}

/* dV/d(node) for the 8 nodes of element `el`; returns the volume. */
static double volume_derivative(int el, double dvdx[8], double dvdy[8], double dvdz[8])
{
    static const int order[8][6] = {{1, 2, 3, 4, 5, 7}, {2, 3, 0, 5, 6, 4}, {3, 0, 1, 6, 7, 5}, {0, 1, 2, 7, 4, 6},
                                    {7, 6, 5, 0, 3, 1}, {4, 7, 6, 1, 0, 2}, {5, 4, 7, 2, 1, 3}, {6, 5, 4, 3, 2, 0}};
    double px[8], py[8], pz[8], vol = 0;
    const int *nl = &nodelist[8 * el];
    for (int a = 0; a < 8; a++) {
        px[a] = x[nl[a]];
        py[a] = y[nl[a]];
        pz[a] = z[nl[a]];
    }
    for (int a = 0; a < 8; a++) {
        voluder(px, py, pz, order[a], &dvdx[a], &dvdy[a], &dvdz[a]);
        vol += px[a] * dvdx[a] + py[a] * dvdy[a] + pz[a] * dvdz[a];
    }
    return vol / 3.0; /* volume is homogeneous of degree 3 in the coordinates */
}

static int setup(void)
{
    MPI_Comm_rank(proxy_world, &rank);
    MPI_Comm_size(proxy_world, &size);
    int dims[3] = {0, 0, 0};
    if (n < 1 || MPI_Dims_create(size, 3, dims) != MPI_SUCCESS) {
        if (rank == 0) fprintf(stderr, "hydro3d: -s must be at least 1\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    px = dims[0];
    py = dims[1];
    pz = dims[2];
    pmax = px; /* MPI_Dims_create puts the largest first */
    cx = rank % px;
    cy = rank / px % py;
    cz = rank / (px * py);
    nn = (n + 1) * (n + 1) * (n + 1);
    ne = n * n * n;
    double **nodal[] = {&x, &y, &z, &xd, &yd, &zd, &fx, &fy, &fz, &nmass};
    for (size_t i = 0; i < sizeof nodal / sizeof *nodal; i++) *nodal[i] = proxy_alloc(*nodal[i], nn * sizeof(double));
    double **elem[] = {&e, &p, &q, &v, &vdov, &volo, &emass, &ss};
    for (size_t i = 0; i < sizeof elem / sizeof *elem; i++) *elem[i] = proxy_alloc(*elem[i], ne * sizeof(double));
    nodelist = proxy_alloc(nodelist, 8 * (size_t)ne * sizeof(int));
    region = proxy_alloc(region, ne * sizeof(int));
    rep = proxy_alloc(rep, NREG * sizeof(int));

    /* Reference coordinates: cubic elements; the mesh spans 1.125 along
     * its longest edge. */
    double h = 1.125 / (pmax * n);
    for (int k = 0; k <= n; k++)
        for (int j = 0; j <= n; j++)
            for (int i = 0; i <= n; i++) {
                x[NODE(i, j, k)] = h * (cx * n + i);
                y[NODE(i, j, k)] = h * (cy * n + j);
                z[NODE(i, j, k)] = h * (cz * n + k);
            }
    /* Connectivity, LULESH's node order. */
    for (int k = 0, el = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < n; i++, el++) {
                int *nl = &nodelist[8 * el];
                nl[0] = NODE(i, j, k);
                nl[1] = NODE(i + 1, j, k);
                nl[2] = NODE(i + 1, j + 1, k);
                nl[3] = NODE(i, j + 1, k);
                nl[4] = NODE(i, j, k + 1);
                nl[5] = NODE(i + 1, j, k + 1);
                nl[6] = NODE(i + 1, j + 1, k + 1);
                nl[7] = NODE(i, j + 1, k + 1);
            }
    /* Symmetry planes x = 0, y = 0, z = 0 on the ranks that hold them. */
    int plane = (n + 1) * (n + 1);
    symx = proxy_alloc(symx, plane * sizeof(int));
    symy = proxy_alloc(symy, plane * sizeof(int));
    symz = proxy_alloc(symz, plane * sizeof(int));
    nsymx = nsymy = nsymz = 0;
    for (int a = 0; a <= n; a++)
        for (int b = 0; b <= n; b++) {
            if (cx == 0) symx[nsymx++] = NODE(0, a, b);
            if (cy == 0) symy[nsymy++] = NODE(a, 0, b);
            if (cz == 0) symz[nsymz++] = NODE(a, b, 0);
        }
    /* Material regions: random sizes and costs from a seeded generator
     * (as LULESH's CreateRegionIndexSets), the same every run. */
    unsigned seed = 12345u + (unsigned)rank;
    for (int r = 0; r < NREG; r++) rep[r] = 1 + (r % 4 == 3); /* some regions evaluate their EOS twice */
    for (int el = 0; el < ne;) {
        seed = seed * 1103515245u + 12345u;
        int r = (int)((seed >> 16) % NREG), run = 1 + (int)((seed >> 8) % 15);
        for (int c = 0; c < run && el < ne; c++) region[el++] = r;
    }
    /* Reference volumes and masses (density 1). */
    for (int el = 0; el < ne; el++) {
        double dx[8], dy[8], dz[8];
        volo[el] = volume_derivative(el, dx, dy, dz);
        emass[el] = volo[el];
    }
    /* Neighbours and the nodes shared with each. */
    for (int d = 0; d < 26; d++) {
        int dx, dy, dz;
        offsets(d, &dx, &dy, &dz);
        int ox = cx + dx, oy = cy + dy, oz = cz + dz;
        nbr[d] = (ox < 0 || ox >= px || oy < 0 || oy >= py || oz < 0 || oz >= pz) ? -1 : ox + px * (oy + py * oz);
        int lo[3], hi[3], off[3] = {dx, dy, dz};
        for (int c = 0; c < 3; c++) {
            lo[c] = off[c] == 1 ? n : 0;
            hi[c] = off[c] == -1 ? 0 : n;
        }
        nshared[d] = nbr[d] < 0 ? 0 : (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1);
        shared[d] = proxy_alloc(shared[d], nshared[d] * sizeof(int));
        sendbuf[d] = proxy_alloc(sendbuf[d], 3 * nshared[d] * sizeof(double));
        recvbuf[d] = proxy_alloc(recvbuf[d], 3 * nshared[d] * sizeof(double));
        if (nbr[d] < 0) continue;
        int s = 0;
        for (int k = lo[2]; k <= hi[2]; k++)
            for (int j = lo[1]; j <= hi[1]; j++)
                for (int i = lo[0]; i <= hi[0]; i++) shared[d][s++] = NODE(i, j, k);
    }
    return MPI_SUCCESS;
}

/* The communicator and the nodal masses, summed over the neighbours. */
static int setup_mpi(void)
{
    int rc;
    if ((rc = MPI_Comm_dup(proxy_world, &hcomm))) return rc;
    hdr.comm = hcomm;
    memset(nmass, 0, nn * sizeof(double));
    for (int el = 0; el < ne; el++)
        for (int a = 0; a < 8; a++) nmass[nodelist[8 * el + a]] += emass[el] / 8.0;
    double *m[1] = {nmass};
    return sum_shared(m, 1);
}

static int protect(void)
{
    int rc;
    double *nodal[] = {x, y, z, xd, yd, zd, nmass}, *elem[] = {e, p, q, v, vdov, ss};
    if ((rc = MPIX_Protect(0, &hdr, sizeof hdr, MPI_BYTE))) return rc;
    for (int i = 0; i < 7; i++)
        if ((rc = MPIX_Protect(1 + i, nodal[i], nn, MPI_DOUBLE))) return rc;
    for (int i = 0; i < 6; i++)
        if ((rc = MPIX_Protect(8 + i, elem[i], ne, MPI_DOUBLE))) return rc;
    return MPI_SUCCESS;
}

static int initial(void)
{
    double h = 1.125 / (pmax * n), scale = (pmax * n) / 45.0, einit = 3.948746e+7 * scale * scale * scale;
    for (int k = 0; k <= n; k++)
        for (int j = 0; j <= n; j++)
            for (int i = 0; i <= n; i++) {
                int a = NODE(i, j, k);
                x[a] = h * (cx * n + i);
                y[a] = h * (cy * n + j);
                z[a] = h * (cz * n + k);
                xd[a] = yd[a] = zd[a] = 0;
            }
    for (int el = 0; el < ne; el++) {
        e[el] = p[el] = q[el] = vdov[el] = ss[el] = 0;
        v[el] = 1;
    }
    if (rank == 0) e[0] = einit; /* the blast, at the origin */
    hdr.iter = 0;
    hdr.time = 0;
    hdr.dt = 0.5 * cbrt(volo[0]) / sqrt(2.0 * einit);
    return MPI_SUCCESS;
}

static void eos(int el)
{
    double rho = emass[el] / (v[el] * volo[el]);
    p[el] = (GAMMA - 1.0) * rho * e[el];
    if (p[el] < 0) p[el] = 0;
    ss[el] = sqrt(GAMMA * p[el] / rho + 1e-36);
}

static int step(int it)
{
    int rc;
    double dt = hdr.dt;
    (void)it;
    hcomm = hdr.comm; /* as restored (Stages) or as set up */
    /* Forces: pressure and viscosity on the nodes, with hourglass damping. */
    memset(fx, 0, nn * sizeof(double));
    memset(fy, 0, nn * sizeof(double));
    memset(fz, 0, nn * sizeof(double));
    for (int el = 0; el < ne; el++) {
        double dx[8], dy[8], dz[8], vx = 0, vy = 0, vz = 0;
        double vol = volume_derivative(el, dx, dy, dz), sig = p[el] + q[el];
        const int *nl = &nodelist[8 * el];
        for (int a = 0; a < 8; a++) {
            vx += xd[nl[a]] / 8;
            vy += yd[nl[a]] / 8;
            vz += zd[nl[a]] / 8;
        }
        double rho = emass[el] / vol, len = cbrt(vol), hg = 0.1 * rho * ss[el] * len * len;
        for (int a = 0; a < 8; a++) {
            fx[nl[a]] += sig * dx[a] - hg * (xd[nl[a]] - vx);
            fy[nl[a]] += sig * dy[a] - hg * (yd[nl[a]] - vy);
            fz[nl[a]] += sig * dz[a] - hg * (zd[nl[a]] - vz);
        }
    }
    double *f[3] = {fx, fy, fz};
    if ((rc = sum_shared(f, 3))) return rc;
    /* Accelerations, symmetry planes, velocities, positions. */
    for (int a = 0; a < nn; a++) {
        fx[a] /= nmass[a];
        fy[a] /= nmass[a];
        fz[a] /= nmass[a];
    }
    for (int s = 0; s < nsymx; s++) fx[symx[s]] = 0;
    for (int s = 0; s < nsymy; s++) fy[symy[s]] = 0;
    for (int s = 0; s < nsymz; s++) fz[symz[s]] = 0;
    for (int a = 0; a < nn; a++) {
        xd[a] += fx[a] * dt;
        yd[a] += fy[a] * dt;
        zd[a] += fz[a] * dt;
        if (fabs(xd[a]) < 1e-7) xd[a] = 0;
        if (fabs(yd[a]) < 1e-7) yd[a] = 0;
        if (fabs(zd[a]) < 1e-7) zd[a] = 0;
        x[a] += xd[a] * dt;
        y[a] += yd[a] * dt;
        z[a] += zd[a] * dt;
    }
    /* Kinematics, viscosity, energy, EOS (per region), time-step limits. */
    double lim[2] = {1e20, 1e20};
    for (int el = 0; el < ne; el++) {
        double dx[8], dy[8], dz[8];
        double vol = volume_derivative(el, dx, dy, dz), vnew = vol / volo[el];
        if (vnew <= 0) {
            fprintf(stderr, "hydro3d: rank %d: element %d inverted at iteration %d\n", rank, el, it);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        double delv = vnew - v[el], len = cbrt(vol), rho = emass[el] / vol;
        vdov[el] = delv / (vnew * dt);
        q[el] = vdov[el] < 0 ? rho * (2.0 * len * len * vdov[el] * vdov[el] + 0.3 * ss[el] * len * fabs(vdov[el])) : 0;
        e[el] -= (p[el] + q[el]) * delv * volo[el] / emass[el];
        if (e[el] < 0) e[el] = 0;
        v[el] = vnew;
    }
    for (int r = 0; r < NREG; r++) /* region by region, as LULESH's EvalEOSForElems */
        for (int c = 0; c < rep[r]; c++)
            for (int el = 0; el < ne; el++)
                if (region[el] == r) eos(el);
    for (int el = 0; el < ne; el++) {
        double len = cbrt(v[el] * volo[el]), cs2 = ss[el] * ss[el];
        if (vdov[el] < 0) cs2 += 4.0 * len * len * vdov[el] * vdov[el];
        double courant = len / sqrt(cs2 + 1e-36), hydro = 0.1 / (fabs(vdov[el]) + 1e-20);
        if (courant < lim[0]) lim[0] = courant;
        if (hydro < lim[1]) lim[1] = hydro;
    }
    double glim[2];
    if ((rc = MPI_Allreduce(lim, glim, 2, MPI_DOUBLE, MPI_MIN, hcomm))) return rc;
    hdr.time += dt;
    double next = fmin(fmin(glim[0] / 2.0, glim[1] * 2.0 / 3.0), fmin(dt * 1.2, 1e-2));
    hdr.dt = next;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int iters = 100, every = 10;
    if (proxy_options(argc, argv, "hydro3d", &n, &iters, &every)) return 1;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    struct proxy app = {"hydro3d", iters, every, setup, setup_mpi, protect, initial, step, &hdr.iter, &hcomm};
    proxy_run(argc, argv, &app);
    /* The results: the origin energy and the total energy. */
    double local = 0, total = 0, origin = rank == 0 ? e[0] : 0;
    for (int el = 0; el < ne; el++) local += e[el] * emass[el];
    for (int k = 0; k <= n; k++) /* kinetic, each node counted by one rank */
        for (int j = 0; j <= n; j++)
            for (int i = 0; i <= n; i++) {
                int a = NODE(i, j, k);
                if ((i == n && cx < px - 1) || (j == n && cy < py - 1) || (k == n && cz < pz - 1)) continue;
                local += 0.5 * nmass[a] * (xd[a] * xd[a] + yd[a] * yd[a] + zd[a] * zd[a]);
            }
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, proxy_world);
    if (rank == 0)
        printf("hydro3d: %d ranks, %d^3 elements per rank, %d iterations, time %.9e: final origin energy %.15e, "
               "total energy (internal + kinetic) %.15e, %.3f s\n",
               size, n, iters, hdr.time, origin, total, MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}
