#!/usr/bin/env python3
"""Every log record the CPU suite read (tests/run.sh collects them through
CTXGUARD_TEST_RECORDS) against docs/log-schema.json, which refuses a field
it does not list; and every field the schema lists is described in
docs/log-format.md.  Usage: tests/log_schema.py RECORDS.  Prints one line
per problem, then "log schema: N records (per event) ok" or fails."""
import collections
import json
import os
import re
import sys

import jsonschema

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def fields(node, out):
    """Every property name the schema defines, at any depth."""
    if isinstance(node, dict):
        out.update(node.get("properties", {}))
        for v in node.values():
            fields(v, out)
    elif isinstance(node, list):
        for v in node:
            fields(v, out)
    return out


def main(path):
    with open(os.path.join(ROOT, "docs", "log-schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    problems = 0
    probe = {"event": "unmapped", "time": "2026-01-01T00:00:00.000000Z", "tid": 1, "pid": 1,
             "version": "0", "host": "h", "symbol": "cuX", "cuda_version": 12000, "flags": 0}
    if not validator.is_valid(probe) or validator.is_valid(dict(probe, undocumented=1)):
        print("log schema: the schema takes no valid record, or takes an undocumented field")
        problems += 1
    with open(os.path.join(ROOT, "docs", "log-format.md")) as f:
        documented = set(re.findall(r"`([a-z_]+)`", f.read()))
    for name in sorted(set(fields(schema, {})) - documented):
        print("log schema: field %s is not described in docs/log-format.md" % name)
        problems += 1
    seen = collections.Counter()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except ValueError as e:
                print("log schema: record %d is no JSON (%s): %s" % (n, e, line.strip()[:300]))
                problems += 1
                continue
            errors = list(validator.iter_errors(record))
            if errors:
                best = jsonschema.exceptions.best_match(errors)
                print("log schema: record %d (%s): %s: %s" % (n, record.get("event"), best.message,
                                                             line.strip()[:300]))
                problems += 1
            seen[record.get("event")] += 1
    if not seen:
        print("log schema: no records collected")
        problems += 1
    events = [d["properties"]["event"]["const"] for k, d in schema["$defs"].items() if k != "identity"]
    print("log schema: %d records (%s); events not seen: %s" % (
        sum(seen.values()), ", ".join("%s %d" % kv for kv in sorted(seen.items())),
        ", ".join(e for e in events if e not in seen) or "none"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
