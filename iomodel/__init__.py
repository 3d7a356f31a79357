"""iomodel: exact, verifiable byte traffic of attention layers between HBM, L2 and SRAM.

The public entry points are plain data (:mod:`iomodel.spec`, :mod:`iomodel.spec.hardware`),
the symbolic traffic model (:mod:`iomodel.traffic`), worksheets and plots, measurement
(:mod:`iomodel.measure`), reconciliation and the benchmark harness (:mod:`iomodel.bench`).
See ``../shared/DESIGN.md`` for the architecture.
"""

from importlib.metadata import PackageNotFoundError, version

from iomodel.errors import IomodelError
from iomodel.spec import DTYPES, LayerSpec, Tiling, dtype_width
from iomodel.spec.hardware import HARDWARE, Hardware, get_hardware

__all__ = [
    "DTYPES",
    "HARDWARE",
    "Hardware",
    "IomodelError",
    "LayerSpec",
    "Tiling",
    "dtype_width",
    "get_hardware",
]

try:  # one home for the version: pyproject.toml's [project] version, read from the installed metadata
    __version__ = version("iomodel")
except PackageNotFoundError:  # a source tree that was never installed (pip install -e .)
    __version__ = "unknown"
