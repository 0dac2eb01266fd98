#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/ctxguard-taskprolog.sh):
# preloads ctxguard into every task of a job that was given GPUs.  Slurm
# applies each "export NAME=value" line this prints to the task's
# environment.  The log path is rank-aware: ctxguard fills in %h (host),
# %r (SLURM_PROCID, or RANK under torchrun) and %p (pid) itself.
# Under a locked system policy (/etc/ctxguard/policy.conf) its own log
# setting wins; this one then only names where a site without one logs.
lib=${CTXGUARD_SLURM_LIB:-/usr/local/lib/libctxguard.so}
logdir=${CTXGUARD_SLURM_LOGDIR:-/var/log/ctxguard}

# Only tasks with GPUs, and only when the library is installed on the node.
[ -n "$SLURM_STEP_GPUS$SLURM_JOB_GPUS" ] || exit 0
[ -r "$lib" ] || exit 0

case ":$LD_PRELOAD:" in
*":$lib:"*) ;;
*) echo "export LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}" ;;
esac
echo "export CTXGUARD_LOG=$logdir/%h.${SLURM_JOB_ID:-nojob}.%r.%p.jsonl"
