#!/bin/sh
# ctxguard.1 from the command's --help (make man): the options section is
# the help text itself, so the page never falls behind the command.
# Usage: share/man.sh CTXGUARD VERSION > ctxguard.1
set -e
cmd=$1 version=$2
cat <<HEAD
.TH CTXGUARD 1 "" "ctxguard $version" "User Commands"
.SH NAME
ctxguard \\- run a program with CUDA cross-context launches stopped
.SH SYNOPSIS
.B ctxguard
[\\fIoptions\\fR] \\-\\- \\fIprogram\\fR [\\fIargs\\fR...]
.br
.B ctxguard report
[\\-\\-json] \\fILOG\\fR...
.SH DESCRIPTION
Runs \\fIprogram\\fR with libctxguard.so preloaded in every process of its
tree. A kernel launched in a CUDA context other than the one its module was
loaded in is aborted, refused, reported or redirected, as the policy says.
The command exits with the program's status, or with \\-\\-error\\-exitcode's
value when a crossing was reported, and closes with one line:
"ctxguard: N processes, M launches checked, K crossings".
\\fBctxguard report\\fR summarizes JSON-lines logs: crossings per kernel,
host and rank, by kind and action, with redirects and the first and last
time (\\-\\-json: the same as JSON).
.SH OPTIONS
HEAD
# Each "  --opt ARG  text" line starts an entry; deeper lines continue it.
"$cmd" --help | sed -n '/^  --/,$p' | sed 's/\\/\\\\/g; s/-/\\-/g' | awk '
/^  \\-\\-/ {
	sub(/^  /, "")
	n = index($0, "   ")
	if (n) { head = substr($0, 1, n - 1); rest = substr($0, n); sub(/^ +/, "", rest) }
	else { head = $0; rest = "" }
	print ".TP"
	print "\\fB" head "\\fR"
	if (rest != "") print rest
	next
}
{ sub(/^ +/, ""); print }'
cat <<'TAIL'
.SH ENVIRONMENT
Each option sets the CTXGUARD_ variable shown in parentheses; setting the
variable by hand does the same. The system policy (\-\-version names its path)
may lock them.
.SH FILES
/etc/ctxguard/policy.conf, the system policy.
.SH SEE ALSO
docs/usage.md and docs/log-format.md in the source tree.
TAIL
