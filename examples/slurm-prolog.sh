#!/usr/bin/env bash
# Slurm Prolog: keep jobs off a node whose GPUs are not ready.
#
# slurm.conf:   Prolog=/etc/slurm/prolog.d/gpudiag-prolog.sh
#               PrologFlags=Alloc   (run at allocation, before the job starts)
# A non-zero exit makes Slurm drain the node and requeue the job (held). Before that, this
# script sets the drain reason to gpudiag's failing check ids (`sinfo -R` shows them), the way
# NHC does: a reason someone else set (an admin, NHC, Slurm) is never overwritten.
#
# `gpudiag check --mode prolog` gives an exit status and one line on stderr (which this script
# logs and turns into the reason), does not start torch (a prolog runs as root, without the
# job's environment), and gives up after --deadline seconds (default 20) if the driver hangs.
#
# Settings, from the environment or from /etc/default/gpudiag-prolog (a prolog runs with
# almost no environment, so the file is the usual place); all optional:
#   GPUDIAG                path of gpudiag (default: gpudiag on PATH)
#   GPUDIAG_EXPECT_GPUS    GPUs this node must have, e.g. 8 (default: not checked)
#   GPUDIAG_ON_UNKNOWN     drain | pass: what to do when gpudiag could not run (default: drain)
#   GPUDIAG_DEADLINE       seconds before gpudiag gives up (default: 20)
#   GPUDIAG_TIMEOUT        backstop: seconds before `timeout` kills gpudiag (default: deadline + 10)
#   GPUDIAG_ARGS           more `gpudiag check` options, e.g. "--require-driver 550"
#
# gpudiag check exit codes: 0 ready, 1 a check failed, 2 usage error, 5 could not run or no
# verdict in time (and nothing failed); anything else (70 internal error, 124/137 killed) also
# means unknown.
set -u

CONF=${GPUDIAG_PROLOG_CONF:-/etc/default/gpudiag-prolog}
# shellcheck source=/dev/null
[ -r "$CONF" ] && . "$CONF"

GPUDIAG=${GPUDIAG:-gpudiag}
EXPECT=${GPUDIAG_EXPECT_GPUS:-}
ON_UNKNOWN=${GPUDIAG_ON_UNKNOWN:-drain}
DEADLINE=${GPUDIAG_DEADLINE:-20}
NODE=${SLURMD_NODENAME:-$(hostname -s)}

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
echo "gpudiag-prolog[$NODE]: ${line:-gpudiag printed nothing}" >&2

detail=${line#gpudiag: }
detail=${detail#UNKNOWN: }
case $status in
    0) exit 0 ;;
    1) reason="gpudiag: ${line#gpudiag: NOT READY: }" ;;
    124|137) reason="gpudiag: check timed out after ${LIMIT} s (hung driver?)" ;;
    *) reason="gpudiag: ${detail:-could not run} (exit $status)" ;;
esac
if [ "$status" != 1 ] && [ "$ON_UNKNOWN" = pass ]; then
    logger -t gpudiag-prolog "$reason; letting the job run (GPUDIAG_ON_UNKNOWN=pass)" 2>/dev/null
    exit 0
fi

# Never overwrite a reason someone else set; update one that gpudiag set.
current=$(scontrol show node "$NODE" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p')
if [ -z "$current" ] || [ "${current#gpudiag:}" != "$current" ]; then
    scontrol update NodeName="$NODE" State=DRAIN Reason="${reason:0:200}" 2>/dev/null
fi
exit 1
