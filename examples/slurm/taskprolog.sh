#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/ctxguard-taskprolog.sh):
# preloads ctxguard into every task of a job that was given GPUs.  Slurm
# applies each "export NAME=value" line this prints to the task's
# environment, and writes each "print MESSAGE" line to the task's output.
# The log path is rank-aware: ctxguard fills in %h (host), %r (SLURM_PROCID,
# or RANK under torchrun) and %p (pid) itself.
# The library's default path is the operator install of docs/operations.md
# (make install PREFIX=/usr SYSCONFDIR=/etc).
lib=${CTXGUARD_SLURM_LIB:-/usr/lib/libctxguard.so}
logdir=${CTXGUARD_SLURM_LOGDIR:-/var/log/ctxguard}
policy=${CTXGUARD_SLURM_POLICY:-/etc/ctxguard/policy.conf}

# Only tasks with GPUs.
[ -n "$SLURM_STEP_GPUS$SLURM_JOB_GPUS" ] || exit 0
# A node without the library runs the task unguarded: say so in the job's
# output and in slurmd's log rather than skip silently.
if [ ! -r "$lib" ]; then
	msg="ctxguard: warning: $lib is not installed on $(hostname); this task runs without ctxguard"
	echo "print $msg"
	echo "$msg" >&2
	exit 0
fi

# In the ctxguard command's order: the sanitizer runtimes the task preloads
# stay first, ctxguard comes next, ahead of every other library (one that
# defines driver entry points ahead of it would take calls past its hooks).
case ":$LD_PRELOAD:" in
*":$lib:"*) ;;
*)
	first='' rest=''
	for entry in $(printf '%s' "$LD_PRELOAD" | tr ':' ' '); do
		case ${entry##*/} in
		libasan* | libtsan* | libubsan* | liblsan* | libhwasan* | libmsan* | libclang_rt.*)
			first=${first:+$first:}$entry ;;
		*) rest=${rest:+$rest:}$entry ;;
		esac
	done
	echo "export LD_PRELOAD=${first:+$first:}$lib${rest:+:$rest}"
	;;
esac
# A user's own CTXGUARD_LOG stays, unless the system policy is locked (then
# its log wins in the library anyway, and this one only names the same place
# for a site whose locked policy has none).
if [ -z "$CTXGUARD_LOG" ] || grep -Eqi '^[[:space:]]*lock[[:space:]]*=[[:space:]]*on' "$policy" 2>/dev/null
then
	echo "export CTXGUARD_LOG=$logdir/%h.${SLURM_JOB_ID:-nojob}.%r.%p.jsonl"
fi
