#!/usr/bin/env bash
# Slurm Prolog: keep jobs off a node whose GPUs are not ready.
#
# slurm.conf:   Prolog=/etc/slurm/prolog.d/gpudiag-prolog.sh
#               PrologFlags=Alloc   (run at allocation, before the job starts)
# A non-zero exit drains the node and requeues the job (held). This script also sets the
# drain reason to the failing check ids, so `sinfo -R` says what is wrong.
# The prolog runs as root with no job environment, so torch is not asked (--no-torch):
# the node's driver, devices and GPU health are what a prolog can vouch for.
#
# Settings, from the environment or from /etc/default/gpudiag-prolog (a prolog runs with
# almost no environment, so the file is the usual place); all optional:
#   GPUDIAG                path of gpudiag (default: gpudiag on PATH)
#   GPUDIAG_EXPECT_GPUS    GPUs this node must have, e.g. 8 (default: not checked)
#   GPUDIAG_ON_UNKNOWN     drain | pass: what to do when gpudiag could not run (default: drain)
#   GPUDIAG_TIMEOUT        seconds before giving up (default: 60; Slurm kills slow prologs too)
#
# gpudiag check exit codes: 0 ready, 1 a check failed, 2 usage error, 5 could not run (and
# nothing failed); anything else (70 internal error, 124 from timeout) also means unknown.
set -u

CONF=${GPUDIAG_PROLOG_CONF:-/etc/default/gpudiag-prolog}
# shellcheck source=/dev/null
[ -r "$CONF" ] && . "$CONF"

GPUDIAG=${GPUDIAG:-gpudiag}
EXPECT=${GPUDIAG_EXPECT_GPUS:-}
ON_UNKNOWN=${GPUDIAG_ON_UNKNOWN:-drain}
LIMIT=${GPUDIAG_TIMEOUT:-60}
REPORT=$(mktemp /tmp/gpudiag-prolog.XXXXXX)
trap 'rm -f "$REPORT"' EXIT

# Other jobs may share the node, so their GPU processes are not judged; on nodes allocated
# exclusively, drop `--skip health.processes` to catch what the previous job left running.
args=(check --quick --no-torch --json --skip health.processes)
[ -n "$EXPECT" ] && args+=(--expect-gpus "$EXPECT")

timeout "$LIMIT" "$GPUDIAG" "${args[@]}" >"$REPORT" 2>/dev/null
status=$?

# The failing checks (or what could not run), as one line of at most 200 characters.
summary() {
    python3 - "$REPORT" "$1" <<'PY' 2>/dev/null
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)
if sys.argv[2] == "fail":
    items = [f"{c['id']}{'[' + c['target'] + ']' if c['target'] else ''}: {c['finding']}"
             for c in data["checks"] if c["status"] == "FAIL"]
else:
    items = data.get("could_not_run", [])
print("; ".join(items)[:200])
PY
}

case $status in
    0) exit 0 ;;
    1) reason=$(summary fail); reason=${reason:-check failed} ;;
    2) reason="gpudiag usage error (check the prolog's options)" ;;
    124) reason="gpudiag check timed out after ${LIMIT} s (hung driver?)" ;;
    *) detail=$(summary unknown)
       reason="gpudiag check could not run (exit $status)${detail:+: $detail}"
       if [ "$ON_UNKNOWN" = pass ]; then
           logger -t gpudiag-prolog "$reason; letting the job run (GPUDIAG_ON_UNKNOWN=pass)" 2>/dev/null
           exit 0
       fi ;;
esac

scontrol update NodeName="$(hostname -s)" State=DRAIN Reason="gpudiag: ${reason}" 2>/dev/null
exit 1
