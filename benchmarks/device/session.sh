#!/usr/bin/env bash
# One lent-GPU session's measurements (see benchmarks/device/README.md): whole models by the EnergAIzer
# protocol (bf16, then fp32 with what time is left) and a short kernel power sweep, written under $OUT.
set -u
OUT=${OUT:?set OUT to the output folder}
if ls .whl/*.whl >/dev/null 2>&1; then  # pure-Python deps the device image lacks (pydantic...)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi -q > "$OUT/nvidia_smi_q.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,power.draw,temperature.gpu,driver_version --format=csv
t0=$(date +%s)
timeout "${WM_BF16_S:-290}" python3 benchmarks/device/whole_models.py --out "$OUT" --budget-s "${WM_BUDGET_S:-235}" --window-s 1.5 --precisions bf16 2>&1 | grep -v -i warn
echo "whole models bf16: $(( $(date +%s) - t0 )) s"
timeout "${KP_S:-150}" python3 benchmarks/device/kernel_power.py --out "$OUT/kernels_h100.csv" 2>&1 | grep -v -i -E "warn|^INFO" | tail -45
echo "kernels: $(( $(date +%s) - t0 )) s"
timeout "${WM_FP32_S:-70}" python3 benchmarks/device/whole_models.py --out "$OUT" --budget-s "${WM_FP32_BUDGET_S:-40}" --window-s 1.5 --precisions fp32 --models opt-1.3b,vit-large,resnet101,bert-large 2>&1 | grep -v -i warn | tail -30
echo "total: $(( $(date +%s) - t0 )) s"
