#!/usr/bin/env python3
"""The metrics file through prometheus_client's own parser: a program under
the ctxguard command (on the fake driver) writes it at exit; every metric
has # HELP and # TYPE counter, no label is a pid, and the labels are the
host's, the job's and the rank's identity (and a crossing's action).
Usage: test_metrics.py BUILD_DIR (the fake libcuda on LD_LIBRARY_PATH).
Prints one line per check and "N passed, M failed"; exits 1 on a failure."""
import os
import subprocess
import sys
import tempfile

from checklist import check, finish
from prometheus_client.parser import text_string_to_metric_families

IDENTITY = {"host", "rank", "local_rank", "torchelastic_run_id", "slurm_job_id", "slurm_procid",
            "slurm_localid", "pod", "namespace"}

build = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "ctxguard.%r.prom")
    env = dict(os.environ, RANK="3", SLURM_JOB_ID="77", WORLD_SIZE="8")
    subprocess.run([os.path.join(build, "ctxguard"), "--quiet", "--mode", "warn", "--metrics", path, "--",
                    os.path.join(build, "tests/progs/scenario"), "dlsym", "data", "launch", "cross"],
                   env=env, capture_output=True)
    with open(os.path.join(tmp, "ctxguard.3.prom")) as f:
        text = f.read()

families = list(text_string_to_metric_families(text))
check("the file parses", bool(families), "" if families else text[:200])
for fam in families:
    check("%s: # HELP" % fam.name, "# HELP %s_total " % fam.name in text and bool(fam.documentation))
    check("%s: a counter" % fam.name, fam.type == "counter", fam.type)
    for s in fam.samples:
        extra = set(s.labels) - IDENTITY - {"action"}
        check("%s%s: identity labels only" % (s.name, s.labels), not extra and "host" in s.labels,
              "extra %s" % sorted(extra))
        if s.name == "ctxguard_crossings_total" and s.labels.get("action") == "warn":
            check("one warn crossing counted", s.value == 1, s.value)
finish()
