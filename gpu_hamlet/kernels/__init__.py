"""numba.cuda kernels of the GPU backend, one small module per engine step.

rounding: float64 multiplies and adds rounded one by one, as on the CPU; panes: segmenting;
segments: segment maps; windows: window composition; reduce: sums over equivalence partitions;
burst_ids: burst detection; scan: device prefix sums; bursts: graphlet coefficients; launch:
geometry and chunking; device_data: Arrow to device, RMM; backend: `GpuBackend`. Importing this
package imports numba.cuda (the simulator when NUMBA_ENABLE_CUDASIM=1).
"""

from gpu_hamlet.kernels import rounding  # noqa: F401 - registers the rounded float primitives
from gpu_hamlet.kernels.backend import GpuBackend

__all__ = ["GpuBackend"]
