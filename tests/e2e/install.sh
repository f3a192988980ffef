#!/bin/sh
# make install into a DESTDIR, then use what it installed from there, as an
# installation moved as a whole: the installed trac finds its runtime and
# stdlib next to itself, compiles matmul and the result is right; C from
# trac -S links against the shared runtime through tracrt.pc; uninstall
# leaves no file behind.
BUILD=$(cd "${top_builddir:?}" && pwd)
. "$srcdir/tests/e2e/lib.sh"
: "${MAKE:=make}" "${MPICC:=mpicc}"
unset MAKEFLAGS MFLAGS MAKELEVEL       # a make of its own, not make check's sub-make
dest=$TMP/dest

if ! (cd "$BUILD" && $MAKE install DESTDIR="$dest") >install.log 2>&1; then
	cat install.log
	fail "make install DESTDIR=$dest"
	finish
fi
bin=$(find "$dest" -path '*/bin/trac' -type f)
root=${bin%/bin/trac}
[ -x "$bin" ] || { fail "no bin/trac in $dest"; finish; }
for f in include/trac_rt.h lib/libtracrt.a lib/libtracrt.so lib/libtracrt.so.0 lib/pkgconfig/tracrt.pc \
	share/man/man1/trac.1 share/man/man5/tra.5; do
	[ -e "$root/$f" ] || fail "make install did not install $f"
done
[ -d "$root/share/trac/stdlib" ] || fail "make install made no share/trac/stdlib"
for f in "$TOP"/stdlib/*.tra; do
	[ -e "$f" ] || continue
	[ -f "$root/share/trac/stdlib/${f##*/}" ] || fail "make install did not install stdlib/${f##*/}"
done
pass "make install DESTDIR"

"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(3)
np.save("a.npy", r.uniform(-1, 1, (300, 200)).astype(np.float32))
np.save("b.npy", r.uniform(-1, 1, (200, 100)).astype(np.float32))
PY
check() {
	"$PYTHON" - "$1" <<'PY'
import sys, numpy as np
a = np.load("a.npy").astype(np.float64); b = np.load("b.npy").astype(np.float64)
c = np.load(sys.argv[1]); ref = a @ b
err = np.abs(c - ref).max() / np.abs(ref).max()
print("max relative error %.3g" % err)
sys.exit(0 if c.shape == ref.shape and err < 1e-5 else 1)
PY
}
cp "$TOP/examples/matmul.tra" matmul.tra
sizes="-D I=300 -D K=200 -D J=100"

# the installed trac, away from the build tree, with no TRAC_RUNTIME_DIR;
# with no model file it measures this machine the first time it plans
# (trac-calibrate, installed in libexec/trac) and caches the result; when
# make install installed a model (after make calibrate), --machine host asks
# for this machine's all the same
unset TRAC_RUNTIME_DIR
[ -x "$root/libexec/trac/trac-calibrate" ] || fail "make install did not install libexec/trac/trac-calibrate"
host=
[ -f "$root/share/trac/machine.model" ] && host="--machine host"
if (unset TRAC_CALIBRATE; "$bin" -v $host $sizes -P 2 matmul.tra -o mm 2>verbose.log); then
	grep -q "^trac: machine model: $XDG_CACHE_HOME/trac/machine (quick calibration of .*, just now in" verbose.log &&
		grep -q '^gemm_f32_gflops_b1024=' "$XDG_CACHE_HOME/trac/machine" ||
		fail "the installed trac did not calibrate this machine: $(grep 'machine model' verbose.log)"
	# a read call's cost, which prices an input split along a later dim
	# (MTTKRP's X read in 320000 runs of 400 bytes: 0.3 s against 0.07)
	grep -q '^file_read_call_s=[1-9]' "$XDG_CACHE_HOME/trac/machine" ||
		fail "the quick calibration measured no read call: $(grep file_read "$XDG_CACHE_HOME/trac/machine")"
	# both inflating paths: a member over 256 MiB, or any under a memory
	# budget, streams through zlib at about half libdeflate's rate
	grep -q '^npz_inflate_Bps=[1-9]' "$XDG_CACHE_HOME/trac/machine" &&
		grep -q '^npz_zlib_Bps=[1-9]' "$XDG_CACHE_HOME/trac/machine" ||
		fail "the quick calibration measured no inflating: $(grep npz_ "$XDG_CACHE_HOME/trac/machine")"
	grep -q "^trac: imports from: . $root/bin/../share/trac/stdlib\$" verbose.log ||
		fail "the installed trac does not look for the stdlib next to itself: $(grep imports verbose.log)"
	grep -q -- "-I$root/bin/../include .* $root/bin/../lib/libtracrt.a" verbose.log ||
		fail "the installed trac does not use the runtime next to itself: $(grep running verbose.log)"
	rm -f c.npy
	if run 2 ./mm A=a.npy B=b.npy C=c.npy && check c.npy; then
		pass "the installed trac compiles matmul, and it runs right"
	else
		fail "matmul from the installed trac"
	fi
else
	cat verbose.log
	fail "the installed trac failed"
fi

# the machine model: make install says how to measure one when none was;
# an installed one is what the installed trac costs plans with, unless
# --machine or $TRAC_MACHINE name another; the build tree's trac never reads it
model=$root/share/trac/machine.model
if [ -f "$BUILD/bench-work/machine.model" ]; then
	[ -f "$model" ] || fail "make install did not install bench-work/machine.model"
else
	grep -q "make calibrate && make install" install.log ||
		fail "make install did not offer make calibrate: $(cat install.log | tail -3)"
	printf 'loop_rate_flops=1e9\nfile_write_bandwidth_Bps=5e8\n' >"$model"
fi
machine_of() { "$@" --explain matmul.tra 2>&1 | sed -n 's/^machine model: //p'; }
case $(unset TRAC_CALIBRATE; machine_of "$bin" --machine host $sizes -P 2) in
"$XDG_CACHE_HOME/trac/machine (cached quick calibration of "*) pass "the quick calibration, cached" ;;
*) fail "the second run did not read the cache: $(unset TRAC_CALIBRATE; machine_of "$bin" --machine host $sizes -P 2)" ;;
esac
sed 's/^host_cpu=.*/host_cpu=another CPU/' "$XDG_CACHE_HOME/trac/machine" >other.cache
mv other.cache "$XDG_CACHE_HOME/trac/machine"
case $(machine_of "$bin" --machine host $sizes -P 2) in
"derived from this machine ("*"cache is of another machine (another CPU"*"TRAC_CALIBRATE=0") ;;
*) fail "a cache of another CPU was used: $(machine_of "$bin" --machine host $sizes -P 2)" ;;
esac
[ "$(machine_of "$BUILD/trac" $sizes -P 2)" = "built-in" ] || fail "the build tree's trac plans with another model"
[ "$(unset TRAC_MACHINE; machine_of "$bin" $sizes -P 2)" = "$root/bin/../share/trac/machine.model" ] ||
	fail "the installed trac does not read the installed machine model: $(unset TRAC_MACHINE; machine_of "$bin" $sizes -P 2)"
