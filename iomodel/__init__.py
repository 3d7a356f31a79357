"""iomodel: exact, verifiable byte traffic of attention layers between HBM, L2 and SRAM.

The public entry points are plain data (:mod:`iomodel.spec`, :mod:`iomodel.spec.hardware`),
the symbolic traffic model (:mod:`iomodel.traffic`), worksheets and plots, measurement
(:mod:`iomodel.measure`), reconciliation and the benchmark harness (:mod:`iomodel.bench`).
See ``../shared/DESIGN.md`` for the architecture.
"""

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


def __getattr__(name: str) -> str:
    """``iomodel.__version__``: pyproject.toml's ``[project] version`` (its one home), read from the
    installed package metadata on first use (importing importlib.metadata costs ~30 ms of start-up);
    ``"unknown"`` in a source tree that was never installed (``pip install -e .``).

    Raises:
        AttributeError: any other missing attribute.
    """
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("iomodel")
        except PackageNotFoundError:
            return "unknown"
    raise AttributeError(f"module 'iomodel' has no attribute {name!r}")
