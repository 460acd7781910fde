// A C++ program: the header is usable from C++, and C++ containers and
// classes work with it (the ring and an allreduce over std::vector).
#include <mpi.h>
#include <cstdio>
#include <numeric>
#include <vector>

struct Ring {
    int rank, size;
    Ring() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    int pass_along(int v) const {
        int got = -1;
        MPI_Sendrecv(&v, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT, (rank + size - 1) % size, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return got;
    }
};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    Ring ring;
    std::vector<double> v(1000);
    std::iota(v.begin(), v.end(), ring.rank);
    std::vector<double> sum(v.size());
    MPI_Allreduce(v.data(), sum.data(), (int)v.size(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int n = ring.size;
    for (size_t i = 0; i < sum.size(); i++) {
        double want = n * (double)i + n * (n - 1) / 2.0;
        if (sum[i] != want) {
            std::fprintf(stderr, "FAIL sum[%zu]=%g want %g\n", i, sum[i], want);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    int got = ring.pass_along(ring.rank * 2);
    if (got != ((ring.rank + n - 1) % n) * 2) {
        std::fprintf(stderr, "FAIL ring got %d\n", got);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (ring.rank == 0) std::printf("OK cxx\n");
    MPI_Finalize();
    return 0;
}
