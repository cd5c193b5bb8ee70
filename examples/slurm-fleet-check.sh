#!/usr/bin/env bash
# Check every node of a Slurm allocation with gpudiag, then merge the answers into one report.
#
#   salloc -N 128 --exclusive examples/slurm-fleet-check.sh [OUTDIR]     (or from an sbatch script)
#
# One task per node writes its own file (`%N` is the node's name), so a node that crashes or
# hangs shows up as unreadable or missing instead of spoiling the others. stderr goes to a
# separate .err file: Slurm's --output would otherwise mix it into the JSON.
# Environment: GPUDIAG (path of gpudiag, default gpudiag), GPUDIAG_FLEET_BENCH=0 to skip the
# bandwidth benchmark (it needs torch with CUDA on the nodes), GPUDIAG_CHECK_ARGS (more check options).
# Exit status: `gpudiag report`'s (0 every node ready, 1 a node not ready or missing, 6 unreadable).
set -uo pipefail

GPUDIAG=${GPUDIAG:-gpudiag}
OUT=${1:-gpudiag-fleet-${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}}
: "${SLURM_JOB_NUM_NODES:?run this inside an allocation (salloc or sbatch)}"
mkdir -p "$OUT/check" "$OUT/bench"

# shellcheck disable=SC2086
srun -N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --output="$OUT/check/%N.json" --error="$OUT/check/%N.err" \
    "$GPUDIAG" check --json ${GPUDIAG_CHECK_ARGS:-}
if [ "${GPUDIAG_FLEET_BENCH:-1}" != 0 ]; then
    srun -N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --output="$OUT/bench/%N.json" --error="$OUT/bench/%N.err" \
        "$GPUDIAG" bench-transfer --json
fi

# Every node of the allocation should have answered: --expect names them in hostlist syntax.
"$GPUDIAG" report "$OUT/check" "$OUT/bench" --expect "$SLURM_JOB_NODELIST" --junit "$OUT/report.xml"
status=$?
"$GPUDIAG" report "$OUT/check" "$OUT/bench" --expect "$SLURM_JOB_NODELIST" --json >"$OUT/report.json"
echo "report: $OUT/report.json; drain the failed nodes with: gpudiag drain $OUT/report.json --execute" >&2
exit $status
