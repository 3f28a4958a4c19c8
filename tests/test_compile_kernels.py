"""The recording half of tests/compile_kernels.py, which CI can run: every launch of the GPU tests
is recorded with what rebuilds its kernel and types numba can read. (Compiling the records to PTX
needs numba-cuda with NVVM, which CI does not install; its output on the development machine is
benchmarks/results/compile_kernels_ptx.txt.)"""

from __future__ import annotations

import json

import compile_kernels
import pytest

pytestmark = pytest.mark.gpu  # the GPU backend's kernels (numba's CUDA simulator without a device)


def test_launches_are_recorded_with_what_rebuilds_their_kernels(tmp_path):
    out = str(tmp_path / "launches.json")
    compile_kernels.record(  # replays of recorded steps, and the engine on the GPU backend
        [
            "tests/test_gpu_kernels.py::test_fixed_workload_covers_every_ring_macro_rows_and_both_"
            "backend_steps",
            "tests/test_gpu_kernels.py::test_engine_builds_weights_on_the_device_in_one_launch_per_"
            "column",
            "tests/test_gpu_kernels.py::test_bigint_lanes_on_every_step_equal_the_cpu_backend",
            "tests/test_gpu_kernels.py::test_exact_lanes_on_every_step_equal_the_cpu_backend",
        ],
        out,
    )
    with open(out) as fh:
        launches = json.load(fh)
    made = {(m[1], m[2]) for m, _, _ in launches}
    for ring in ("xfloat", "modp", "modps8", "modps", "minreach"):
        assert ("segment_kernel", repr([ring])) in made
        assert ("weights_kernel", repr([ring])) in made
    for made_by, name, types in launches:
        kernel = compile_kernels.rebuild(made_by, name)  # the simulator's, here
        assert compile_kernels._python_function(kernel).__name__ == name
        assert all(compile_kernels.numba_type(t) is not None for t in types)


def test_fma_report_counts_fused_and_unrounded_multiplies():
    ptx = "\n".join(
        [
            ".reg .f64 \t%fd<9>;",
            "\tfma.rn.f64 \t%fd4, %fd1, %fd2, %fd3;",
            "\tmul.rn.f64 \t%fd5, %fd1, %fd2;",
            "\tmul.f64 \t%fd6, %fd1, 0d4350000000000000;",
            "\tmul.f64 \t%fd7, %fd1, %fd2;",
            "\tadd.f64 \t%fd8, %fd6, %fd7;",
            "\tmul.lo.s64 \t%rd1, %rd2, %rd3;",
        ]
    )
    report = compile_kernels.fma_report(ptx)
    assert report == "1 fma, 1 mul.rn.f64, 2 mul.f64 without a rounding mode"
