"""What the numbers were measured on: the one environment capture of every benchmark receipt."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

from iomodel.errors import IomodelError


def check_device(device: str) -> None:
    """Raise unless ``device`` is ``"cpu"``, or ``"cuda"`` with a visible CUDA GPU.

    Raises:
        IomodelError: unknown device, torch missing, or no CUDA GPU.
    """
    if device not in ("cpu", "cuda"):
        raise IomodelError(f"device {device!r} is unknown: use --device cpu or --device cuda")
    try:
        import torch
    except ImportError:
        raise IomodelError("the benchmark needs PyTorch: pip install 'iomodel[kernels]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise IomodelError("no CUDA GPU is visible on this machine: use --device cpu")


def driver_version() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None where it cannot be run."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict[str, Any]:
    """Device name, library versions, threads and load of the machine a benchmark runs on.

    Args:
        device: ``"cpu"`` or ``"cuda"`` (device 0).

    Returns:
        ``kind``, ``torch``, ``python``, ``platform``, ``host``, ``cpu``, ``threads``,
        ``load_average_1m_at_start`` (where the OS has one), ``triton`` (None if absent),
        ``name``; CUDA adds ``cuda``, ``cudnn``, ``sm`` (``"9.0"``), ``memory_bytes``
        (bytes of device memory), ``sms`` (streaming multiprocessors) and ``driver``; a CPU
        adds ``cores`` (from ``/proc/cpuinfo``); ``source_sha256``, the code that ran
        (:func:`iomodel.measure.ncu.source_digest`).
    """
    import torch

    from iomodel.measure.ncu import source_digest

    env: dict[str, Any] = {
        "kind": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "source_sha256": source_digest(),
    }
    if hasattr(os, "getloadavg"):  # other work on the machine inflates CPU timings: say how much there was
        env["load_average_1m_at_start"] = round(os.getloadavg()[0], 2)
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # pragma: no cover
        env["triton"] = None
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update({"name": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                    "cudnn": torch.backends.cudnn.version(), "sm": f"{p.major}.{p.minor}",
                    "memory_bytes": int(p.total_memory), "sms": p.multi_processor_count,
                    "driver": driver_version()})
    else:
        try:
            with open("/proc/cpuinfo") as f:
                names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
            env["name"] = names[0] if names else env["cpu"]
            env["cores"] = len(names)
        except OSError:  # pragma: no cover
            env["name"] = env["cpu"]
    return env
