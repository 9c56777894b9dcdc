#!/usr/bin/env bash
# Issue 31's many-core judge as one prepared run (on an offline 16-core machine, install the Polars, DuckDB and
# cryptography wheels there first). On the data that benchmarks/judge_data.py wrote into DIR:
#   1. the default release against plain DuckDB and plain Polars, whole process, medians of $RUNS (default 3),
#      per data set (SETS, default all four); with BEFORE=<checkout of an earlier commit> its default release
#      runs too, in the same runs ('default@before');
#   2. the first release of a fresh process (benchmarks/start_up.py);
#   3. where the release's time goes and how many cores each step keeps busy (benchmarks/release_stages.py),
#      and how the sort and the slices scale alone (benchmarks/parallel_steps.py), on the search-log file;
#   4. the first write to the pair ids' array with numpy's huge-page advice and without (benchmarks/first_touch.py,
#      after reading the search log's units), and which numpy operations hold the GIL (benchmarks/gil_ops.py).
# Output goes to stdout and to $OUT/*.log (default /tmp/judge_out).
#   python3 benchmarks/judge_data.py /tmp/bench && bash benchmarks/judge_16core.sh /tmp/bench
#   BEFORE=/path/to/old-checkout bash benchmarks/judge_16core.sh /tmp/bench sl5e7,wide5e7
set -uo pipefail
dir=$1; sets=${2:-sl5e7,wide5e7,sl1e8,wide1e8}; runs=${RUNS:-3}
out=${OUT:-/tmp/judge_out}; mkdir -p "$out"; here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
echo "cores: $(nproc); $(python3 -c 'import polars, duckdb, numpy, pyarrow; print("polars", polars.__version__, "duckdb", duckdb.__version__, "numpy", numpy.__version__, "pyarrow", pyarrow.__version__)')"
if [ -n "${BEFORE:-}" ]; then python3 -m compileall -q "$BEFORE/src"; fi
for name in ${sets//,/ }; do
  echo "=== $name ($(( $(date +%s) - start )) s in)"
  python3 "$here/release.py" --data "$dir/$name.parquet" --runs "$runs" --engines default \
    ${BEFORE:+--baseline "$BEFORE" --baseline-engines default} 2>&1 | tee "$out/$name.log"
done
echo "=== first release, fresh process ($(( $(date +%s) - start )) s in)"
python3 "$here/start_up.py" --runs 5 2>&1 | tee "$out/start_up.log"
echo "=== steps ($(( $(date +%s) - start )) s in)"
python3 "$here/release_stages.py" "$dir/sl5e7.parquet" --repeat 2 2>&1 | tee "$out/stages.log"
python3 "$here/parallel_steps.py" "$dir/sl5e7.parquet" --reps 2 2>&1 | tee "$out/steps.log"
echo "=== first touch, GIL ($(( $(date +%s) - start )) s in)"
python3 "$here/first_touch.py" --runs 3 --data "$dir/sl5e7.parquet" 2>&1 | tee "$out/first_touch.log"
python3 "$here/gil_ops.py" 2>&1 | tee "$out/gil_ops.log"
echo "=== done in $(( $(date +%s) - start )) s"
