#!/usr/bin/env bash
# Run by Snakemake inside the new conda env (envs/memprobe.yaml), from this file's own path, so
# the checkout is found relative to it. The CPU torch first: a bare torch requirement pulls the
# multi-GB CUDA build where no CPU wheel index is configured.
set -euo pipefail
pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
pip install -e "$(dirname "$0")/.."
