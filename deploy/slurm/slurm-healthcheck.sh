#!/usr/bin/env bash
# Slurm HealthCheckProgram: drain this node while its GPUs are not ready, resume it when they are.
#
# slurm.conf:   HealthCheckProgram=/etc/slurm/gpudiag-healthcheck.sh
#               HealthCheckInterval=300      (seconds; 0, the default, never runs it)
#               HealthCheckNodeState=ANY     (the default: busy nodes are checked too)
#
# slurmd ignores a health check's exit status (slurm.conf(5): "Any action to be taken must be
# explicitly performed by the program"), so this script drains and resumes through scontrol
# itself. slurmd kills it after 60 s: gpudiag gives up after GPUDIAG_DEADLINE s (default 10),
# `timeout` kills it 10 s later, and each scontrol call has 10 s.
#
# It runs `gpudiag check --mode health-check`: the node's own checks only (no job runs during a
# health check, so the job-scope ones are not run), no torch, no functional test.
#   READY       the node's reason is one this script wrote: resume the node.
#   NOT READY   drain it with Reason="gpudiag health-check: <check> GPU<i> <uuid>: <fact>; <action>",
#               unless someone else (an admin, NHC, the Prolog, `gpudiag drain`) set a reason.
#               Running jobs finish; no new one starts.
#   UNKNOWN     gpudiag could not run or gave no verdict in time: drain (default), or only log
#               (GPUDIAG_ON_UNKNOWN=pass).
# The same failure gives the same reason on every run, so the drain is not repeated (and `sinfo -R`
# keeps the time it began). Only reasons starting "gpudiag health-check:" are resumed here: another
# integration's checks (the Prolog's options, a fleet check's functional test) are not this one's.
#
# Settings, from the environment or from /etc/default/gpudiag-healthcheck (a health check runs
# with an empty environment: set SLURM_CONF there if slurm.conf is not at its default path):
#   GPUDIAG                path of gpudiag (default: gpudiag on PATH)
#   GPUDIAG_EXPECT_GPUS    GPUs this node must have, e.g. 8 (default: not checked)
#   GPUDIAG_ON_UNKNOWN     drain | pass (default: drain)
#   GPUDIAG_DEADLINE       seconds before gpudiag gives up (default: 10)
#   GPUDIAG_ARGS           more `gpudiag check` options, e.g. "--skip config.persistence"
set -u
export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

CONF=${GPUDIAG_HEALTHCHECK_CONF:-/etc/default/gpudiag-healthcheck}
# shellcheck source=/dev/null
[ -r "$CONF" ] && . "$CONF"

GPUDIAG=${GPUDIAG:-gpudiag}
EXPECT=${GPUDIAG_EXPECT_GPUS:-}
ON_UNKNOWN=${GPUDIAG_ON_UNKNOWN:-drain}
DEADLINE=${GPUDIAG_DEADLINE:-10}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
PREFIX="gpudiag health-check:"

log() {
    echo "gpudiag-healthcheck[$NODE]: $*" >&2
    logger -t gpudiag-healthcheck "$*" 2>/dev/null
}

# This node's own name, as data: nothing Slurm would read as a hostlist, an option or a keyword
# (NodeName=ALL is every node).
if ! [[ $NODE =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || [[ ${NODE,,} == all || ${NODE,,} == default ]]; then
    log "node name '$NODE' is not one Slurm node name: not checking it"
    exit 2
fi

# Jobs hold the GPUs while a health check runs: their processes are not leftovers.
args=(check --mode health-check --deadline "$DEADLINE" --skip health.processes)
[ -n "$EXPECT" ] && args+=(--expect-gpus "$EXPECT")
# shellcheck disable=SC2206
[ -n "${GPUDIAG_ARGS:-}" ] && args+=($GPUDIAG_ARGS)

err=$(mktemp /tmp/gpudiag-healthcheck.XXXXXX)
trap 'rm -f "$err"' EXIT
backstop=${DEADLINE%.*}
LIMIT=$((${backstop:-0} + 10))
timeout -k 5 "$LIMIT" "$GPUDIAG" "${args[@]}" >/dev/null 2>"$err"
status=$?
line=$(tail -n 1 "$err")

current=$(timeout 10 scontrol show node "$NODE" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p')
case $status in
    0)
        if [ "${current#"$PREFIX"}" != "$current" ]; then
            log "${line}: resuming (was: $current)"
            timeout 10 scontrol update NodeName="$NODE" State=RESUME || log "could not resume $NODE"
        fi
        exit 0
        ;;
    1) reason="$PREFIX ${line#gpudiag: NOT READY: }" ;;
    124 | 137) reason="$PREFIX check timed out after ${LIMIT} s (hung driver?)" ;;
    *)
        detail=${line#gpudiag: }
        detail=${detail#UNKNOWN: }
        reason="$PREFIX ${detail:-could not run} (exit $status)"
        ;;
esac
reason=${reason:0:200}
if [ "$status" != 1 ] && [ "$ON_UNKNOWN" = pass ]; then
    log "$reason; not draining (GPUDIAG_ON_UNKNOWN=pass)"
    exit "$status"
fi
if [ "$current" = "$reason" ]; then
    exit "$status"  # drained already, for this very fault
elif [ -z "$current" ] || [ "${current#"$PREFIX"}" != "$current" ]; then
    log "draining: $reason"
    timeout 10 scontrol update NodeName="$NODE" State=DRAIN Reason="$reason" || log "could not drain $NODE"
else
    log "not draining with '$reason': reason set by someone else: $current"
fi
exit "$status"
