#!/usr/bin/env python3
"""Fails when a relative link in a tracked *.md file names a file that does
not exist, or a #section that the target's headings do not make (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens)."""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
files = subprocess.run(['git', 'ls-files', '*.md'], cwd=root, capture_output=True,
                       text=True, check=True).stdout.split()
link = re.compile(r'\]\(([^)\s]+)\)')
fence = re.compile(r'^\s*```')


def anchors(path, cache={}):
    if path not in cache:
        found, infence = set(), False
        for line in open(path, encoding='utf-8'):
            if fence.match(line):
                infence = not infence
            m = None if infence else re.match(r'#{1,6}\s+(.*)', line)
            if m:
                slug = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-')
                n = 1
                base = slug
                while slug in found:
                    slug = '%s-%d' % (base, n)
                    n += 1
                found.add(slug)
        cache[path] = found
    return cache[path]


bad = 0
for f in files:
    infence = False
    for no, line in enumerate(open(os.path.join(root, f), encoding='utf-8'), 1):
        if fence.match(line):
            infence = not infence
        if infence:
            continue
        for target in link.findall(line):
            if re.match(r'[a-z]+:', target):
                continue
            path, _, section = target.partition('#')
            full = os.path.normpath(os.path.join(root, os.path.dirname(f), path)) if path \
                else os.path.join(root, f)
            if not os.path.exists(full):
                print('%s:%d: %s: no such file' % (f, no, target))
                bad += 1
            elif section and full.endswith('.md') and section not in anchors(full):
                print('%s:%d: %s: no such section' % (f, no, target))
                bad += 1
if bad:
    sys.exit('%d broken link%s in the docs' % (bad, '' if bad == 1 else 's'))
print('docs: %d files, every relative link resolves' % len(files))
