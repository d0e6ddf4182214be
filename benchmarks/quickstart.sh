#!/usr/bin/env bash
# The README's quickstart, verbatim, in a fresh clone: the install and the default run on the
# local model (what docs/performance.md "The default run, measured" reports). The line is
# read from README.md, so the two cannot drift. Slow (20-30+ min on 2 cores); run by hand:
#   bash benchmarks/quickstart.sh [WORKDIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
line="$(grep -m1 -E '^    python3 -m venv .* snakemake --cores [0-9]+ && snakemake --report' "$root/README.md" | sed 's/^    //')"
test -n "$line" || { echo "quickstart.sh: no quickstart line in README.md" >&2; exit 1; }
git clone -q "$root" "$work/memprobe"
cd "$work/memprobe"
echo "quickstart.sh: $line"
start=$(date +%s)
bash -c "$line"
rows="$(cat results/usage/*/*.csv results/users/*/usage/*/*.csv | grep -vc '^ts,')"
echo "quickstart.sh: $(( $(date +%s) - start )) s; $rows ledger rows"
