#!/usr/bin/env bash
# Runs on a lent GPU machine (H100 or H200 with CuPy, numba-cuda, pyarrow and pytest, but no
# PySpark or cuDF; issue 22): installs gpu-hamlet without its dependencies, then runs the named
# steps in order, each under its own time limit in seconds, writing raw output under $OUT
# (benchmarks/results/gpu/ keeps it, with nvidia-smi's lines).
#
#   OUT=$OUT bash benchmarks/gpu_steps.sh tests:330 bench:180:--events:1000000 ...
#
# MARK chooses the tests (default "not spark"). Wheels in .whl/ (ignored by git, carried by the
# call) are installed first: the image's numba-cuda 0.30.4 imports np.row_stack, which its numpy
# 2.5 no longer has, so a numpy 2.4 wheel travels with the call.
#
# Steps: tests (the suite without Spark, real CUDA: the simulator is off when a device is
# visible, tests/conftest.py); bench (benchmarks/bench_gpu.py, its arguments after the limit,
# ':' for spaces); calibrate (benchmarks/calibrate_costs.py --backend gpu); stages
# (benchmarks/calibrate_stages.py --backend gpu: GLORIA's stage constants); sharing
# (benchmarks/bench_sharing.py --backend gpu); memory (benchmarks/gpu_memory.py: peak device
# memory, the largest input that fits, a device filled by another allocation); profile (ncu
# over bench_gpu.py's kernels: memory traffic and occupancy); host (benchmarks/profile_call.py
# on the GPU backend: where a call's time goes, by function); gloria (benchmarks/bench_gloria.py
# on the GPU backend); fma
# (tests/compile_kernels.py --fma: the fused multiply-adds NVVM put in each kernel's PTX). A step
# past its limit gets SIGINT first, so pytest still prints its summary. The data of
# ../shared/data travel as .devdata/ (ignored by git, carried by the call).
set -u
# A call brings back at most 8 files: the steps write into a folder of their own, archived into
# $OUT/results.tgz after each step (so a call cut off still returns what was done), with
# steps.log beside it.
dest=${OUT:?OUT must name the folder for the results}
out=$(mktemp -d)
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
py=python3
{
    date -u
    nvidia-smi
    nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,power.draw \
        --format=csv
    $py -c "import sys, numpy, numba, pyarrow; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'pyarrow', pyarrow.__version__)"
    $py -m pip list 2>/dev/null | grep -iE "numba|cupy|cuda-(bindings|core)|pytest|hypothesis"
} > "$out/machine.txt" 2>&1
$py -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 ||
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .devdata ] && [ ! -e ../shared/data ]; then
    mkdir -p ../shared && ln -s "$PWD/.devdata" ../shared/data
fi
for step in "$@"; do
    name=${step%%:*}
    rest=${step#*:}
    limit=${rest%%:*}
    extra=""
    [ "$rest" != "$limit" ] && extra=${rest#*:} && extra=${extra//:/ }
    echo "== $name (limit ${limit} s) $extra" | tee -a "$out/steps.log"
    start=$(date +%s)
    case $name in
    tests)
        # Without PySpark (the device machines have none), the modules that import it at the
        # top cannot be collected, and one command-line test reaches it: they are left out, by
        # name, in tests.log's first line.
        if ! $py -c "import pyspark" 2>/dev/null; then
            for f in $(grep -l -E "^(from|import) (pyspark|gpu_hamlet\.spark|test_spark)" tests/test_*.py); do
                extra="$extra --ignore=$f"
            done
            extra="$extra --deselect=tests/test_cli.py::test_gpu_backend_without_gpu_fails_before_spark"
        fi
        echo "pytest -m \"${MARK:-not spark}\" $extra" > "$out/tests.log"
        # shellcheck disable=SC2086
        timeout -s INT -k 15 "$limit" $py -m pytest -m "${MARK:-not spark}" -q -rfE --timeout 240 \
            --junitxml="$out/junit.xml" $extra >> "$out/tests.log" 2>&1
        ;;
    bench)
        # shellcheck disable=SC2086
        timeout "$limit" $py benchmarks/bench_gpu.py --json "$out/bench_gpu_$start.json" $extra \
            > "$out/bench_gpu_$start.txt" 2>&1
        ;;
    calibrate)
        # shellcheck disable=SC2086
        timeout "$limit" $py benchmarks/calibrate_costs.py --backend gpu $extra \
            > "$out/calibrate_gpu.txt" 2>&1
        ;;
    stages)
        # shellcheck disable=SC2086
        timeout "$limit" $py benchmarks/calibrate_stages.py --backend gpu $extra \
            > "$out/calibrate_stages_gpu.txt" 2>&1
        ;;
    sharing)
        # shellcheck disable=SC2086
        timeout "$limit" $py benchmarks/bench_sharing.py --backend gpu \
            --json "$out/sharing_gpu.json" $extra > "$out/sharing_gpu.txt" 2>&1
        ;;
    memory)
        # numba frees device memory at once (no pending deallocations), so that NVML's used
        # memory is what the call holds: with its default it peaked at 150 bytes per event on the
        # H200, 56 on the H100.
        # shellcheck disable=SC2086
        NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0 timeout -s INT -k 15 "$limit" $py benchmarks/gpu_memory.py --json "$out/memory.json" \
            $extra > "$out/memory.txt" 2>&1
        ;;
    profile)
        # Nsight Compute on the segment kernel of bench_gpu.py (its arguments after the limit):
        # throughput against the device's peaks, memory traffic per request, occupancy.
        # shellcheck disable=SC2086
        timeout -s INT -k 15 "$limit" ncu --target-processes all -k regex:^kernel \
            --launch-skip 10 --launch-count 5 --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
            $py benchmarks/bench_gpu.py --gpu-only --repeat 1 $extra > "$out/ncu.txt" 2>&1
        ;;
    fma)
        timeout "$limit" $py tests/compile_kernels.py --fma > "$out/fma.txt" 2>&1
        ;;
    gloria)
        # benchmarks/bench_gloria.py on the GPU backend (its arguments after the limit; the
        # NASDAQ stream needs .devdata): dynamic against the fixed modes, GLORIA's stages.
        # shellcheck disable=SC2086
        timeout "$limit" $py benchmarks/bench_gloria.py --backend gpu --out "$out/gloria" $extra \
            > "$out/gloria_gpu.txt" 2>&1
        ;;
    host)
        # benchmarks/profile_call.py on the GPU backend (its arguments after the limit, where
        # --backend cpu profiles the CPU backend on the same host): where a warm call's time
        # goes, by function, one sharing mode and host-thread count at a time.
        # shellcheck disable=SC2086
        timeout -s INT -k 15 "$limit" $py benchmarks/profile_call.py --backend gpu $extra \
            > "$out/host_profile_$start.txt" 2>&1
        ;;
    *)
        echo "unknown step $name" >&2
        ;;
    esac
    echo "   rc=$? in $(($(date +%s) - start)) s" | tee -a "$out/steps.log"
    tar czf "$dest/results.tgz" -C "$out" . && cp "$out/steps.log" "$dest/"
done
tail -n 25 "$out"/*.txt "$out"/*.log 2>/dev/null | grep -v -e NumbaPerformanceWarning -e 'warn(' |
    cut -c1-300
