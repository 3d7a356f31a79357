"""Hardware descriptions: HBM bandwidth, L2 and shared-memory capacity, SM count, compute capability, peak FLOP/s.

Presets cite their datasheets; a preset that shares a die with another is derived from it
with :func:`dataclasses.replace` (H200 from H100-SXM), never copied. :func:`detect` reads
the current CUDA device through torch (imported lazily; the model itself never needs torch).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from iomodel.errors import IomodelError


@dataclass(frozen=True)
class Hardware:
    """One accelerator as the traffic model sees it.

    Units: bytes, bytes per second, FLOP per second. ``peak_flops`` maps a dtype name to
    the dense (no sparsity) tensor-core peak for that input type.
    """

    name: str
    hbm_bandwidth: float  # bytes/s, HBM peak (datasheet)
    hbm_bytes: int  # bytes of device memory
    l2_bytes: int  # bytes of L2 cache
    smem_per_sm: int  # bytes of shared memory per SM (configurable carve-out maximum)
    smem_per_block: int  # bytes of shared memory one thread block may use (opt-in maximum)
    num_sms: int  # streaming multiprocessors
    compute_capability: tuple[int, int]  # (major, minor): 8.0 Ampere A100, 9.0 Hopper H100/H200
    peak_flops: dict[str, float] = field(default_factory=dict)  # dtype -> dense FLOP/s
    source: str = ""  # where the numbers come from

    def flops_for(self, dtype: str) -> float:
        """Dense peak FLOP/s for inputs of ``dtype``.

        Raises:
            IomodelError: no peak is known for that dtype on this hardware.
        """
        if dtype not in self.peak_flops:
            raise IomodelError(
                f"{self.name} has no peak FLOP/s for {dtype}: use one of {', '.join(self.peak_flops)}"
            )
        return self.peak_flops[dtype]

    @property
    def max_blocks_per_sm(self) -> int:
        """Most programs (thread blocks) one SM holds at once, from :data:`RESIDENT_LIMITS` by compute capability.

        Raises:
            IomodelError: a compute capability outside :data:`RESIDENT_LIMITS`.
        """
        return _resident_limits(self)[0]

    @property
    def max_warps_per_sm(self) -> int:
        """Most warps one SM holds at once, from :data:`RESIDENT_LIMITS` by compute capability.

        Raises:
            IomodelError: a compute capability outside :data:`RESIDENT_LIMITS`.
        """
        return _resident_limits(self)[1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields (``compute_capability`` as ``[major, minor]`` in JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Hardware":
        """The inverse of :meth:`to_dict`, for hardware entries of measurement records.

        Records written before ``compute_capability`` was kept lack it: it is then taken
        from the preset the record's name starts with (``"H200 (NVIDIA H200)"`` -> H200).

        Raises:
            IomodelError: an unknown or missing field, or no compute capability and no
                preset of that name.
        """
        d = dict(d)
        if "compute_capability" not in d:
            name = str(d.get("name", ""))
            try:
                d["compute_capability"] = get_hardware(name.split(" (")[0]).compute_capability
            except IomodelError:
                raise IomodelError(
                    f"the measurement's hardware entry {name!r} has no compute_capability and matches no preset: "
                    "pass --hardware"
                ) from None
        d["compute_capability"] = tuple(int(x) for x in d["compute_capability"])
        try:
            return cls(**d)
        except TypeError as exc:
            raise IomodelError(f"the measurement's hardware entry is malformed ({exc}): pass --hardware") from None


#: Resident limits of one SM by compute capability: (thread blocks, warps). Source: CUDA C++
#: Programming Guide, "Technical Specifications per Compute Capability", rows "Maximum number of
#: resident blocks per SM" and "Maximum number of resident warps per SM" (8.0: 32, 64;
#: 8.6: 16, 48; 8.9: 24, 48; 9.0: 32, 64). Properties of :class:`Hardware`, not fields, so
#: records and worksheets written before them read the same.
RESIDENT_LIMITS: dict[tuple[int, int], tuple[int, int]] = {(8, 0): (32, 64), (8, 6): (16, 48), (8, 9): (24, 48),
                                                           (9, 0): (32, 64)}
#: Most warps of one program (thread block): 1,024 threads. Same source, row "Maximum number of
#: threads per block" (every compute capability listed above).
MAX_WARPS_PER_PROGRAM = 32


def _resident_limits(hw: "Hardware") -> tuple[int, int]:
    """``RESIDENT_LIMITS[hw.compute_capability]``, or IomodelError naming the capabilities known."""
    cc = tuple(hw.compute_capability)
    if cc not in RESIDENT_LIMITS:
        known = ", ".join(f"{a}.{b}" for a, b in RESIDENT_LIMITS)
        raise IomodelError(f"{hw.name} has compute capability {cc[0]}.{cc[1]}, whose resident-block limits are not "
                           f"known here (known: {known}): use a preset with --hardware")
    return RESIDENT_LIMITS[cc]  # type: ignore[index]


_TB = 1e12
_MiB = 1024 * 1024
_KiB = 1024

#: NVIDIA A100 (SXM4 80GB), compute capability 8.0 (Ampere).
A100_80GB = Hardware(
    name="A100-80GB",
    hbm_bandwidth=2.039e12,  # NVIDIA A100 datasheet (SXM4 80GB): 2,039 GB/s
    hbm_bytes=80 * 1000**3,
    l2_bytes=40 * _MiB,  # NVIDIA A100 Tensor Core GPU Architecture whitepaper: 40 MB L2
    smem_per_sm=164 * _KiB,  # A100 whitepaper: up to 164 KB shared memory per SM
    smem_per_block=163 * _KiB,  # CUDA C Programming Guide, compute capability 8.0: 163 KB per block
    num_sms=108,
    compute_capability=(8, 0),  # CUDA C Programming Guide, compute capabilities table: A100 = 8.0
    peak_flops={"fp16": 312 * _TB, "bf16": 312 * _TB, "fp32": 19.5 * _TB},  # A100 datasheet, dense
    source="NVIDIA A100 datasheet and A100 architecture whitepaper",
)

#: NVIDIA H100 SXM5 80GB, compute capability 9.0 (Hopper).
H100_SXM = Hardware(
    name="H100-SXM",
    hbm_bandwidth=3.35e12,  # NVIDIA H100 datasheet (SXM5 80GB HBM3): 3.35 TB/s
    hbm_bytes=80 * 1000**3,
    l2_bytes=50 * _MiB,  # NVIDIA H100 Tensor Core GPU Architecture whitepaper: 50 MB L2
    smem_per_sm=228 * _KiB,  # Hopper whitepaper: 228 KB shared memory per SM
    smem_per_block=227 * _KiB,  # CUDA C Programming Guide, compute capability 9.0: 227 KB per block
    num_sms=132,
    compute_capability=(9, 0),  # CUDA C Programming Guide, compute capabilities table: H100 = 9.0
    peak_flops={
        "fp16": 989.4 * _TB,  # H100 datasheet, SXM, dense FP16 tensor core
        "bf16": 989.4 * _TB,
        "fp32": 66.9 * _TB,  # non-tensor FP32
        "fp8_e4m3": 1978.9 * _TB,
        "fp8_e5m2": 1978.9 * _TB,
    },
    source="NVIDIA H100 datasheet (SXM5) and H100 architecture whitepaper",
)

#: NVIDIA H200 SXM 141GB: the H100 SXM's GH100 die (same SMs, shared memory, tensor-core
#: peaks and compute capability 9.0) with HBM3e, so it is derived from H100_SXM, not copied.
H200 = replace(
    H100_SXM,
    name="H200",
    hbm_bandwidth=4.8e12,  # NVIDIA H200 datasheet (SXM 141GB HBM3e): 4.8 TB/s
    hbm_bytes=141 * 1000**3,
    # cudaDeviceProp.l2CacheSize read through torch on the lent H200 (60 MiB; see
    # receipts/); the H100 SXM5 product enables 50 MB of GH100's 60 MB.
    l2_bytes=60 * _MiB,
    source="NVIDIA H200 datasheet (SXM); L2 size read from cudaDeviceProp on an H200",
)

HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in (A100_80GB, H100_SXM, H200)}

_ALIASES = {k.lower(): k for k in HARDWARE} | {"h100": "H100-SXM", "a100": "A100-80GB", "h200-sxm": "H200"}


def get_hardware(name: str) -> Hardware:
    """A preset by name (case-insensitive; ``H200``, ``H100-SXM``, ``A100-80GB``).

    Raises:
        IomodelError: unknown name (the message lists the presets).
    """
    key = _ALIASES.get(str(name).strip().lower())
    if key is None:
        raise IomodelError(f"unknown hardware {name!r}: use one of {', '.join(HARDWARE)}")
    return HARDWARE[key]


def preset_of_device(name: str) -> str | None:
    """The preset (a :data:`HARDWARE` key) whose family a device or hardware name names, or None: a preset matches
    where its name's first part (``H100``, ``H200``, ``A100``) stands in ``name`` with no letter or digit before it
    and no digit after it, case-insensitive, the last of
    :data:`HARDWARE` that does (``NVIDIA H100 80GB HBM3`` and ``H100-SXM (NVIDIA H100 80GB HBM3)`` give ``H100-SXM``;
    ``cpu`` None). The family must stand as a word of its own: a GH200 (``NVIDIA GH200 480GB``, another memory system
    and bandwidth than the H200 SXM) is no preset, not the H200's. The one rule :func:`detect`
    and a record's device check (:meth:`iomodel.measure.records.Measurement.from_dict`, which reads the record's
    ``hardware.name`` as the predictions do, :func:`iomodel.cache.params.hardware_preset`) share. Raises nothing."""
    got = None
    for key in HARDWARE:
        if re.search(rf"(?<![a-z0-9]){re.escape(key.split('-')[0].lower())}(?![0-9])", str(name).lower()):
            got = key
    return got


def detect(device: int = 0) -> Hardware:
    """Describe the current CUDA device from ``torch.cuda.get_device_properties``.

    SM count, compute capability, L2 size and shared memory per block/SM are read from the device; HBM
    bandwidth and peak FLOP/s come from the matching preset (by name), since CUDA does
    not report them.

    Raises:
        IomodelError: torch is not installed, no CUDA GPU is visible, or the device
            matches no preset (then pass --hardware).
    """
    try:
        import torch
    except ImportError:
        raise IomodelError("detecting the GPU needs torch: pip install -e '.[kernels]', or pass --hardware") from None
    if not torch.cuda.is_available():
        raise IomodelError("no CUDA GPU is visible: pass --hardware H200|H100-SXM|A100-80GB instead of detecting")
    props = torch.cuda.get_device_properties(device)
    name = props.name
    key = preset_of_device(name)
    base = HARDWARE[key] if key is not None else None
    if base is None:
        raise IomodelError(f"GPU {name!r} matches no hardware preset: pass --hardware explicitly")
    kw: dict[str, Any] = {"name": f"{base.name} ({name})", "num_sms": props.multi_processor_count}
    if getattr(props, "L2_cache_size", 0):
        kw["l2_bytes"] = int(props.L2_cache_size)
    if getattr(props, "shared_memory_per_block_optin", 0):
        kw["smem_per_block"] = int(props.shared_memory_per_block_optin)
    if getattr(props, "shared_memory_per_multiprocessor", 0):
        kw["smem_per_sm"] = int(props.shared_memory_per_multiprocessor)
    kw["hbm_bytes"] = int(props.total_memory)
    kw["compute_capability"] = (int(props.major), int(props.minor))
    kw["source"] = (base.source + "; SMs, compute capability, L2 and shared memory read from "
                    "torch.cuda.get_device_properties")
    return replace(base, **kw)
