"""pytest plugin for tests/compile_kernels.py: under numba's CUDA simulator, record every GPU
kernel launch as (where the kernel was made, its name, the numba types of its arguments).

A kernel is either module level or made by a factory (`segment_kernel(ring)` and the like); the
plugin wraps `cuda.jit` before gpu_hamlet's kernel modules are imported, so each kernel carries
the module, factory and factory arguments that rebuild it in another process. Load it with
`-p kernel_launches` and set KERNEL_LAUNCHES to the JSON file to write.
"""

from __future__ import annotations

import inspect
import json
import os
import sys

import numba
import numpy as np
from numba import cuda
from numba.cuda.simulator import kernel as simulated

_launches: set[tuple] = set()
_jit = cuda.jit


def _recording_jit(*args, **kwargs):
    """cuda.jit that tags each kernel (not device functions) with where it was made."""
    if kwargs.get("device"):
        return _jit(*args, **kwargs)
    frame = sys._getframe(1)
    info = inspect.getargvalues(frame)
    origin = (
        frame.f_globals["__name__"],
        frame.f_code.co_name,
        repr([info.locals[n] for n in info.args]),
    )

    def tag(kernel):
        kernel.made_by = origin
        return kernel

    if args and callable(args[0]) and not kwargs:
        return tag(_jit(args[0]))
    decorate = _jit(*args, **kwargs)
    return lambda fn: tag(decorate(fn))


def _type_name(arg) -> str:
    """The numba type of a launch argument, as a device array of it would have."""
    arg = getattr(arg, "_ary", arg)  # a simulated device array wraps a NumPy array
    if isinstance(arg, np.ndarray):
        arg = np.ascontiguousarray(arg)
    return str(numba.typeof(arg))


_launch = simulated.FakeCUDAKernel.__call__


def _recording_launch(self, *args):
    made_by = getattr(self, "made_by", None)
    if made_by is not None:
        _launches.add((made_by, self.fn.__name__, tuple(_type_name(a) for a in args)))
    return _launch(self, *args)


def pytest_configure(config) -> None:
    if not os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        raise RuntimeError("kernel_launches records launches under NUMBA_ENABLE_CUDASIM=1 only")
    cuda.jit = _recording_jit
    simulated.FakeCUDAKernel.__call__ = _recording_launch


def pytest_unconfigure(config) -> None:
    with open(os.environ["KERNEL_LAUNCHES"], "w") as fh:
        json.dump(
            sorted(([list(m), name, list(types)] for m, name, types in _launches), key=str),
            fh,
            indent=0,
        )
