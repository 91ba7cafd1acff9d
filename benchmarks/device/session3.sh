#!/usr/bin/env bash
# The lent-GPU call of the 2026-11-26 evening session: training steps and vision forward passes
# (`training_steps.py`), with `nvidia-smi -q` before, and its voltage and clock pages idle and under load.
set -u
OUT=${OUT:?set OUT to the output folder}
export PYTHONUNBUFFERED=1
nvidia-smi -q > "$OUT/nvidia_smi_q.txt" 2>&1
nvidia-smi -q -d VOLTAGE,CLOCK,POWER > "$OUT/smi_idle.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,power.draw,temperature.gpu,driver_version --format=csv
(sleep 25; nvidia-smi -q -d VOLTAGE,CLOCK,POWER,PERFORMANCE > "$OUT/smi_load.txt" 2>&1) &
t0=$(date +%s)
timeout "${TS_S:-330}" python3 benchmarks/device/training_steps.py --out "$OUT" --budget-s "${TS_BUDGET_S:-280}" --window-s 2 2>&1 | grep -v -i -E "warn|loss_type" | tee "$OUT/training_log.txt"
echo "training steps: $(( $(date +%s) - t0 )) s"
wait
