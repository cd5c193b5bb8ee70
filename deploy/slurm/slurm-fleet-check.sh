#!/usr/bin/env bash
# Check every node of a Slurm allocation with gpudiag, then merge the answers into one report.
#
#   salloc -N 128 --exclusive --gpus-per-node=8 deploy/slurm/slurm-fleet-check.sh [OUTDIR]
#   (or from an sbatch script with the same options)
#
# One task per node writes its own file (`%N` is the node's name), so a node that crashes or
# hangs shows up as unreadable or missing instead of spoiling the others. stderr goes to a
# separate .err file: Slurm's --output would otherwise mix it into the JSON.
#
# GPUs: a job step gets no GPU it did not ask for (with ConstrainDevices=yes it cannot even open
# them), and a node whose check sees no GPU fails: draining from that report would drain the whole
# fleet. So the allocation must ask for the GPUs (--gpus-per-node=N, which steps inherit), or
# GPUDIAG_GPUS_PER_NODE=N says how many each node has (the steps then ask for them);
# GPUDIAG_GPUS_PER_NODE=0 on a cluster without GPU GRES. The check then also expects that many.
#
# Environment: GPUDIAG (path of gpudiag, default gpudiag), GPUDIAG_FLEET_BENCH=0 to skip the
# bandwidth benchmark (it needs torch with CUDA on the nodes), GPUDIAG_CHECK_ARGS (more check options).
# Exit status: `gpudiag report`'s (0 every node ready, 1 a node not ready or missing, 6 unreadable);
# 2 when the allocation's GPUs are not known.
set -uo pipefail

GPUDIAG=${GPUDIAG:-gpudiag}
OUT=${1:-gpudiag-fleet-${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}}
: "${SLURM_JOB_NUM_NODES:?run this inside an allocation (salloc or sbatch)}"
GPUS=${GPUDIAG_GPUS_PER_NODE:-${SLURM_GPUS_PER_NODE:-}}
GPUS=${GPUS##*:}  # --gpus-per-node=h100:8
if ! [[ $GPUS =~ ^[0-9]+$ ]]; then
    echo "slurm-fleet-check: how many GPUs per node? allocate with --gpus-per-node=N (a step gets no GPU" \
        "it did not ask for), or set GPUDIAG_GPUS_PER_NODE=N (0 without GPU GRES)" >&2
    exit 2
fi
step=(-N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --input=none)
check=(check --json)
if [ "$GPUS" != 0 ]; then
    step+=(--gpus-per-node="$GPUS")
    check+=(--expect-gpus "$GPUS")
fi
mkdir -p "$OUT/check" "$OUT/bench"

# shellcheck disable=SC2086
srun "${step[@]}" --output="$OUT/check/%N.json" --error="$OUT/check/%N.err" \
    "$GPUDIAG" "${check[@]}" ${GPUDIAG_CHECK_ARGS:-}
if [ "${GPUDIAG_FLEET_BENCH:-1}" != 0 ]; then
    srun "${step[@]}" --output="$OUT/bench/%N.json" --error="$OUT/bench/%N.err" \
        "$GPUDIAG" bench-transfer --json
fi

# Every node of the allocation should have answered: --expect names them in hostlist syntax.
"$GPUDIAG" report "$OUT/check" "$OUT/bench" --expect "$SLURM_JOB_NODELIST" --junit "$OUT/report.xml"
status=$?
"$GPUDIAG" report "$OUT/check" "$OUT/bench" --expect "$SLURM_JOB_NODELIST" --json >"$OUT/report.json"
echo "report: $OUT/report.json; drain the failed nodes with: gpudiag drain $OUT/report.json --execute" >&2
exit $status
