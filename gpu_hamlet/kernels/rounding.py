"""Float64 multiplies and adds rounded one by one on the GPU, as on the CPU (issue 22, item 1).

NVVM, as numba-cuda calls it, fuses `a * b + c` into one fused multiply-add and leaves other
multiplies and adds without a rounding mode, which ptxas may fuse too: such a result is rounded
once where the CPU rounds twice, so float mode could differ from the CPU backend in its last bits.
The rings' float primitives `f_mul` and `f_add` (gpu_hamlet/core/rings.py) therefore compile
for the CUDA target as libdevice's `dmul_rn` and `dadd_rn`, which are never fused.
`tests/compile_kernels.py --fma` shows what is left unrounded: only libdevice's own scalings by
powers of two in `ldexp` and `frexp` (BENCHMARKS.md, GPU kernels). The simulator runs the plain
Python functions.
"""

from __future__ import annotations

from numba import config
from numba.extending import overload

from gpu_hamlet.core.rings import f_add, f_mul

if not config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
    from numba.cuda import libdevice

    @overload(f_mul, target="cuda")
    def _cuda_mul(a, b):
        return lambda a, b: libdevice.dmul_rn(a, b)

    @overload(f_add, target="cuda")
    def _cuda_add(a, b):
        return lambda a, b: libdevice.dadd_rn(a, b)
