#!/usr/bin/python3
"""
ist.py: independent subnet training (issue 15) on the whole of Fashion-MNIST,
examples/mnist_ist.tra (784-512-512-10, per-neuron standardisation, batch
100, J = 10, lr 0.3) by IST and, with its split clause removed, by trac's
data-parallel synchronous SGD, on 2 and 4 ranks.

    make bench-ist                        # or: bench/ist.py [--epochs 1,2,4,6] [--ranks 2,4]
    bench/ist.py --network 1gbit          # over TCP, the loopback throttled (tc, as root)

With --network RATE the ranks talk over TCP (--mca btl self,tcp) through a
loopback throttled to RATE by `tc qdisc ... tbf` for the run, as between
machines on a network of that speed, and the seconds are the wall time of
a second run without --profile (whose barrier before every op would cost a
round trip each); otherwise over shared memory, where communication is
nearly free.

For each rank count and number of epochs, one whole process each way:
test accuracy, bytes sent (--profile), seconds.  Then per rank count:
IST's exchange bytes per step against the thesis's formula (floats per
step (N0 N1 + N2 N3)/J + N1 N2/(n J), a coordinator sending every slice)
and against what trac expects without a coordinator ((1 - 1/n) times it,
plus averaging the unsplit output bias); data-parallel bytes per step;
accuracy after the same epochs; time to a fixed test accuracy.

Environment: TRAC (default ./trac), MPIRUN.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.dont_write_bytecode = True
import mnist_ist                        # noqa: E402

TRAC = os.path.abspath(os.environ.get("TRAC", "./trac"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
N, B, J, D, H1, H2, C = 60000, 100, 10, 784, 512, 512, 10
TARGET = 0.85


def arg(name, default):
    return [int(x) for x in (sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default).split(",")]


def main():
    epochs, ranks = arg("--epochs", "1,2,4,6"), arg("--ranks", "2,4")
    rate = sys.argv[sys.argv.index("--network") + 1] if "--network" in sys.argv else None
    if not rate:
        return train(epochs, ranks, (), False)
    subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst", "1mb",
                    "limit", "256mb"], check=True)
    try:
        print("over TCP, the loopback throttled to %s" % rate)
        train(epochs, ranks, ("--mca", "btl", "self,tcp"), True)
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=True)


def train(epochs, ranks, mpiflags, wall):
    rows = {}
    for n in ranks:
        for e in epochs:
            r = mnist_ist.run_both(n, ["-D", "EPOCHS=%d" % e], trac=TRAC, mpirun=MPIRUN, mpiflags=mpiflags, wall=wall)
            rows[n, e] = r
            print("n=%d epochs=%d: IST acc %.4f sent %.4g B %.1f s | sync acc %.4f sent %.4g B %.1f s"
                  % (n, e, r["ist"][0], r["ist"][1], r["ist"][2], r["sync"][0], r["sync"][1], r["sync"][2]),
                  flush=True)
    print("\n### IST vs data-parallel SGD on Fashion-MNIST (examples/mnist_ist.tra)\n")
    print("    ranks  epochs  IST acc  sync acc  IST s  sync s  IST bytes  sync bytes")
    for (n, e), r in sorted(rows.items()):
        print("    %-5d  %-6d  %.4f   %.4f    %-5.1f  %-6.1f  %-9.3g  %.3g"
              % (n, e, r["ist"][0], r["sync"][0], r["ist"][2], r["sync"][2], r["ist"][1], r["sync"][1]))
    print("\n    ranks  IST B/step  expected  ratio  thesis formula  ratio  gather B/step  sync B/step  sync/IST")
    for n in ranks:
        e = max(epochs)
        r = rows[n, e]
        # the ist: lines, one per epoch: exchange bytes and rounds
        sent = rounds = gather = 0.0
        for line in r["ist"][3]:
            m = re.search(r"(\d+) rounds of \d+ steps: exchanges sent (\d+) bytes.*final gather (\d+)", line)
            rounds += int(m.group(1)) - 1          # a run's first round moves nothing: params are whole
            sent += float(m.group(2))
            gather += float(m.group(3))
        steps = rounds * J
        thesis = 4 * ((D * H1 + H2 * C) / J + H1 * H2 / (n * J))
        # trac's expectation: (1 - 1/n) of it (H1's bias too), plus b3 averaged
        expect = 4 * ((1 - 1 / n) * ((D * H1 + H2 * C) + H1 * H2 / n) + 2 * (n - 1) * C) / J
        per_epoch_steps = N // B // n
        # the data-parallel plan also places the data set once: a step's
        # bytes are the difference between the longest and shortest runs
        e0 = min(epochs)
        sync_step = (r["sync"][1] - rows[n, e0]["sync"][1]) / ((e - e0) * N // B) if e > e0 else \
            r["sync"][1] / (e * N // B)
        ist_step = sent / steps
        gather_step = gather / (e * per_epoch_steps)
        print("    %-5d  %-10.0f  %-8.0f  %.3f  %-14.0f  %.3f  %-13.0f  %-11.0f  %.1f"
              % (n, ist_step, expect, ist_step / expect, thesis, ist_step / thesis, gather_step, sync_step,
                 sync_step / (ist_step + gather_step)))
    print("\n    time to test accuracy %.2f (the fewest epochs reaching it, that run's seconds)" % TARGET)
    for n in ranks:
        for way in ("ist", "sync"):
            hit = [(e, rows[n, e][way][2]) for e in epochs if rows[n, e][way][0] >= TARGET]
            print("    %d ranks %-4s: %s" % (n, way, "%d epochs, %.1f s" % hit[0] if hit else "not reached"))


if __name__ == "__main__":
    main()
