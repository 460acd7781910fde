/* Ports, names and MPI_Comm_join (mpi4py's test_dynproc does the same):
 * rank 0 and the others connect through a port both ways round, a name
 * published by one rank is found by every other, two ranks join over a
 * TCP socket of their own; traffic flows on each new inter-communicator.
 * Bad ports and names are errors of the right class, never a hang. */
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void check_class(int rc, int want, const char *what) {
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == want, "%s: class %d, want %d", what, cls, want);
}

/* Rank `acceptor` opens a port and accepts on COMM_SELF; the others
 * connect as one group (their own communicator, rooted at its rank 0). */
static void rendezvous(int acceptor) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm others;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank == acceptor, 0, &others));
    MPI_Comm inter;
    char port[MPI_MAX_PORT_NAME] = "";
    int first_other = acceptor == 0 ? 1 : 0;
    if (rank == acceptor) {
        CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK(strlen(port) > 0 && strlen(port) < MPI_MAX_PORT_NAME, "port '%s'", port);
        CHECK_RC(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, first_other, 5, MPI_COMM_WORLD));
        CHECK_RC(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        CHECK_RC(MPI_Close_port(port));
    } else {
        if (rank == first_other)
            CHECK_RC(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, acceptor, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        /* the port is read at the root only */
        CHECK_RC(MPI_Comm_connect(rank == first_other ? port : NULL, MPI_INFO_NULL, 0, others, &inter));
    }
    int flag, lsize, rsize;
    CHECK_RC(MPI_Comm_test_inter(inter, &flag));
    CHECK_RC(MPI_Comm_size(inter, &lsize));
    CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
    CHECK(flag, "not an inter-communicator");
    CHECK(lsize == (rank == acceptor ? 1 : size - 1), "local size %d", lsize);
    CHECK(rsize == (rank == acceptor ? size - 1 : 1), "remote size %d", rsize);
    /* the acceptor sends to each remote rank, and they answer */
    if (rank == acceptor) {
        for (int r = 0; r < rsize; r++) {
            int v = 100 + r, back = -1;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, r, 1, inter));
            CHECK_RC(MPI_Recv(&back, 1, MPI_INT, r, 2, inter, MPI_STATUS_IGNORE));
            CHECK(back == 2 * v, "answer %d from %d", back, r);
        }
    } else {
        int lrank, v = -1;
        MPI_Comm_rank(inter, &lrank);
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE));
        CHECK(v == 100 + lrank, "got %d", v);
        v *= 2;
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, 0, 2, inter));
    }
    /* a collective across the new inter-communicator */
    int sum = 0, one = 1;
    CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == rsize, "allreduce %d, remote size %d", sum, rsize);
    CHECK_RC(MPI_Comm_disconnect(&inter));
    CHECK_RC(MPI_Comm_free(&others));
}

static void names(void) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char port[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME], service[64];
    /* each rank its own name, looked up by the next rank */
    CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
    snprintf(service, sizeof service, "ocean-%d", rank);
    CHECK_RC(MPI_Publish_name(service, MPI_INFO_NULL, port));
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(service, sizeof service, "ocean-%d", (rank + 1) % size);
    CHECK_RC(MPI_Lookup_name(service, MPI_INFO_NULL, found));
    char theirs[MPI_MAX_PORT_NAME];
    CHECK_RC(MPI_Sendrecv(port, MPI_MAX_PORT_NAME, MPI_CHAR, (rank + size - 1) % size, 3, theirs,
                          MPI_MAX_PORT_NAME, MPI_CHAR, (rank + 1) % size, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(strcmp(found, theirs) == 0, "looked up '%s', published '%s'", found, theirs);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    snprintf(service, sizeof service, "ocean-%d", rank);
    if (rank == 0) {
        /* published twice, unpublished with the wrong port */
        check_class(MPI_Publish_name(service, MPI_INFO_NULL, "x"), MPI_ERR_SERVICE, "publish twice");
        check_class(MPI_Unpublish_name(service, MPI_INFO_NULL, "x"), MPI_ERR_SERVICE, "wrong port");
    }
    CHECK_RC(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
    MPI_Barrier(MPI_COMM_WORLD);
    check_class(MPI_Lookup_name(service, MPI_INFO_NULL, found), MPI_ERR_NAME, "lookup after unpublish");
    check_class(MPI_Unpublish_name(service, MPI_INFO_NULL, port), MPI_ERR_SERVICE, "unpublish twice");
    CHECK_RC(MPI_Close_port(port));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void bad_ports(void) {
    MPI_Comm c = MPI_COMM_WORLD;
    char port[MPI_MAX_PORT_NAME];
    /* (calls without a communicator report to MPI_COMM_WORLD's handler) */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check_class(MPI_Comm_connect("tcp://198.18.0.1:1", MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT,
                "connect to a foreign name");
    CHECK(c == MPI_COMM_NULL, "no communicator on an error");
    int rc = MPI_Comm_connect("mpistages-port:another-job:0:0", MPI_INFO_NULL, 0, MPI_COMM_SELF, &c);
    check_class(rc, MPI_ERR_PORT, "connect to another job's port");
    check_class(MPI_Close_port("mpistages-port:x"), MPI_ERR_PORT, "close a foreign name");
    CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK_RC(MPI_Close_port(port));
    check_class(MPI_Close_port(port), MPI_ERR_PORT, "close twice");
    check_class(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT, "accept on a closed port");
    check_class(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT,
                "connect to our own closed port");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Ranks 0 and 1 join over a loopback TCP socket. */
static void join(void) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) return;
    int fd = -1, lfd = -1;
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (rank == 0) {
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 1) == 0, "listen");
        getsockname(lfd, (struct sockaddr *)&a, &alen);
        CHECK_RC(MPI_Send(&a.sin_port, sizeof a.sin_port, MPI_BYTE, 1, 9, MPI_COMM_WORLD));
        fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0, "accept");
        close(lfd);
    } else if (rank == 1) {
        CHECK_RC(MPI_Recv(&a.sin_port, sizeof a.sin_port, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    }
    if (rank <= 1) {
        MPI_Comm inter;
        CHECK_RC(MPI_Comm_join(fd, &inter));
        int rsize, v = rank == 0 ? 42 : -1;
        CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
        CHECK(rsize == 1, "remote size %d", rsize);
        CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : 0, inter));
        if (rank == 1) CHECK(v == 42, "bcast over the joined communicator gave %d", v);
        CHECK_RC(MPI_Comm_free(&inter));
        close(fd);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bad_ports();
    if (size > 1) {
        rendezvous(0);
        rendezvous(size - 1);
    }
    names();
    join();
    pass("ports");
    MPI_Finalize();
    return 0;
}
