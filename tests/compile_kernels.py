"""Compile every GPU kernel to PTX for a real device, on a machine without a GPU or driver.

    NUMBA_ENABLE_CUDASIM= python tests/compile_kernels.py [--cc 9.0 [8.0 ...]] [tests ...]

The simulator runs kernels as Python, so it cannot tell whether numba-cuda compiles them for a
device (a type numba-cuda does not support, a Python feature kernels lack). This script runs the
GPU tests under the simulator with tests/kernel_launches.py recording every launch's argument
types (default: tests/test_gpu_kernels.py and tests/test_gpu_backend.py), then rebuilds each
kernel in this process, without the simulator, and compiles it for those types with
`cuda.compile_ptx` for each compute capability of --cc (default 9.0, the H100 and H200; the
RAPIDS Accelerator runs on 7.0 and newer). Needs numba-cuda with
NVVM, as the `gpu` extra installs it (`numba-cuda[cu12]`, with the numba that cuDF allows);
no driver is needed. Prints one line per failure and a count; exits 1 if any kernel failed.
With --fma it also prints, per kernel, the fused multiply-adds NVVM put in its PTX and the float64
multiplies ptxas could still fuse with an add: either would round differently from the CPU
backend in float mode (issue 22, item 1; gpu_hamlet/kernels/rounding.py).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ["tests/test_gpu_kernels.py", "tests/test_gpu_backend.py"]


def record(tests: list[str], out: str) -> None:
    """Run `tests` under the simulator, writing their kernel launches to `out`."""
    env = dict(
        os.environ,
        NUMBA_ENABLE_CUDASIM="1",
        KERNEL_LAUNCHES=out,
        PYTHONPATH=os.pathsep.join(
            [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        ),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "kernel_launches",
            "-p",
            "no:cacheprovider",
            "-n",  # in this process: the plugin records the launches of the tests it runs
            "0",
            *tests,
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )


def numba_type(name: str):
    """A numba type from its printed name ('int64', 'bool', 'array(float64, 3d, C)')."""
    from numba import types as nt

    if name.startswith("array("):
        dtype, ndim, layout = (p.strip() for p in name[len("array(") : -1].split(","))
        return nt.Array(numba_type(dtype), int(ndim[:-1]), layout)
    if name.startswith("UniTuple("):  # a lane ring kernel's primes: 'UniTuple(int64 x 32)'
        dtype, count = name[len("UniTuple(") : -1].rsplit(" x ", 1)
        return nt.UniTuple(numba_type(dtype), int(count))
    return nt.boolean if name == "bool" else getattr(nt, name)


def rebuild(made_by: list[str], name: str):
    """The kernel `name` as its module or factory makes it, outside the simulator."""
    module, factory, args = made_by
    mod = importlib.import_module(module)
    if factory == "<module>":
        return getattr(mod, name)
    made = getattr(mod, factory)(*ast.literal_eval(args))
    return next(
        k
        for k in (made if isinstance(made, tuple) else (made,))
        if _python_function(k).__name__ == name
    )


def _python_function(kernel):
    """The Python function of a kernel (numba-cuda's dispatcher, or the simulator's kernel)."""
    return getattr(kernel, "py_func", None) or kernel.fn


def fma_report(ptx: str) -> str:
    """Fused multiply-adds in `ptx`, and float64 multiplies without a rounding mode, which ptxas
    may still fuse with an add (one with `.rn` it may not; an add alone is never fused)."""
    ops = [line.split()[0] for line in ptx.splitlines() if ".f64" in line and line.strip()]
    fused = sum(op.startswith("fma.") for op in ops)
    rounded, loose = ops.count("mul.rn.f64"), ops.count("mul.f64")
    return f"{fused} fma, {rounded} mul.rn.f64, {loose} mul.f64 without a rounding mode"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cc", nargs="+", default=["9.0"], help="compute capabilities to compile for")
    ap.add_argument("--fma", action="store_true", help="count fused multiply-adds per kernel")
    ap.add_argument("tests", nargs="*", default=DEFAULT_TESTS)
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        ap.error("compiling needs numba-cuda itself: unset NUMBA_ENABLE_CUDASIM")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "launches.json")
        record(args.tests, out)
        with open(out) as fh:
            launches = json.load(fh)
    import numba.cuda.dispatcher
    from numba import cuda

    sys.path.insert(0, str(ROOT))
    kernels = {(tuple(m), n) for m, n, _ in launches}
    failed = 0
    for version in args.cc:
        cc = tuple(int(x) for x in version.split("."))
        # Device functions are compiled for the current device's capability; there is none here.
        numba.cuda.dispatcher.get_current_device = lambda cc=cc: types.SimpleNamespace(
            compute_capability=cc
        )
        bad = 0
        for made_by, name, arg_types in launches:
            kernel = rebuild(made_by, name)
            try:
                ptx, _ = cuda.compile_ptx(
                    _python_function(kernel), tuple(numba_type(t) for t in arg_types), cc=cc
                )
                if args.fma:
                    print(f"{fma_report(ptx)} in {name}{tuple(arg_types)}")
            except Exception as exc:  # report every failing kernel, not only the first
                bad += 1
                print(
                    f"FAILED for {version}: {made_by[0]}.{made_by[1]}{made_by[2]} "
                    f"{name}{tuple(arg_types)}: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0]}"
                )
        print(
            f"{len(launches) - bad} of {len(launches)} launch signatures of {len(kernels)} "
            f"kernels compiled to PTX for compute capability {version}"
        )
        failed += bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
