"""cases.py: the runner the end-to-end Python tests share.

    sys.exit(run_cases(CASES, run))

Each case is a dict with a "name"; run(case, tmpdir) returns a list of
error strings (empty: the case passed).  Names on the command line run
those cases only.  Prints "ok NAME" or "FAIL NAME" and the errors, then a
summary; returns the exit status (1 if any case failed).
"""
import sys
import tempfile


def run_cases(cases, run, prefix="trac-e2e."):
    only = sys.argv[1:]
    fails = 0
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for c in cases:
            if only and c["name"] not in only:
                continue
            errs = run(c, tmp)
            print(("FAIL " if errs else "ok ") + c["name"])
            for e in errs:
                print("  " + e.replace("\n", "\n  "))
            fails += bool(errs)
    print("%d case(s) failed" % fails if fails else "all cases passed")
    return 1 if fails else 0
