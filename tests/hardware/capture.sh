#!/usr/bin/env bash
# Capture a GPU machine's ground truth into OUTDIR (default: ./capture): nvidia-smi's views, every
# --query-gpu field, raw NVML getters idle and busy (structs, field scopes and GPM samples included),
# gpudiag's own output of the same moment beside each nvidia-smi view, and what the CUDA driver does with
# CUDA_VISIBLE_DEVICES values. Run from the project root with gpudiag importable (installed, or
# PYTHONPATH=.). Needs nvidia-smi, a CUDA torch, nvidia-ml-py. About 1.5 minutes on one GPU (estimated from the
# H200's figures, not timed as one run; tests/acceptance.py gives it 120 s of its 6 minutes).
# The layout is docs/hardware/h100-80gb-hbm3-driver580/'s (its README says what each file is); the
# gpudiag-*.{txt,xml,csv} files taken right after their nvidia-smi-* twins are what
# `python -m tests.acceptance` compares.
set -u
OUT=${1:-capture}; mkdir -p "$OUT"; T=$(cd "$(dirname "$0")" && pwd)/tools
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-160}
g() { python3 -m gpudiag "$@"; }
has() { g "$1" --help >/dev/null 2>&1; }  # dmon and pmon come with the views branch
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; g list > "$OUT/gpudiag-list.txt" 2>&1
nvidia-smi -L > "$OUT/nvidia-smi-L.txt" 2>&1; g list -L > "$OUT/gpudiag-list-L.txt" 2>&1
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1; g list -q > "$OUT/gpudiag-list-q.txt" 2>&1
nvidia-smi -q -x > "$OUT/nvidia-smi-q.xml" 2>&1; g list -q -x > "$OUT/gpudiag-list-q.xml" 2>&1
nvidia-smi topo -m > "$OUT/nvidia-smi-topo-m.txt" 2>&1
nvidia-smi --help-query-gpu > "$OUT/.help-query-gpu.txt" 2>&1
python3 - "$OUT/.help-query-gpu.txt" > "$OUT/query-gpu-fields.txt" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    if line.startswith('"'):
        print(" or ".join(re.findall(r'"([^"]+)"', line)))
PY
while read -r line; do f=${line%% or *}; r=$(nvidia-smi --query-gpu="$f" --format=csv,noheader 2>&1 | head -n 1)
  case $r in *"is not a valid field"*) ;; *) printf '%s\t%s\n' "$f" "$r";; esac; done < "$OUT/query-gpu-fields.txt" > "$OUT/nvidia-smi-query-gpu-each-field.tsv"
F=$(cut -f1 "$OUT/nvidia-smi-query-gpu-each-field.tsv" | paste -sd, -)
nvidia-smi --query-gpu="$F" --format=csv > "$OUT/nvidia-smi-query-gpu-all.csv" 2>&1
g list --query "$F" --format csv > "$OUT/gpudiag-query-gpu-all.csv" 2>&1
for q in supported-clocks:memory,graphics remapped-rows:gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure retired-pages:gpu_uuid,retired_pages.address,retired_pages.cause; do
  n=${q%%:*}; f=${q#*:}
  nvidia-smi --query-$n="$f" --format=csv > "$OUT/nvidia-smi-query-$n.csv" 2>&1
  g list --query-$n "$f" --format csv > "$OUT/gpudiag-query-$n.csv" 2>&1
done
nvidia-smi dmon -c 3 > "$OUT/nvidia-smi-dmon.txt" 2>&1; has dmon && g dmon -c 3 > "$OUT/gpudiag-dmon.txt" 2>&1
python3 "$T/nvml_getters.py" > "$OUT/nvml-getters-idle.json" 2>&1
g snapshot -o "$OUT/gpudiag-snapshot-idle.json" -d "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1), idle"
g check > "$OUT/gpudiag-check.txt" 2>&1
g bench-transfer > "$OUT/gpudiag-bench-transfer.txt" 2>&1
python3 benchmarks/reference_copy.py --time-default --json "$OUT/reference-copy.json" > "$OUT/reference-copy.txt" 2>&1
python3 -m gpudiag.track "$T/torch_workload.py" 60 > "$OUT/.workload.log" 2>&1 & W=$!
for _ in $(seq 60); do grep -q ready "$OUT/.workload.log" 2>/dev/null && break; sleep 0.5; done; sleep 3
nvidia-smi > "$OUT/nvidia-smi-busy.txt" 2>&1; g list > "$OUT/gpudiag-list-busy.txt" 2>&1
nvidia-smi -q -x > "$OUT/nvidia-smi-q-busy.xml" 2>&1; g list -q -x > "$OUT/gpudiag-list-q-busy.xml" 2>&1
nvidia-smi --query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory --format=csv > "$OUT/nvidia-smi-query-compute-apps-busy.csv" 2>&1
g list --query-compute-apps timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory --format csv > "$OUT/gpudiag-query-compute-apps-busy.csv" 2>&1
nvidia-smi pmon -c 1 > "$OUT/nvidia-smi-pmon-busy.txt" 2>&1; has pmon && g pmon -c 1 > "$OUT/gpudiag-pmon-busy.txt" 2>&1
python3 "$T/nvml_getters.py" > "$OUT/nvml-getters-busy.json" 2>&1
g snapshot -o "$OUT/gpudiag-snapshot-busy.json" -d "busy: one PyTorch process, 8 GiB of tensors + 4 GiB cached"
g memory --json > "$OUT/gpudiag-memory-busy.json" 2>&1
kill $W 2>/dev/null; wait $W 2>/dev/null
U=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -n 1)
for v in "0" "1" "0,0" "0,1" "1,0" "${U:0:8}" "$U" "GPU-" "GPU-ffff" "-1" "" " 0" "0abc" "+0" "$U,0" "0,$U" "0,-1"; do
  printf '%s\t%s\n' "$v" "$(CUDA_VISIBLE_DEVICES="$v" python3 "$T/cuda_visible_truth.py" 2>&1)"
done > "$OUT/cuda-visible-devices-truth.tsv"
rm -f "$OUT/.help-query-gpu.txt" "$OUT/.workload.log"
echo "captured into $OUT"
