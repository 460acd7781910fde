"""Prints the tables of a bench/transports CSV.

First the comparisons issue 23 sets targets for: the ratio of two
implementations measured in the same round, as min / median / max over the
rounds. Then every metric's median per implementation.
"""
import csv
import statistics
import sys
from collections import defaultdict

MIB = 1 << 20
# (what, metric, bytes, ranks, numerator, denominator, target); the targets
# are issue 38's. Times (latency, allreduce, hydro3d): a ratio below 1 is
# faster. Bandwidths and message rates: above 1 is faster.
TARGETS = [
    ("shm latency 8 B", "latency", 8, 2, "mpistages-shm", "openmpi-shm", "<= 1.5"),
    ("shm message rate 8 B", "msgrate", 8, 2, "mpistages-shm", "openmpi-shm", ">= 0.7"),
    ("shm streaming 1 MiB", "bandwidth", MIB, 2, "mpistages-shm", "openmpi-shm", ">= 0.8"),
    ("shm ping-pong 1 MiB", "pingpong_bw", MIB, 2, "mpistages-shm", "openmpi-shm", ">= 0.9"),
] + [
    (f"tcp ping-pong {s} MiB", "pingpong_bw", s * MIB, 2, "mpistages-tcp", "openmpi-tcp", ">= 0.9")
    for s in (1, 4, 16, 64)
] + [
    ("tcp streaming 1 MiB", "bandwidth", MIB, 2, "mpistages-tcp", "openmpi-tcp", ">= 0.9"),
    ("tcp streaming 4 MiB", "bandwidth", 4 * MIB, 2, "mpistages-tcp", "openmpi-tcp", ">= 0.9"),
    ("tcp latency 8 B", "latency", 8, 2, "mpistages-tcp", "openmpi-tcp", "<= 1.0"),
    ("udp/tcp latency 8 B", "latency", 8, 2, "mpistages-udp", "mpistages-tcp", "<= 1.1"),
    ("udp/tcp streaming 1 MiB", "bandwidth", MIB, 2, "mpistages-udp", "mpistages-tcp", ">= 0.8"),
    ("udp/tcp ping-pong 1 MiB", "pingpong_bw", MIB, 2, "mpistages-udp", "mpistages-tcp", ">= 0.7"),
    ("udp 1% loss / 0%, 1 MiB", "bandwidth", MIB, 2, "mpistages-udp-loss1", "mpistages-udp", ""),
    ("udp 5% loss / 0%, 1 MiB", "bandwidth", MIB, 2, "mpistages-udp-loss5", "mpistages-udp", ">= 0.3"),
    ("udp 5% loss / 0%, 8 B lat", "latency", 8, 2, "mpistages-udp-loss5", "mpistages-udp", ""),
] + [
    (f"allreduce {s // 1024} KiB, {n} ranks", "allreduce", s, n, "mpistages-shm", "openmpi-shm", "<= 1.1")
    for n in (2, 4, 8)
    for s in (256 * 1024, MIB)
] + [
    ("hydro3d 8 ranks (-s 20)", "hydro3d", 0, 8, "mpistages-shm", "openmpi-shm", "<= 1.05"),
    ("hydro3d 27 ranks (-s 10)", "hydro3d", 0, 27, "mpistages-shm", "openmpi-shm", "<= 1.05"),
]
IMPLS = ["mpistages-shm", "mpistages-tcp", "mpistages-udp", "mpistages-udp-loss1",
         "mpistages-udp-loss5", "openmpi-shm", "openmpi-tcp", "mpich"]
SHORT = ["ms-shm", "ms-tcp", "ms-udp", "udp-1%", "udp-5%", "ompi-shm", "ompi-tcp", "mpich"]


def main(path):
    vals = defaultdict(lambda: defaultdict(dict))  # key -> impl -> round -> value
    for r in csv.DictReader(open(path)):
        key = (r["metric"], int(r["bytes"]), int(r["ranks"]))
        vals[key][r["impl"]][r["round"]] = float(r["value"])
    print(f"{'comparison':<30}{'numerator':>20}{'denominator':>14}{'min':>7}{'median':>8}{'max':>7}"
          f"{'target':>9}{'rounds':>8}")
    for what, metric, size, ranks, num, den, target in TARGETS:
        row = vals.get((metric, size, ranks), {})
        a, b = row.get(num, {}), row.get(den, {})
        rs = sorted(a[k] / b[k] for k in a if b.get(k))
        if rs:
            cells = f"{rs[0]:7.2f}{statistics.median(rs):8.2f}{rs[-1]:7.2f}"
        else:
            cells = f"{'-':>7}{'-':>8}{'-':>7}"
        print(f"{what:<30}{num:>20}{den:>14}{cells}{target:>9}{len(rs):>8}")
    print("\nmedians (latency, allreduce: us; bandwidth, pingpong_bw: MB/s; msgrate: Mmsg/s; hydro3d: s)")
    print(f"{'metric':<12}{'bytes':>10}{'ranks':>6}" + "".join(f"{s:>10}" for s in SHORT))
    for key in sorted(vals, key=lambda k: (k[0], k[2], k[1])):
        metric, size, ranks = key
        line = f"{metric:<12}{size:>10}{ranks:>6}"
        for impl in IMPLS:
            v = list(vals[key].get(impl, {}).values())
            line += f"{statistics.median(v):10.2f}" if v else f"{'':>10}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
