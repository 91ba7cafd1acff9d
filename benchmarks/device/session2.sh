#!/usr/bin/env bash
# The second call of the 2026-11-26 session: the GPT-2 batches the first call ran out of time for, OPT-1.3B
# fp32 up to 1024 tokens, and bf16 batches 1 and 8 with PyTorch SDPA attention instead of eager.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
W="python3 benchmarks/device/whole_models.py --out $OUT --window-s 1.5"
timeout 70 $W --budget-s 50 --models gpt2 --batches 8,16,32 --precisions bf16 2>&1 | grep -v -i warn
timeout 90 $W --budget-s 60 --models opt-1.3b --max-seq 1024 --precisions fp32 2>&1 | grep -v -i warn
timeout 110 $W --budget-s 80 --attention sdpa --models bert-large,qwen2-1.5b,opt-1.3b,gpt2 --batches 1,8 --precisions bf16 2>&1 | grep -v -i warn