printf 'loop_rate_flops=2e9\n' >other.model
[ "$(TRAC_MACHINE=other.model machine_of "$bin" $sizes -P 2)" = "other.model" ] ||
	fail "\$TRAC_MACHINE does not override the installed machine model"
[ "$(unset TRAC_MACHINE; machine_of "$BUILD/trac" $sizes -P 2)" = "built-in" ] ||
	fail "the build tree's trac reads an installed machine model"
pass "the installed machine model"

# C from trac -S, linked by hand against the shared runtime with tracrt.pc
pc="pkg-config --define-variable=prefix=$root"
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
if ! command -v pkg-config >/dev/null 2>&1; then
	skip "trac -S linked by pkg-config tracrt (no pkg-config; Debian: pkg-config)"
elif "$bin" $sizes -P 2 -S matmul.tra -o mm.c &&
	$MPICC -O2 mm.c $($pc --cflags --libs tracrt) -o mm_shared; then
	ldd ./mm_shared | grep -q "libtracrt.so.0 => $root/lib/libtracrt.so.0" ||
		LD_LIBRARY_PATH="$root/lib" ldd ./mm_shared | grep -q "libtracrt.so.0 => $root/lib/libtracrt.so.0" ||
		fail "mm_shared does not link libtracrt.so.0"
	rm -f c.npy
	if LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" run 2 ./mm_shared A=a.npy B=b.npy C=c.npy &&
		check c.npy; then
		pass "trac -S + mpicc + pkg-config tracrt: the shared runtime"
	else
		fail "matmul linked against libtracrt.so"
	fi
else
	fail "could not build trac -S output with \$(pkg-config --cflags --libs tracrt)"
fi

if (cd "$BUILD" && $MAKE uninstall DESTDIR="$dest") >uninstall.log 2>&1; then
	left=$(find "$dest" -type f -o -type l)
	[ -z "$left" ] && pass "make uninstall" || fail "make uninstall left: $left"
else
	cat uninstall.log
	fail "make uninstall"
fi
finish
