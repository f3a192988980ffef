#!/bin/sh
# OPEN BUG, not run by the suite: at -O2 on 2 or 3 ranks, prog.tra's dW
# (Gu4_19) is wrong in 10-20% of runs (1e+28, 535, 0.368 off where the
# other runs give -O0's value); -O0, -O1 and 1 rank are right in every run,
# and so is the forward (Tu4_10, Lu4_18); under valgrind it never fails and
# valgrind reports nothing: a race.  Found by `make difftest SEED=1141`
# (group 145, 2026-11-28); present at 0acce69 too, before that day's
# changes.  Suspects: the backward's sampled 4-d join (#30 in `trac -O2
# -P 2 --explain prog.tra`: #29 part(3) x #25 part(2), sampled at Xu4_5)
# and the holes relations around it.
#   sh tests/diff/open/race_sampled_grad/run.sh [TRAC [RUNS]]
# prints how many of RUNS 2-rank runs were wrong; exit 1 if any.
set -e
here=$(cd "$(dirname "$0")" && pwd)
TRAC=${1:-$here/../../../../trac}
RUNS=${2:-20}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cp "$here"/*.np? "$here/prog.tra" "$d"
cd "$d"
"$TRAC" -O0 -P 1 prog.tra -o ref
"$TRAC" -O2 -P 1,2,3 prog.tra -o o2
./ref --quiet Xu4_5=Xu4_5.npz Xu4_9=Xu4_9.npy Gu4_19.out=ref.npy Tu4_10.out=t.npy Lu4_18.out=l.npy
bad=0
for i in $(seq 1 "$RUNS"); do
	mpirun -np 2 ./o2 --quiet Xu4_5=Xu4_5.npz Xu4_9=Xu4_9.npy Gu4_19.out=g.npy Tu4_10.out=t.npy Lu4_18.out=l.npy
	/usr/bin/python3 -c 'import numpy as np, sys; sys.exit(int(abs(np.load("g.npy") - np.load("ref.npy")).max() > 1e-3))' ||
		bad=$((bad + 1))
done
echo "wrong dW in $bad of $RUNS runs on 2 ranks"
[ "$bad" = 0 ]
