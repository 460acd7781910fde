"""Prints the side-by-side table of a bench/run CSV.

Ratios compare mpistages with Open MPI in the same run: for times
(latency, allreduce) ratio = mpistages / Open MPI, lower is better; for
bandwidth and overlap ratio = mpistages / Open MPI, higher is better.
A metric measured in several rounds shows its best round.
"""
import csv
import sys
from collections import defaultdict

IMPLS = ["mpistages-thread", "mpistages-poll", "openmpi", "mpich"]
HIGHER_IS_BETTER = {"bandwidth", "overlap", "overlap_both"}
UNITS = {"latency": "us", "persistent": "us", "nonpersistent": "us", "allreduce": "us",
         "bandwidth": "MB/s", "overlap": "%", "overlap_both": "%"}


def main(path):
    rows = defaultdict(dict)
    order = []
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["metric"], int(r["bytes"]), int(r["ranks"]))
            if key not in rows:
                order.append(key)
            v, seen = float(r["value"]), rows[key].get(r["impl"])
            if seen is not None:
                v = max(v, seen) if r["metric"] in HIGHER_IS_BETTER else min(v, seen)
            rows[key][r["impl"]] = v
    head = f"{'metric':<14}{'bytes':>9}{'ranks':>6}" + "".join(f"{i:>18}" for i in IMPLS)
    head += f"{'thread/ompi':>13}{'poll/ompi':>11}"
    print(head)
    print("-" * len(head))
    for key in order:
        metric, size, ranks = key
        vals = rows[key]
        line = f"{metric:<14}{size:>9}{ranks:>6}"
        unit = UNITS.get(metric, "")
        for i in IMPLS:
            v = vals.get(i)
            cell = "" if v is None else f"{v:.2f} {unit}"
            line += f"{cell:>18}"
        o = vals.get("openmpi")
        for i in IMPLS[:2]:
            v = vals.get(i)
            ratio = f"{v / o:.2f}" if v is not None and o else "-"
            line += f"{ratio:>{13 if i.endswith('thread') else 11}}"
        print(line)
    print("\nratio = mpistages / Open MPI; lower is better for times, higher for bandwidth and overlap.")


if __name__ == "__main__":
    main(sys.argv[1])
