/* md: a CoMD-style proxy. Lennard-Jones molecular dynamics (velocity
 * Verlet, reduced units) of an FCC crystal in a periodic box split over an
 * x*y*z grid of ranks:
 * - link cells of at least the cut-off size over each rank's atoms and its
 *   ghost atoms;
 * - every step atoms that left the rank's domain are redistributed, then
 *   ghost atoms within the cut-off are exchanged, both with Sendrecv in the
 *   6 directions (x, then y, then z: corners travel in two or three hops);
 * - energies are summed with Allreduce(SUM); the atom with the largest
 *   kinetic energy and the one with the lowest potential energy are found
 *   with MAXLOC / MINLOC;
 * - the set-up phase builds the lattice, draws velocities (seeded per atom
 *   id, so the same whatever the decomposition), removes the drift and
 *   scales to the temperature (both with Allreduce).
 * Prints the final energies; they are identical with and without failures.
 *
 *   mpiexec -n 4 [--recovery MODE] ./md [-s N] [-i ITERS] [-k EVERY]
 *
 * -s N: FCC unit cells per rank per edge (default 8, 4 atoms each); -i:
 * steps (default 100); -k: checkpoint every K steps (default 10, 0: never).
 * Built with -DPLAIN (md_plain) it never checkpoints. See proxy.h. */
#include <math.h>
#include "proxy.h"

#define LATTICE 1.6796 /* FCC at density 0.8442 */
#define RCUT 2.5
#define DT 0.005
#define TEMP 1.44

static int nc = 8, rank, size, dims[3], me[3], nbr[3][2], cap;
/* The job's size at its start: the box is nc cells per rank of it, also
 * when a ULFM shrink leaves fewer ranks to share it. */
static int size0;
static double len[3], lo[3], hi[3], box[3];
static MPI_Comm mcomm = MPI_COMM_NULL;

/* The protected state: the header and the atoms (local first, then the
 * ghosts of the current step, which are not needed after it). */
static struct {
    int iter, natoms;
    MPI_Comm comm;
    double pe, ke, kemax, pemin;
    int kemax_id, pemin_id;
} hdr;
static int *id;
static double *r[3], *v[3], *f[3], *pe_atom;
/* Set up: link cells over the domain and a ghost layer. */
static int ncell[3], *head, *next, nghost;
static double cell[3];
static int *sendidx;
static double *sendbuf, *recvbuf;

/* The most cubic px >= py >= pz with px * py * pz = n. */
static void decompose(int n, int out[3])
{
    int best = -1;
    for (int a = 1; a <= n; a++)
        for (int b = 1; b <= a; b++) {
            if (n % (a * b)) continue;
            int c = n / (a * b);
            if (c > b) continue;
            int spread = a - c;
            if (best < 0 || spread < best) {
                best = spread;
                out[0] = a;
                out[1] = b;
                out[2] = c;
            }
        }
}

