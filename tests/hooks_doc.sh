#!/bin/sh
# Fails when docs/hooks.md is not what tools/hooks_md.awk makes of
# shim/hooks.def: the table changed and `make docs/hooks.md` was not run.
root=$(cd "$(dirname "$0")/.." && pwd)
if awk -f "$root/tools/hooks_md.awk" "$root/shim/hooks.def" | cmp -s - "$root/docs/hooks.md"; then
	echo "docs/hooks.md: up to date with shim/hooks.def"
else
	echo "docs/hooks.md is stale: shim/hooks.def changed; run 'make docs/hooks.md' and commit it" >&2
	exit 1
fi
