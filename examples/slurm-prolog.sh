#!/usr/bin/env bash
# Slurm Prolog: keep a job off a node whose GPUs are not ready.
#
# slurm.conf:   Prolog=/etc/slurm/prolog.d/gpudiag-prolog.sh
#               PrologFlags=Alloc   (run at allocation, before the job starts)
# A non-zero exit drains the node and requeues the job (held); the reason below is
# what `sinfo -R` shows. The prolog runs as root with no job environment.
set -u

GPUDIAG=${GPUDIAG:-gpudiag}
EXPECT=${GPUDIAG_EXPECT_GPUS:-}            # e.g. 8; empty: don't check the count
REPORT=$(mktemp /tmp/gpudiag-prolog.XXXXXX.json)
trap 'rm -f "$REPORT"' EXIT

args=(check --quick --no-torch --json --skip health.processes)
[ -n "$EXPECT" ] && args+=(--expect-gpus "$EXPECT")

# `timeout` keeps a hung driver from stalling the allocation (Slurm kills prologs too).
timeout 60 "$GPUDIAG" "${args[@]}" >"$REPORT" 2>/dev/null
status=$?

case $status in
    0) exit 0 ;;                          # ready (warnings allowed)
    1) reason=$(python3 - "$REPORT" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
bad = [f"{c['id']}{'[' + c['target'] + ']' if c['target'] else ''}: {c['finding']}"
       for c in data["checks"] if c["status"] == "FAIL"]
print("; ".join(bad)[:200])
PY
)
       ;;
    124) reason="gpudiag check timed out (hung driver?)" ;;
    *) reason="gpudiag check could not run (exit $status)" ;;
esac

scontrol update NodeName="$(hostname -s)" State=DRAIN Reason="gpudiag: ${reason:-check failed}" 2>/dev/null
exit 1
