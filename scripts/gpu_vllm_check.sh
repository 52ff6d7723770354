#!/usr/bin/env bash
# Run scripts/gpu_vllm_check.py from a bare checkout on a GPU machine with vLLM installed;
# its output also goes to $LOG (default gpu_vllm_check.log). Arguments go to the script.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/runtime${PYTHONPATH:+:$PYTHONPATH}"
python3 scripts/gpu_vllm_check.py "$@" 2>&1 | tee "${LOG:-gpu_vllm_check.log}"
