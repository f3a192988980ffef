"""cases.py: the runner the end-to-end Python tests share.

    sys.exit(run_cases(CASES, run))

Each case is a dict with a "name"; run(case, tmpdir) returns a list of
error strings (empty: the case passed).  Names on the command line run
those cases only.  Prints "ok NAME" or "FAIL NAME" and the errors, then a
summary; returns the exit status (1 if any case failed).
"""
import atexit
import os
import shutil
import sys
import tempfile


def mpi_env():
    """The environment for mpirun as the tests run it: as root, more ranks
    than cores, and Open MPI's session directory in a folder of this
    process's own, so that tests run side by side (make -j2 check) never
    race to create the same one under /tmp."""
    base = tempfile.mkdtemp(prefix="trac-ompi.")
    atexit.register(shutil.rmtree, base, True)
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_orte_tmpdir_base=base)


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
