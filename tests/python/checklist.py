"""The checks' lines that test_package.py and test_metrics.py print: one a
check, "ok - NAME" or "not ok - NAME (DETAIL)", then "N passed, M failed"
from finish(), which exits 1 on a failure."""
import sys

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s - %s%s" % ("ok" if ok else "not ok", name, " (%s)" % detail if detail else ""), flush=True)


def finish():
    failed = results.count(False)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    sys.exit(1 if failed else 0)
