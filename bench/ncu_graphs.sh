#!/usr/bin/env bash
# Nsight Compute profiles of the graph-suite kernels: one launch of each named row of
# `bench_cuda --suite graphs`, with the sections that say what bounds a gather kernel (speed of
# light, occupancy, warp stall reasons, memory workload, scheduler) and the stall metrics.
#
#   OUT=/some/dir bash bench/ncu_graphs.sh [LABEL=KERNEL_REGEX=COUNT=ROW[=mangled] ...]
#
# KERNEL_REGEX matches kernel function names (or mangled names with a fifth field "mangled", to
# tell template instances apart: e.g. 13__nv_bfloat16 for the bf16 ones).
#
# Without arguments it profiles the default list below. Each profile lands in $OUT/ncu_LABEL.txt
# (and all of them in $OUT/ncu.tgz);
# a one-line-per-kernel summary (duration, DRAM / L2 / SM throughput, occupancy, registers, top
# stall) is printed at the end. Clocks are left alone (--clock-control none).
set -uo pipefail
BENCH=${BENCH:-bench_cuda}
OUT=${OUT:-/tmp/gnnsparse-ncu}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls -d /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
rows=("$@")
if [ ${#rows[@]} -eq 0 ]; then
  rows=(
    "spmm16=spmm_row_kernel=1=uniform_1M_10M/spmm/16"
    "spmm32=spmm_row_kernel=1=uniform_1M_10M/spmm/32"
    "spmmmax16=spmm_row_kernel=1=uniform_1M_10M/spmm_max/16"
    "bf16_128=spmm_row_kernel.*13__nv_bfloat16=1=uniform_1M_10M/spmm_bf16/128=mangled"
    "sddmm32=sddmm_dot_row_kernel=1=uniform_1M_10M/sddmm/32"
    "sddmm128=sddmm_dot_row_kernel=1=uniform_1M_10M/sddmm/128"
    "fused32=fused_row_kernel=1=uniform_1M_10M/fusedmm/32"
    "fusedyz32=fused_row_kernel=1=uniform_1M_10M/fusedmm_yz/32"
    "pl_spmm32=spmm_segment_kernel|spmm_row_kernel|hub_combine_kernel|segment_map_kernel=4=powerlaw_1M_10M/spmm/32"
    "pl_sddmm32=sddmm_dot_segment_kernel|sddmm_dot_row_kernel|segment_map_kernel=3=powerlaw_1M_10M/sddmm/32"
    "pl_fused32=fused_segment_kernel|fused_row_kernel|hub_combine_kernel|segment_map_kernel=4=powerlaw_1M_10M/fusedmm/32"
    "arxiv_spmm32=spmm_row_kernel=1=arxiv_169k_2.3M/spmm/32"
    "arxiv_sddmm32=sddmm_dot_row_kernel=1=arxiv_169k_2.3M/sddmm/32"
  )
fi
stalls=long_scoreboard,lg_throttle,mio_throttle,short_scoreboard,wait,not_selected,math_pipe_throttle,barrier,no_instruction,drain,branch_resolving
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum
for s in ${stalls//,/ }; do metrics+=",smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"; done
for row in "${rows[@]}"; do
  IFS='=' read -r label kernel count only base <<<"$row"
  echo "== ncu $label: kernels /$kernel/ x$count in bench_cuda --only $only"
  "$NCU" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    --metrics "$metrics" --kernel-name-base "${base:-function}" -k "regex:$kernel" -c "$count" \
    "$BENCH" --suite graphs --only "$only" --reps 1 --repeats 2 > "$OUT/ncu_$label.txt" 2>&1 ||
    echo "   ncu failed (rc $?): see $OUT/ncu_$label.txt"
done
# Summary: one line per profiled kernel.
python3 - "$OUT" <<'PY'
import glob, os, re, sys
keys = {"gpu__time_duration.sum": "us", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2%", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm%",
        "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%", "launch__registers_per_thread": "regs",
        "lts__t_sector_hit_rate.pct": "l2hit%"}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu_*.txt"))):
    label = os.path.basename(f)[4:-4]
    cur, vals = None, {}
    def flush():
        if cur is None:
            return
        st = {k.split("stalled_")[1].split("_per")[0]: v for k, v in vals.items() if "stalled_" in k}
        top = sorted(st.items(), key=lambda kv: -kv[1])[:3]
        us = vals.get("gpu__time_duration.sum", 0)
        req = vals.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 0)
        sec = vals.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 0)
        print(f"{label:14s} {cur[:44]:44s} " + " ".join(f"{n}={vals.get(k, float('nan')):.4g}" for k, n in keys.items())
              + f" sect/req={sec / req if req else 0:.2f} stalls(cyc/issue): " + ", ".join(f"{k}={v:.2f}" for k, v in top))
    for line in open(f, errors="replace"):
        m = re.match(r"\s{2}(\S.*?)\s*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
        if m:
            flush()
            n = re.search(r"(\w+_kernel)(<(?:[^<>]|<[^<>]*>)*>)?", m.group(1))
            cur, vals = (n.group(1) + re.sub(r"\(gnnsparse::\w+\)|gnnsparse::|\s", "", n.group(2) or "")) if n else m.group(1), {}
            continue
        m = re.match(r"\s+([a-z_]+__[\w.]+)\s+(\S+)\s+([\d,.]+)\s*$", line)
        if m and cur is not None:
            v = float(m.group(3).replace(",", ""))
            unit = m.group(2)
            if m.group(1) == "gpu__time_duration.sum":
                v *= {"ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(unit, 1)
            vals[m.group(1)] = v
    flush()
PY
tar -czf "$OUT/ncu.tgz" -C "$OUT" $(cd "$OUT" && ls ncu_*.txt) && rm -f "$OUT"/ncu_*.txt
