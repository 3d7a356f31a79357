"""Hardware descriptions: HBM bandwidth, L2 and shared-memory capacity, SM count, compute capability, peak FLOP/s.

Presets cite their datasheets; a preset that shares a die with another is derived from it
with :func:`dataclasses.replace` (H200 from H100-SXM; the PCIe and NVL cards from their SXM die), never copied. :func:`detect` reads
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

#: NVIDIA A100 SXM4 40GB (and A100 PCIe 40GB, the same memory system): the A100 80GB's GA100 die (SMs, L2, shared
#: memory, tensor-core peaks) with HBM2.
A100_40GB = replace(
    A100_80GB,
    name="A100-40GB",
    hbm_bandwidth=1.555e12,  # NVIDIA A100 datasheet (SXM4 40GB and PCIe 40GB, HBM2): 1,555 GB/s
    hbm_bytes=40 * 1000**3,
    source="NVIDIA A100 datasheet (40GB, SXM4 and PCIe) and A100 architecture whitepaper",
)

#: NVIDIA A100 80GB PCIe: the A100 80GB's die and memory at the PCIe card's lower memory clock.
A100_80GB_PCIE = replace(
    A100_80GB,
    name="A100-80GB-PCIe",
    hbm_bandwidth=1.935e12,  # NVIDIA A100 datasheet (80GB PCIe, HBM2e): 1,935 GB/s
    source="NVIDIA A100 datasheet (80GB PCIe) and A100 architecture whitepaper",
)

#: NVIDIA H100 PCIe 80GB: the GH100 die with 114 SMs enabled, HBM2e, at 350 W.
H100_PCIE = replace(
    H100_SXM,
    name="H100-PCIe",
    hbm_bandwidth=2.0e12,  # NVIDIA H100 datasheet (PCIe 80GB HBM2e): 2 TB/s
    num_sms=114,  # NVIDIA H100 datasheet and architecture whitepaper, H100 PCIe: 114 SMs
    peak_flops={
        "fp16": 756.5 * _TB,  # H100 datasheet, PCIe, dense FP16 tensor core (1,513 TFLOPS with sparsity)
        "bf16": 756.5 * _TB,
        "fp32": 51.2 * _TB,  # non-tensor FP32 (H100 whitepaper, PCIe at boost clock; the datasheet rounds to 51)
        "fp8_e4m3": 1513 * _TB,  # 3,026 TFLOPS with sparsity
        "fp8_e5m2": 1513 * _TB,
    },
    source="NVIDIA H100 datasheet (PCIe) and H100 architecture whitepaper",
)

#: The tensor-core peaks of the NVL cards (H100 NVL, H200 NVL): the GH100's 132 SMs at a 350-600 W board limit.
_NVL_FLOPS = {
    "fp16": 835.5 * _TB,  # H100 NVL and H200 NVL datasheets: 1,671 TFLOPS FP16/BF16 with sparsity, half dense
    "bf16": 835.5 * _TB,
    "fp32": 60 * _TB,  # non-tensor FP32
    "fp8_e4m3": 1670.5 * _TB,  # 3,341 TFLOPS with sparsity
    "fp8_e5m2": 1670.5 * _TB,
}

#: NVIDIA H100 NVL 94GB (a PCIe card): the GH100's 132 SMs with six HBM3 stacks.
H100_NVL = replace(
    H100_SXM,
    name="H100-NVL",
    hbm_bandwidth=3.9e12,  # NVIDIA H100 datasheet (NVL 94GB HBM3): 3.9 TB/s
    hbm_bytes=94 * 1000**3,
    peak_flops=_NVL_FLOPS,
    # l2_bytes: the SXM's 50 MB, an assumption (not read on an NVL card; its sixth HBM stack may enable more):
    # detect() reads the device's own, and a record's L2 is checked against its die only where a card of that preset
    # was read (iomodel.measure.records)
    source="NVIDIA H100 datasheet (NVL) and H100 architecture whitepaper; L2 assumed the SXM's 50 MB",
)

#: NVIDIA H200 NVL 141GB (a PCIe card): the H200's memory system at the NVL board limit.
H200_NVL = replace(
    H200,
    name="H200-NVL",
    peak_flops=_NVL_FLOPS,  # NVIDIA H200 datasheet (NVL): the H100 NVL's peaks; 4.8 TB/s, 141 GB as the H200 SXM
    source="NVIDIA H200 datasheet (NVL); L2 as the H200 SXM's (the same die and memory)",
)

HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in (A100_80GB, H100_SXM, H200, A100_40GB, A100_80GB_PCIE,
                                                         H100_PCIE, H100_NVL, H200_NVL)}

#: A family's card variants, by a word that stands in the device name (``torch.cuda.get_device_name``: ``NVIDIA H100
#: PCIe``, ``NVIDIA H100 NVL``, ``NVIDIA H200 NVL``, ``NVIDIA A100-SXM4-40GB``, ``NVIDIA A100-PCIE-40GB``, ``NVIDIA A100
#: 80GB PCIe``), the first that stands wins; a name with none is the family's own preset (``NVIDIA H100 80GB HBM3``, the
#: SXM; ``NVIDIA H200``; ``NVIDIA A100-SXM4-80GB``).
_VARIANTS: dict[str, tuple[tuple[str, str], ...]] = {
    "A100-80GB": (("40gb", "A100-40GB"), ("pcie", "A100-80GB-PCIe")),
    "H100-SXM": (("nvl", "H100-NVL"), ("pcie", "H100-PCIe")),
    "H200": (("nvl", "H200-NVL"),),
}

#: The preset each card variant takes its measured L2 constants from (:mod:`iomodel.cache.params`, keyed by these): its
#: family's card (:data:`_VARIANTS`), the same die with the same L2 enabled; bandwidth, memory, SMs and peak FLOP/s stay
#: the variant's own. A preset not listed is its own. The L2 of a variant was not measured on it: the estimate's
#: assumptions say on which card it was.
CALIBRATED_AS: dict[str, str] = {variant: family for family, variants in _VARIANTS.items() for _, variant in variants}

_ALIASES = {k.lower(): k for k in HARDWARE} | {"h100": "H100-SXM", "a100": "A100-80GB", "h200-sxm": "H200"}


def preset_names() -> str:
    """The presets, comma-separated, for messages and help (``A100-80GB, H100-SXM, H200, ...``). Raises nothing."""
    return ", ".join(HARDWARE)


def get_hardware(name: str) -> Hardware:
    """A preset by name (case-insensitive, spaces and underscores read as hyphens; ``H200``, ``H100-SXM``, ``H100-PCIe``,
    ``A100-40GB``, ...: :data:`HARDWARE`).

    Raises:
        IomodelError: unknown name (the message lists the presets).
    """
    key = _ALIASES.get(re.sub(r"[\s_]+", "-", str(name).strip().lower()))  # "h100 pcie", "H100_PCIe": H100-PCIe
    if key is None:
        raise IomodelError(f"unknown hardware {name!r}: use one of {preset_names()}")
    return HARDWARE[key]


def calibrated_as(preset: str) -> str:
    """The preset whose measured L2 constants ``preset`` takes (:data:`CALIBRATED_AS`; itself where not listed).
    Raises nothing."""
    return CALIBRATED_AS.get(preset, preset)


#: "MIG" as a word of a (lowercase) device name: a Multi-Instance GPU slice, its profile after it ("NVIDIA A100-SXM4-80GB
#: MIG 3g.40gb").
_MIG = re.compile(r"(?<![a-z0-9])mig(?![a-z0-9])")


def _stands(word: str, name: str) -> bool:
    """Whether ``word`` stands in ``name`` (lowercase) with no letter or digit before it and no digit after it."""
    return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![0-9])", name) is not None


def preset_of_device(name: str) -> str | None:
    """The preset (a :data:`HARDWARE` key) a device or hardware name names, or None. The family first: a family's
    preset (``H100-SXM``, ``H200``, ``A100-80GB``) matches where its name's first part (``H100``, ``H200``, ``A100``)
    stands in ``name`` with no letter or digit before it and no digit after it, case-insensitive, the last family that
    does; then the card variant (:data:`_VARIANTS`): ``NVIDIA H100 80GB HBM3`` and ``H100-SXM (NVIDIA H100 80GB HBM3)``
    give ``H100-SXM``, ``NVIDIA H100 PCIe`` gives ``H100-PCIe``, ``NVIDIA A100-SXM4-40GB`` ``A100-40GB``; ``cpu`` None;
    a MIG slice's profile after ``MIG`` is not read (``NVIDIA A100-SXM4-80GB MIG 3g.40gb`` is an ``A100-80GB``).
    The family must stand as a word of its own: a GH200 (``NVIDIA GH200 480GB``, another memory system and bandwidth
    than the H200 SXM) is no preset, not the H200's. The one rule :func:`detect` and a record's device check
    (:meth:`iomodel.measure.records.Measurement.from_dict`, which reads the record's ``hardware.name`` as the
    predictions do, :func:`iomodel.cache.params.hardware_preset`) share. Raises nothing."""
    low = _MIG.split(str(name).lower())[0]  # a MIG slice's profile ("3g.40gb") is no card
    got = None
    for key in _VARIANTS:
        if _stands(key.split("-")[0].lower(), low):
            got = key
    if got is None:
        return None
    return next((variant for word, variant in _VARIANTS[got] if _stands(word, low)), got)


def detect(device: int = 0) -> Hardware:
    """Describe the current CUDA device from ``torch.cuda.get_device_properties``.

    SM count, compute capability, L2 size and shared memory per block/SM are read from the device; HBM
    bandwidth and peak FLOP/s come from the matching preset (by name), since CUDA does
    not report them.

    Raises:
        IomodelError: torch is not installed, no CUDA GPU is visible, the device is a MIG slice, or the device
            matches no preset (then pass --hardware).
    """
    try:
        import torch
    except ImportError:
        raise IomodelError("detecting the GPU needs torch: pip install -e '.[kernels]', or pass --hardware") from None
    if not torch.cuda.is_available():
        raise IomodelError(f"no CUDA GPU is visible: pass --hardware (one of {preset_names()}) instead of detecting")
    props = torch.cuda.get_device_properties(device)
    name = props.name
    if _MIG.search(str(name).lower()):  # a slice's bandwidth is a share of the card's
        raise IomodelError(f"GPU {name!r} is a MIG slice: its HBM bandwidth and L2 are a share of the card's, which no "
                           "preset describes: pass --hardware with the card's preset to model the whole card")
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
