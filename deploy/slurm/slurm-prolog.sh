#!/usr/bin/env bash
# Slurm Prolog: keep jobs off a node whose GPUs are not ready, and stop a job whose own GPU
# environment is wrong without draining a good node for it.
#
# slurm.conf:   Prolog=/etc/slurm/prolog.d/gpudiag-prolog.sh
#               PrologFlags=Alloc   (run at allocation, before the job starts)
#
# It runs `gpudiag check --mode prolog` (no torch, no functional test, one line on stderr, a hard
# deadline) and acts on the verdict:
#   READY           exit 0: the job runs.
#   NOT READY       a node-scope check failed (hardware, driver, the node's configuration): drain
#                   the node with Reason="gpudiag prolog: <check> GPU<i> <uuid>: <fact>; <action>"
#                   unless someone else (an admin, NHC, Slurm) set a reason, which is never
#                   overwritten; exit 1, so Slurm drains the node too and requeues the job, held
#                   (unless SchedulerParameters=nohold_on_prolog_fail).
#   JOB NOT READY   only job-scope checks failed (the GPUs the job was given, --min-free): the
#                   node is fine. (A --require-... option in GPUDIAG_ARGS is the site's: a node
#                   that does not meet it is NOT READY and drained.) The job is cancelled
#                   (scancel) with the reason in its AdminComment (`scontrol show job`) and in
#                   syslog, and the script exits 0: a non-zero exit would drain the node.
#   UNKNOWN         gpudiag could not run, or gave no verdict before its deadline: drain as for
#                   NOT READY (default), or let the job run (GPUDIAG_ON_UNKNOWN=pass).
#
# A prolog runs as root with Slurm's environment, not the job's: CUDA_VISIBLE_DEVICES and
# SLURM_JOB_GPUS name the job's GPUs in the host's numbering, and the user's own variables are not
# there. Nodes drained here stay drained until an admin or `gpudiag drain --resume` (with a check
# run after the drain) resumes them: a drained node gets no job, so no prolog runs there again.
#
# Settings, from the environment or from /etc/default/gpudiag-prolog (a prolog runs with
# almost no environment, so the file is the usual place); all optional:
#   GPUDIAG                path of gpudiag (default: gpudiag on PATH)
#   GPUDIAG_EXPECT_GPUS    GPUs this node must have, e.g. 8 (default: not checked)
#   GPUDIAG_ON_UNKNOWN     drain | pass: what to do when gpudiag could not run (default: drain)
#   GPUDIAG_DEADLINE       seconds before gpudiag gives up (default: 20)
#   GPUDIAG_TIMEOUT        backstop: seconds before `timeout` kills gpudiag (default: deadline + 10)
#   GPUDIAG_ARGS           more `gpudiag check` options, e.g. "--min-free 40GiB"
#
# gpudiag check exit codes: 0 ready, 1 a check failed, 2 usage error, 5 could not run or no
# verdict in time (and nothing failed); anything else (70 internal error, 124/137 killed) also
# means unknown.
set -u
export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

CONF=${GPUDIAG_PROLOG_CONF:-/etc/default/gpudiag-prolog}
# shellcheck source=/dev/null
[ -r "$CONF" ] && . "$CONF"

GPUDIAG=${GPUDIAG:-gpudiag}
EXPECT=${GPUDIAG_EXPECT_GPUS:-}
ON_UNKNOWN=${GPUDIAG_ON_UNKNOWN:-drain}
DEADLINE=${GPUDIAG_DEADLINE:-20}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
JOB=${SLURM_JOB_ID:-}
PREFIX="gpudiag prolog:"

log() {
    echo "gpudiag-prolog[$NODE]: $*" >&2
    logger -t gpudiag-prolog "$*" 2>/dev/null
}

# Other jobs may share the node, so their GPU processes are not judged; on nodes allocated
# exclusively, drop `--skip health.processes` to catch what the previous job left running.
args=(check --mode prolog --deadline "$DEADLINE" --skip health.processes)
[ -n "$EXPECT" ] && args+=(--expect-gpus "$EXPECT")
# shellcheck disable=SC2206
[ -n "${GPUDIAG_ARGS:-}" ] && args+=($GPUDIAG_ARGS)

# gpudiag's own deadline comes first; `timeout` is the backstop should Python itself not start.
err=$(mktemp /tmp/gpudiag-prolog.XXXXXX)
trap 'rm -f "$err"' EXIT
backstop=${DEADLINE%.*}
LIMIT=${GPUDIAG_TIMEOUT:-$((${backstop:-0} + 10))}
timeout -k 5 "$LIMIT" "$GPUDIAG" "${args[@]}" >/dev/null 2>"$err"
status=$?
line=$(tail -n 1 "$err")
log "${line:-gpudiag printed nothing} (job ${JOB:-?})"

case $status:$line in
    0:*) exit 0 ;;
    1:"gpudiag: JOB NOT READY: "*)
        reason="$PREFIX ${line#gpudiag: JOB NOT READY: }"
        if ! [[ $JOB =~ ^[0-9]+$ ]]; then
            log "no job id to cancel (SLURM_JOB_ID='$JOB'); the job runs: $reason"
            exit 0
        fi
        # Never overwrite an AdminComment someone else set; cancel the job either way.
        comment=$(timeout 10 scontrol show job "$JOB" 2>/dev/null | sed -n 's/^ *AdminComment=\(.*\)$/\1/p')
        if [ -z "$comment" ]; then
            timeout 10 scontrol update JobId="$JOB" AdminComment="$reason" || log "could not set job $JOB's AdminComment"
        fi
        timeout 10 scancel "$JOB" || log "could not cancel job $JOB: it runs: $reason"
        exit 0
        ;;
    1:*) reason="$PREFIX ${line#gpudiag: NOT READY: }" ;;
    124:* | 137:*) reason="$PREFIX check timed out after ${LIMIT} s (hung driver?)" ;;
    *)
        detail=${line#gpudiag: }
        detail=${detail#UNKNOWN: }
        reason="$PREFIX ${detail:-could not run} (exit $status)"
        ;;
esac
if [ "$status" != 1 ] && [ "$ON_UNKNOWN" = pass ]; then
    log "$reason; letting the job run (GPUDIAG_ON_UNKNOWN=pass)"
    exit 0
fi

# This node's own name, as data: nothing Slurm would read as a hostlist, an option or a keyword
# (NodeName=ALL is every node).
if ! [[ $NODE =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || [[ ${NODE,,} == all || ${NODE,,} == default ]]; then
    log "node name '$NODE' is not one Slurm node name: not draining it with scontrol; $reason"
    exit 1
fi
# Never overwrite a reason someone else set; update one that gpudiag set.
current=$(timeout 10 scontrol show node "$NODE" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p')
case $current in
    "" | "gpudiag:"* | "gpudiag prolog:"* | "gpudiag health-check:"*)
        timeout 10 scontrol update NodeName="$NODE" State=DRAIN Reason="${reason:0:200}" ||
            log "could not drain $NODE: $reason"
        ;;
    *) log "not draining with '$reason': reason set by someone else: $current" ;;
esac
exit 1
