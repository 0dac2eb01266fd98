#!/usr/bin/env python3
"""The folder graph of shim/: which subsystem folder includes or calls
which.  Fails when two folders depend on each other, directly or through
others (an import loop larger than one folder).

An edge A -> B is an #include of a header in B by a file in A, or a name
that a file in A uses and a .c file in B defines (a function or global).
Names declared in shim/shim.h, the common header every folder includes
(the hooks table, start-up state, the launch marks), are everybody's and
make no edge; shim/cli/ is a separate program.

    tests/deps_graph.py [-v] [SHIM_DIR]   one line, the folders in layer
                                          order (-v: every edge); exit 1 on a cycle
"""
import os
import re
import sys

args = [a for a in sys.argv[1:] if a != "-v"]
verbose = "-v" in sys.argv[1:]
root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "shim")
root = os.path.normpath(root)
folders = sorted(d for d in os.listdir(root)
                 if os.path.isdir(os.path.join(root, d)) and d != "cli")
files = {d: sorted(os.path.join(root, d, f) for f in os.listdir(os.path.join(root, d))
                   if f.endswith((".c", ".h")))
         for d in folders}


def strip(text):
    """Source without comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


NAME = re.compile(r"\bcg_\w+\b")
with open(os.path.join(root, "shim.h")) as f:
    common = set(NAME.findall(strip(f.read())))

# Definitions: at the start of a line (top level), not a declaration.
defined = {}
DEF_FN = re.compile(r"^(?![ \t#}]|extern\b|static\b|typedef\b)[^;{}()]*?\b(cg_\w+)\s*\(", re.M)
DEF_VAR = re.compile(r"^(?![ \t#}]|extern\b|static\b|typedef\b)[^;{}=]*?\b(cg_\w+)\s*(\[[^\]]*\])?\s*(CG_TLS\s*)?(=|;)", re.M)
sources = {}
for d in folders:
    for path in files[d]:
        with open(path) as f:
            sources[path] = strip(f.read())
        if not path.endswith(".c"):
            continue
        text = sources[path]
        for m in DEF_FN.finditer(text):
            # a definition: its parameter list is followed by a body
            rest = text[m.end():]
            depth, i = 1, 0
            while i < len(rest) and depth:
                depth += {"(": 1, ")": -1}.get(rest[i], 0)
                i += 1
            if rest[i:].lstrip().startswith("{"):
                defined.setdefault(m.group(1), d)
        for m in DEF_VAR.finditer(text):
            defined.setdefault(m.group(1), d)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
edges = {d: {} for d in folders}
for d in folders:
    for path in files[d]:
        with open(path) as f:
            raw = f.read()
        for inc in INCLUDE.findall(raw):
            target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            rel = os.path.relpath(target, root).split(os.sep)
            if len(rel) == 2 and rel[0] in folders and rel[0] != d:
                edges[d].setdefault(rel[0], set()).add("#include " + "/".join(rel))
        for name in set(NAME.findall(sources[path])):
            owner = defined.get(name)
            if owner and owner != d and name not in common:
                edges[d].setdefault(owner, set()).add(name)

if verbose:
    for d in folders:
        out = ", ".join("%s (%d)" % (t, len(edges[d][t])) for t in sorted(edges[d]))
        print("shim/%s/ -> %s" % (d, out or "-"))

# A cycle: depth-first search for a back edge.
state, stack, bad = {}, [], []


def visit(d):
    state[d] = 1
    stack.append(d)
    for t in sorted(edges[d]):
        if state.get(t) == 1:
            bad.append(stack[stack.index(t):] + [t])
        elif not state.get(t):
            visit(t)
    stack.pop()
    state[d] = 2


for d in folders:
    if not state.get(d):
        visit(d)
if not bad:
    # leaves first: each folder after every folder it depends on
    order, seen = [], set()

    def place(d):
        if d in seen:
            return
        seen.add(d)
        for t in sorted(edges[d]):
            place(t)
        order.append(d)

    for d in folders:
        place(d)
    print("ok folder graph of %s/: %s" % (os.path.relpath(root), " < ".join(order)))
for cycle in bad:
    print("deps_graph: import loop between folders: " + " -> ".join(cycle), file=sys.stderr)
    for a, b in zip(cycle, cycle[1:]):
        print("  %s -> %s: %s" % (a, b, ", ".join(sorted(edges[a][b]))), file=sys.stderr)
sys.exit(1 if bad else 0)
