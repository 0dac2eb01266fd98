#!/bin/sh
# The C style (.clang-format) on every tracked C file, but those written
# before the style was set and not reformatted since (tests/format_pending.txt:
# a file leaves the list once clang-format is run on it, so that a merge is
# never a whole-tree reformat).  A new file must be formatted.  Flags only:
#   tests/format.sh            check (CI)
#   clang-format -i FILE       format one file, then drop it from the list
set -e
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$cf" ]; then
	echo "format: clang-format not found: not checked" >&2
	exit 77
fi
git ls-files '*.c' '*.h' | grep -vxF -f tests/format_pending.txt | xargs "$cf" --dry-run -Werror
