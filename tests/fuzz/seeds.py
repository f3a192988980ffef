#!/usr/bin/python3
"""
seeds.py OUTDIR: the fuzzer's seed corpus, written to OUTDIR, one .tra
program a file: examples/*.tra, stdlib/*.tra, tests/golden/*.tra, the
programs inside tests/e2e/language.py, sparse.py (sampled products among
them) and gather.py, the .tra files the shell tests write with a
here-document (cat >x.tra <<'EOF'), the differential tests' regression
programs (tests/diff/regress/) and 64 programs of their generator
(tests/diff/gen.py, every construct of the language).  Run from the source
tree's top.
"""
import glob, os, re, sys, textwrap

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for pat in ("examples/*.tra", "stdlib/*.tra", "tests/golden/*.tra", "tests/fuzz/regress/*", "tests/diff/regress/*.tra"):
    for path in sorted(glob.glob(pat)):
        with open(path, "rb") as f:
            data = f.read()
        name = path.replace("/", "_")
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        n += 1
for suite in ("language", "sparse", "gather"):
    with open("tests/e2e/%s.py" % suite) as f:
        src = f.read()
    for m in re.finditer(r'case\(\s*"(\w+)",\s*"""(.*?)"""', src, re.S):
        with open(os.path.join(out, "%s_%s.tra" % (suite, m.group(1))), "w") as f:
            f.write(textwrap.dedent(m.group(2)))
        n += 1
for path in sorted(glob.glob("tests/e2e/*.sh")):
    with open(path) as f:
        src = f.read()
    for m in re.finditer(r">\s*(\w+)\.tra\s*<<\s*'(\w+)'\n(.*?)\n\2\n", src, re.S):
        with open(os.path.join(out, "%s_%s.tra" % (os.path.basename(path)[:-3], m.group(1))), "w") as f:
            f.write(m.group(3) + "\n")
        n += 1
sys.path.insert(0, "tests/diff")
sys.dont_write_bytecode = True
import gen                                  # noqa: E402
for seed in range(64):
    u = gen.generate(seed, "u0", error=seed % 16 == 0)
    with open(os.path.join(out, "gen_%d.tra" % seed), "w") as f:
        f.write(gen.group_text([u]))
    n += 1
print("seeds.py: %d seeds in %s" % (n, out))
