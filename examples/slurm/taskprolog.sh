#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/ctxguard-taskprolog.sh):
# preloads ctxguard into every task of a job that was given GPUs.  Slurm
# applies each "export NAME=value" line this prints to the task's
# environment, and writes each "print MESSAGE" line to the task's output.
# The log path is rank-aware: ctxguard fills in %h (host), %r (SLURM_PROCID,
# or RANK under torchrun) and %p (pid) itself.
# The library's default path is the README's operator install
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

# After what the task preloads already, as the ctxguard command does: a
# sanitizer runtime must stay first.
case ":$LD_PRELOAD:" in
*":$lib:"*) ;;
*) echo "export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$lib" ;;
esac
# A user's own CTXGUARD_LOG stays, unless the system policy is locked (then
# its log wins in the library anyway, and this one only names the same place
# for a site whose locked policy has none).
if [ -z "$CTXGUARD_LOG" ] || grep -Eqi '^[[:space:]]*lock[[:space:]]*=[[:space:]]*on' "$policy" 2>/dev/null
then
	echo "export CTXGUARD_LOG=$logdir/%h.${SLURM_JOB_ID:-nojob}.%r.%p.jsonl"
fi