static int setup(void)
{
    int g[3];
    MPI_Comm_rank(proxy_world, &rank);
    MPI_Comm_size(proxy_world, &size);
    if (!size0) size0 = size;
    decompose(size0, g);
    decompose(size, dims);
    me[0] = rank % dims[0];
    me[1] = rank / dims[0] % dims[1];
    me[2] = rank / (dims[0] * dims[1]);
    for (int d = 0; d < 3; d++) {
        box[d] = g[d] * nc * LATTICE;
        len[d] = dims[d] == g[d] ? nc * LATTICE : box[d] / dims[d];
        if (len[d] < RCUT) {
            fprintf(stderr, "md: %d ranks cannot share a box of %d: a domain is thinner than the cut-off\n", size, size0);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        lo[d] = me[d] * len[d];
        hi[d] = lo[d] + len[d];
        ncell[d] = (int)(len[d] / RCUT);
        if (ncell[d] < 1) ncell[d] = 1;
        cell[d] = len[d] / ncell[d];
        int m[3] = {me[0], me[1], me[2]};
        for (int s = 0; s < 2; s++) {
            m[d] = (me[d] + (s ? 1 : -1) + dims[d]) % dims[d];
            nbr[d][s] = m[0] + dims[0] * (m[1] + dims[1] * m[2]);
        }
    }
    /* Room for the local atoms, their variation, and the ghost shell. */
    int local = (4 * nc * nc * nc * size0 + size - 1) / size, shell = (int)(4 * 0.8442 * ((len[0] + 2 * RCUT) * (len[1] + 2 * RCUT) *
                                                                 (len[2] + 2 * RCUT) - len[0] * len[1] * len[2]));
    cap = 2 * local + 2 * shell + 64;
    id = proxy_alloc(id, cap * sizeof(int));
    for (int d = 0; d < 3; d++) {
        r[d] = proxy_alloc(r[d], cap * sizeof(double));
        v[d] = proxy_alloc(v[d], cap * sizeof(double));
        f[d] = proxy_alloc(f[d], cap * sizeof(double));
    }
    pe_atom = proxy_alloc(pe_atom, cap * sizeof(double));
    head = proxy_alloc(head, (size_t)(ncell[0] + 2) * (ncell[1] + 2) * (ncell[2] + 2) * sizeof(int));
    next = proxy_alloc(next, cap * sizeof(int));
    sendidx = proxy_alloc(sendidx, cap * sizeof(int));
    sendbuf = proxy_alloc(sendbuf, 7 * (size_t)cap * sizeof(double));
    recvbuf = proxy_alloc(recvbuf, 7 * (size_t)cap * sizeof(double));
    return MPI_SUCCESS;
}

static int setup_mpi(void)
{
    int rc = MPI_Comm_dup(proxy_world, &mcomm);
    hdr.comm = mcomm;
    return rc;
}

static int protect(void)
{
    int rc;
    if ((rc = MPIX_Protect(0, &hdr, sizeof hdr, MPI_BYTE))) return rc;
    if ((rc = MPIX_Protect(1, id, cap, MPI_INT))) return rc;
    for (int d = 0; d < 3; d++) {
        if ((rc = MPIX_Protect(2 + d, r[d], cap, MPI_DOUBLE))) return rc;
        if ((rc = MPIX_Protect(5 + d, v[d], cap, MPI_DOUBLE))) return rc;
        if ((rc = MPIX_Protect(8 + d, f[d], cap, MPI_DOUBLE))) return rc;
    }
    return MPI_SUCCESS;
}

/* Sends atoms `idx[0..n)` (shifted by `shift` along `d`) to `to` and
 * appends what comes from `from` at `at`; returns how many came, or -1 on
 * an MPI error (in *rc). With velocities and forces when `full`. */
static int swap(const int *idx, int n, int d, double shift, int to, int from, int at, int full, int *rc)
{
    int per = full ? 7 : 4, got = 0;
    for (int a = 0; a < n; a++) {
        double *b = &sendbuf[(size_t)a * per];
        b[0] = id[idx[a]];
        for (int c = 0; c < 3; c++) b[1 + c] = r[c][idx[a]] + (c == d ? shift : 0);
        if (full)
            for (int c = 0; c < 3; c++) b[4 + c] = v[c][idx[a]];
    }
    if ((*rc = MPI_Sendrecv(&n, 1, MPI_INT, to, 1, &got, 1, MPI_INT, from, 1, mcomm, MPI_STATUS_IGNORE))) return -1;
    if (at + got > cap) {
        fprintf(stderr, "md: rank %d: more than %d atoms; the lattice has melted or exploded\n", rank, cap);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    if ((*rc = MPI_Sendrecv(sendbuf, n * per, MPI_DOUBLE, to, 2, recvbuf, got * per, MPI_DOUBLE, from, 2, mcomm,
                            MPI_STATUS_IGNORE)))
        return -1;
    for (int a = 0; a < got; a++) {
        double *b = &recvbuf[(size_t)a * per];
        id[at + a] = (int)b[0];
        for (int c = 0; c < 3; c++) r[c][at + a] = b[1 + c];
        if (full)
            for (int c = 0; c < 3; c++) v[c][at + a] = b[4 + c];
    }
    return got;
}

static void move(int from, int to)
{
    id[to] = id[from];
    for (int c = 0; c < 3; c++) {
        r[c][to] = r[c][from];
        v[c][to] = v[c][from];
    }
}

/* Atoms that left the domain go to the neighbour that owns them now. */
static int redistribute(void)
{
    int rc, n = hdr.natoms;
    for (int d = 0; d < 3; d++) {
        for (int s = 0; s < 2; s++) {
            int k = 0, keep = 0;
            for (int a = 0; a < n; a++) {
                int out = s ? r[d][a] >= hi[d] : r[d][a] < lo[d];
                if (out) sendidx[k++] = a;
            }
            /* Periodic wrap for atoms leaving the box. */
            double shift = (s && me[d] == dims[d] - 1) ? -box[d] : (!s && me[d] == 0) ? box[d] : 0;
            int got = swap(sendidx, k, d, shift, nbr[d][s], nbr[d][!s], n, 1, &rc);
            if (got < 0) return rc;
            /* Compact: drop the ones sent, keep the order. */
            for (int a = 0, j = 0; a < n + got; a++) {
                if (j < k && sendidx[j] == a) {
                    j++;
                    continue;
                }
                if (keep != a) move(a, keep);
                keep++;
            }
            n = keep;
        }
    }
    hdr.natoms = n;
    return MPI_SUCCESS;
}

static int by_id(const void *a, const void *b)
{
    return id[*(const int *)a] - id[*(const int *)b];
}

/* The canonical order (by atom id): a run restored from a checkpoint
 * iterates in the same order as one that never stopped. */
static void sort_atoms(void)
{
    int n = hdr.natoms;
    for (int a = 0; a < n; a++) sendidx[a] = a;
    qsort(sendidx, n, sizeof(int), by_id);
    for (int a = 0; a < n; a++) { /* gather through the receive buffer */
        double *b = &recvbuf[(size_t)a * 7];
        b[0] = id[sendidx[a]];
        for (int c = 0; c < 3; c++) {
            b[1 + c] = r[c][sendidx[a]];
            b[4 + c] = v[c][sendidx[a]];
        }
    }
    for (int a = 0; a < n; a++) {
        double *b = &recvbuf[(size_t)a * 7];
        id[a] = (int)b[0];
        for (int c = 0; c < 3; c++) {
            r[c][a] = b[1 + c];
            v[c][a] = b[4 + c];
        }
    }
}

/* Ghosts: atoms within the cut-off of a face, to the neighbour across it. */
static int halo(void)
{
    int rc, n = hdr.natoms;
    for (int d = 0; d < 3; d++) {
        int before = n; /* not the ghosts this dimension just brought */
        for (int s = 0; s < 2; s++) {
            int k = 0;
            for (int a = 0; a < before; a++)
                if (s ? r[d][a] >= hi[d] - RCUT : r[d][a] < lo[d] + RCUT) sendidx[k++] = a;
            double shift = (s && me[d] == dims[d] - 1) ? -box[d] : (!s && me[d] == 0) ? box[d] : 0;
            int got = swap(sendidx, k, d, shift, nbr[d][s], nbr[d][!s], n, 0, &rc);
            if (got < 0) return rc;
            n += got;
        }
    }
    nghost = n - hdr.natoms;
    return MPI_SUCCESS;
}

static int cell_of(int a)
{
    int c[3];
    for (int d = 0; d < 3; d++) {
        c[d] = (int)floor((r[d][a] - lo[d]) / cell[d]) + 1;
        if (c[d] < 0) c[d] = 0;
        if (c[d] > ncell[d] + 1) c[d] = ncell[d] + 1;
    }
    return (c[2] * (ncell[1] + 2) + c[1]) * (ncell[0] + 2) + c[0];
}

/* Lennard-Jones forces and energies of the local atoms (each pair seen
 * from both sides: no Newton's third law across ranks, the same order
 * every run). */
static void forces(void)
{
    int n = hdr.natoms + nghost, cells = (ncell[0] + 2) * (ncell[1] + 2) * (ncell[2] + 2);
    double rc2 = RCUT * RCUT, s6 = 1.0 / (rc2 * rc2 * rc2), shift = 4.0 * (s6 * s6 - s6);
    for (int c = 0; c < cells; c++) head[c] = -1;
    for (int a = n - 1; a >= 0; a--) {
        int c = cell_of(a);
        next[a] = head[c];
        head[c] = a;
    }
    for (int i = 0; i < hdr.natoms; i++) {
        double fi[3] = {0, 0, 0}, e = 0;
        int ci = cell_of(i), cz = ci / ((ncell[0] + 2) * (ncell[1] + 2)), cy = ci / (ncell[0] + 2) % (ncell[1] + 2),
            cx = ci % (ncell[0] + 2);
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int x = cx + dx, y = cy + dy, z = cz + dz;
                    if (x < 0 || y < 0 || z < 0 || x > ncell[0] + 1 || y > ncell[1] + 1 || z > ncell[2] + 1) continue;
                    for (int j = head[(z * (ncell[1] + 2) + y) * (ncell[0] + 2) + x]; j >= 0; j = next[j]) {
                        if (j == i) continue;
                        double dr[3], r2 = 0;
                        for (int c = 0; c < 3; c++) {
                            dr[c] = r[c][i] - r[c][j];
                            r2 += dr[c] * dr[c];
                        }
                        if (r2 >= rc2) continue;
                        double ir2 = 1.0 / r2, ir6 = ir2 * ir2 * ir2, fr = 24.0 * ir6 * (2.0 * ir6 - 1.0) * ir2;
                        e += 0.5 * (4.0 * ir6 * (ir6 - 1.0) - shift);
                        for (int c = 0; c < 3; c++) fi[c] += fr * dr[c];
                    }
                }
        for (int c = 0; c < 3; c++) f[c][i] = fi[c];
        pe_atom[i] = e;
    }
}

/* Energies over all ranks, and the extreme atoms (MAXLOC / MINLOC). */
static int energies(void)
{
    int rc;
    double local[3] = {0, 0, (double)hdr.natoms}, sum[3];
    struct {
        double value;
        int id;
    } kmax = {-1, -1}, pmin = {1e300, -1}, gk, gp;
    for (int a = 0; a < hdr.natoms; a++) {
        double ke = 0.5 * (v[0][a] * v[0][a] + v[1][a] * v[1][a] + v[2][a] * v[2][a]);
        local[0] += pe_atom[a];
        local[1] += ke;
        if (ke > kmax.value) kmax.value = ke, kmax.id = id[a];
        if (pe_atom[a] < pmin.value) pmin.value = pe_atom[a], pmin.id = id[a];
    }
    if ((rc = MPI_Allreduce(local, sum, 3, MPI_DOUBLE, MPI_SUM, mcomm))) return rc;
    if ((rc = MPI_Allreduce(&kmax, &gk, 1, MPI_DOUBLE_INT, MPI_MAXLOC, mcomm))) return rc;
    if ((rc = MPI_Allreduce(&pmin, &gp, 1, MPI_DOUBLE_INT, MPI_MINLOC, mcomm))) return rc;
    hdr.pe = sum[0] / sum[2];
    hdr.ke = sum[1] / sum[2];
    hdr.kemax = gk.value;
    hdr.kemax_id = gk.id;
    hdr.pemin = gp.value;
    hdr.pemin_id = gp.id;
    return MPI_SUCCESS;
}

static double uniform(unsigned long long *s) /* splitmix64 */
{
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static int initial(void)
{
    static const double basis[4][3] = {{0.25, 0.25, 0.25}, {0.75, 0.75, 0.25}, {0.75, 0.25, 0.75}, {0.25, 0.75, 0.75}};
    int rc, n = 0, cells[3];
    mcomm = hdr.comm;
    for (int d = 0; d < 3; d++) cells[d] = (int)(box[d] / LATTICE + 0.5);
    /* The lattice atoms whose place is in this domain (whatever the
     * decomposition: the same atoms, ids and velocities for every size). */
    for (int k = 0; k < cells[2]; k++)
        for (int j = 0; j < cells[1]; j++)
            for (int i = 0; i < cells[0]; i++)
                for (int b = 0; b < 4; b++) {
                    int g[3] = {i, j, k}, inside = 1;
                    for (int c = 0; c < 3; c++) {
                        double x = (g[c] + basis[b][c]) * LATTICE;
                        inside &= x >= lo[c] && x < hi[c];
                    }
                    if (!inside) continue;
                    id[n] = 4 * ((g[2] * cells[1] + g[1]) * cells[0] + g[0]) + b;
                    unsigned long long seed = (unsigned long long)id[n] * 2654435761ull + 17;
                    for (int c = 0; c < 3; c++) {
                        r[c][n] = (g[c] + basis[b][c]) * LATTICE;
                        /* Box-Muller from the atom's own stream. */
                        double u1 = uniform(&seed), u2 = uniform(&seed);
                        v[c][n] = sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
                    }
                    n++;
                }
    hdr.natoms = n;
    /* No drift, and the temperature asked for. */
    double local[4] = {0, 0, 0, 0}, sum[4];
    for (int a = 0; a < n; a++)
        for (int c = 0; c < 3; c++) local[c] += v[c][a];
    local[3] = n;
    if ((rc = MPI_Allreduce(local, sum, 4, MPI_DOUBLE, MPI_SUM, mcomm))) return rc;
    double ke = 0, gke;
    for (int a = 0; a < n; a++)
        for (int c = 0; c < 3; c++) {
            v[c][a] -= sum[c] / sum[3];
            ke += 0.5 * v[c][a] * v[c][a];
        }
    if ((rc = MPI_Allreduce(&ke, &gke, 1, MPI_DOUBLE, MPI_SUM, mcomm))) return rc;
    double scale = sqrt(TEMP / (2.0 * gke / (3.0 * sum[3])));
    for (int a = 0; a < n; a++)
        for (int c = 0; c < 3; c++) v[c][a] *= scale;
    hdr.iter = 0;
    if ((rc = halo())) return rc;
    forces();
    return energies();
}

static int step(int it)
{
    int rc, n = hdr.natoms;
    (void)it;
    mcomm = hdr.comm; /* as restored (Stages) or as set up */
    for (int a = 0; a < n; a++)
        for (int c = 0; c < 3; c++) {
            v[c][a] += 0.5 * DT * f[c][a];
            r[c][a] += DT * v[c][a];
        }
    if ((rc = redistribute())) return rc;
    sort_atoms();
    if ((rc = halo())) return rc;
    forces();
    for (int a = 0; a < hdr.natoms; a++)
        for (int c = 0; c < 3; c++) v[c][a] += 0.5 * DT * f[c][a];
    return energies();
}

#ifndef PLAIN
/* ULFM's shrinking recovery: the atoms of the checkpoint of iteration
 * `iter`, which `writers` ranks wrote (the regions of protect(), in order:
 * the header, then id, r, v and f of `cap` atoms each, the writer's cap),
 * that are in this rank's new domain; the driver's ballast follows them. */
static int reload(int iter, int writers)
{
    int n = 0;
    size_t per = sizeof(int) + 9 * sizeof(double);
    for (int w = 0; w < writers; w++) {
        char path[4096];
        proxy_ckpt_path(path, sizeof path, w, iter);
        FILE *fp = fopen(path, "rb");
        long bytes = -1;
        if (fp && !fseek(fp, 0, SEEK_END)) bytes = ftell(fp);
        /* (The driver's ballast, as large at every rank, comes last.) */
        bytes -= (long)(proxy_ballast_words * sizeof *proxy_ballast);
        if (!fp || bytes < (long)sizeof hdr || (bytes - (long)sizeof hdr) % (long)per || fseek(fp, 0, SEEK_SET)) {
            fprintf(stderr, "md: rank %d: cannot read the checkpoint %s\n", rank, path);
            if (fp) fclose(fp);
            return MPI_ERR_IO;
        }
        int wcap = (int)((bytes - (long)sizeof hdr) / (long)per);
        char *b = malloc((size_t)bytes);
        int ok = b && fread(b, 1, (size_t)bytes, fp) == (size_t)bytes;
        fclose(fp);
        if (!ok) {
            free(b);
            return MPI_ERR_IO;
        }
        MPI_Comm keep = hdr.comm;
        int natoms;
        memcpy(&hdr, b, sizeof hdr);
        natoms = hdr.natoms;
        hdr.comm = keep;
        const char *ids = b + sizeof hdr, *xs = ids + (size_t)wcap * sizeof(int);
        /* (Copied out: the file's arrays need not be aligned.) */
#define MD_X(k, a) (memcpy(&xv, xs + ((size_t)(k) * wcap + (a)) * sizeof(double), sizeof xv), xv)
        double xv;
        for (int a = 0; a < natoms && a < wcap; a++) {
            int inside = 1;
            for (int c = 0; c < 3; c++) inside &= MD_X(c, a) >= lo[c] && MD_X(c, a) < hi[c];
            if (!inside) continue;
            if (n >= cap) {
                free(b);
                fprintf(stderr, "md: rank %d: more than %d atoms after the shrink\n", rank, cap);
                return MPI_ERR_NO_MEM;
            }
            memcpy(&id[n], ids + (size_t)a * sizeof(int), sizeof(int));
            for (int c = 0; c < 3; c++) {
                r[c][n] = MD_X(c, a);
                v[c][n] = MD_X(3 + c, a);
                f[c][n] = MD_X(6 + c, a);
            }
            n++;
        }
#undef MD_X
        free(b);
    }
    /* (The next step sorts them, forces and all.) */
    hdr.natoms = n;
    return MPI_SUCCESS;
}
#endif

int main(int argc, char **argv)
{
    int iters = 100, every = 10;
    if (proxy_options(argc, argv, "md", &nc, &iters, &every)) return 1;
    if (nc < 2) nc = 2;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    struct proxy app = {"md", iters, every, setup, setup_mpi, protect, initial, step, &hdr.iter, &mcomm};
#ifndef PLAIN
    app.reload = reload;
#endif
    proxy_run(argc, argv, &app);
    if (rank == 0)
        printf("md: %d ranks (%dx%dx%d), %d atoms per rank at start, %d steps: energy per atom potential %.15e "
               "kinetic %.15e total %.15e; hottest atom %d (%.6e), most bound atom %d (%.6e), %.3f s\n",
               size, dims[0], dims[1], dims[2], 4 * nc * nc * nc, iters, hdr.pe, hdr.ke, hdr.pe + hdr.ke, hdr.kemax_id,
               hdr.kemax, hdr.pemin_id, hdr.pemin, MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}
