"""`ctxguard report [--json] LOG...`: a fleet summary of ctxguard's JSON-lines
logs (a job's ranks, a node's day): crossings per kernel, per host and per
rank, by kind and action, with redirects and the first and last time; the
other events counted.  --json prints the same for scripts.  Standard library
only: the C command runs it with python3 (`ctxguard report ...`)."""
import argparse
import collections
import json
import sys
from typing import Any, Dict, Iterable, List, Optional, TextIO

KINDS = ("a", "b")
ACTIONS = ("abort", "error", "warn", "redirect")


def _new_row() -> Dict[str, Any]:
    return {"crossings": 0, "kind": dict.fromkeys(KINDS, 0), "action": dict.fromkeys(ACTIONS, 0),
            "redirects": 0, "first": None, "last": None}


def _add(row: Dict[str, Any], rec: Dict[str, Any]) -> None:
    row["crossings"] += 1
    kind, action, when = rec.get("kind"), rec.get("action"), rec.get("time")
    if kind in row["kind"]:
        row["kind"][kind] += 1
    if action in row["action"]:
        row["action"][action] += 1
    row["redirects"] += action == "redirect"
    if isinstance(when, str):  # ISO 8601 UTC with a fixed width: compares as text
        row["first"] = min(row["first"] or when, when)
        row["last"] = max(row["last"] or when, when)


def rank_of(rec: Dict[str, Any]) -> str:
    """torchrun's RANK, else Slurm's task rank, as the log path's %r."""
    return str(rec.get("rank") or rec.get("slurm_procid") or "-")


def summarize(paths: Iterable[str]) -> Dict[str, Any]:
    tables: Dict[str, Dict[str, Dict[str, Any]]] = {"kernels": {}, "hosts": {}, "ranks": {}}
    events: collections.Counter = collections.Counter()
    counted = dict.fromkeys(ACTIONS + ("off",), 0)
    out: Dict[str, Any] = {"files": 0, "records": 0, "unreadable_lines": 0, "unreadable_files": []}
    for path in paths:
        try:
            f = sys.stdin if path == "-" else open(path, encoding="utf-8", errors="replace")
        except OSError as e:
            out["unreadable_files"].append("%s: %s" % (path, e.strerror))
            continue
        out["files"] += 1
        with f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    out["unreadable_lines"] += line.strip() != ""
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
                    out["unreadable_lines"] += 1
                    continue
                out["records"] += 1
                events[rec["event"]] += 1
                if rec["event"] == "summary" and isinstance(rec.get("crossings"), dict):
                    for action in counted:
                        counted[action] += int(rec["crossings"].get(action) or 0)
                if rec["event"] != "crossing":
                    continue
                kernel = rec.get("demangled") or rec.get("kernel") or "?"
                for table, key in (("kernels", kernel), ("hosts", str(rec.get("host", "?"))),
                                   ("ranks", rank_of(rec))):
                    _add(tables[table].setdefault(key, _new_row()), rec)
    out["events"] = dict(sorted(events.items()))
    out["processes"] = events["start"]
    out["crossings_logged"] = sum(r["crossings"] for r in tables["hosts"].values())
    out["crossings_counted"] = counted
    for table, name in (("kernels", "kernel"), ("hosts", "host"), ("ranks", "rank")):
        rows = sorted(tables[table].items(), key=lambda kv: (-kv[1]["crossings"], kv[0]))
        out[table] = [dict({name: key}, **row) for key, row in rows]
    return out


def _print_table(title: str, name: str, rows: List[Dict[str, Any]], f: TextIO) -> None:
    print("\n%s:" % title, file=f)
    if not rows:
        print("  (no crossings)", file=f)
        return
    head = ["crossings", "kind a", "kind b"] + list(ACTIONS) + ["first", "last"]
    print("  %9s %6s %6s %6s %6s %6s %8s  %-27s %-27s %s" % tuple(head + [name]), file=f)
    for r in rows:
        print("  %9d %6d %6d %6d %6d %6d %8d  %-27s %-27s %s" % (
            r["crossings"], r["kind"]["a"], r["kind"]["b"], r["action"]["abort"], r["action"]["error"],
            r["action"]["warn"], r["action"]["redirect"], r["first"] or "-", r["last"] or "-", r[name]),
            file=f)


def print_text(s: Dict[str, Any], f: TextIO = sys.stdout) -> None:
    counted = s["crossings_counted"]
    print("ctxguard report: %d file%s, %d records, %d process%s started, %d crossing%s logged "
          "(%d counted at exit: abort %d, error %d, warn %d, redirect %d, off %d)" % (
              s["files"], "" if s["files"] == 1 else "s", s["records"], s["processes"],
              "" if s["processes"] == 1 else "es", s["crossings_logged"],
              "" if s["crossings_logged"] == 1 else "s", sum(counted.values()) - counted["off"],
              counted["abort"], counted["error"], counted["warn"], counted["redirect"], counted["off"]),
          file=f)
    print("events: " + (", ".join("%s %d" % kv for kv in s["events"].items()) or "none"), file=f)
    for what in s["unreadable_files"]:
        print("unreadable: " + what, file=f)
    if s["unreadable_lines"]:
        print("%d line%s that are no log record skipped" % (
            s["unreadable_lines"], "" if s["unreadable_lines"] == 1 else "s"), file=f)
    _print_table("By kernel", "kernel", s["kernels"], f)
    _print_table("By host", "host", s["hosts"], f)
    _print_table("By rank", "rank", s["ranks"], f)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ctxguard report",
        description="Summarize ctxguard JSON-lines logs: crossings per kernel, host and rank.")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("logs", nargs="+", metavar="LOG", help="log files ('-': standard input)")
    args = parser.parse_args(argv)
    s = summarize(args.logs)
    if args.json:
        json.dump(s, sys.stdout, indent=1)
        print()
    else:
        print_text(s)
    # 1: a file could not be read; 0 otherwise, crossings or not (the
    # report is a summary, not a verdict)
    return 1 if s["unreadable_files"] else 0


if __name__ == "__main__":
    sys.exit(main())
