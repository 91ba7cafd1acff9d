"""Tile configurations: the kernel candidates of each family and how many fit on an SM.

GEMM candidates follow the cuBLAS / CUTLASS kernel families of each generation:

- Hopper (sm90, TMA + warpgroup MMA): threadblock tiles 64x64 ... 256x128 with 128 bytes of K per stage
  (K = 64 for 16-bit inputs, 128 for fp8), as many stages as fit (CUTLASS auto carve-out, 4 for
  128x256, 13 for 64x64), warpgroup tiles 64 x N (the `*_tnspA/B_gmma`
  kernels of cuBLAS, `KernelTmaWarpSpecialized{Cooperative,Pingpong}` in CUTLASS).
- Blackwell (sm100, TMA + tcgen05 MMA, accumulators in tensor memory): CUTLASS's default sm100 tiles
  (`BLACKWELL_GEMM_TILES`), 1-SM 64x64 ... 128x256 and 2-SM (a CTA pair) 256x128 and 256x256, 128 bytes
  of K per stage; wgmma does not exist on sm100, so the Hopper sets do not run there.
- Ampere (sm80, cp.async + mma.sync): tiles 64x64 ... 256x128 with 64 bytes of K per stage (K = 32 for
  16-bit inputs), 3-5 stages, 64x64 warp tiles (`ampere_*_s16816gemm_*` names).
- SIMT fp32 on CUDA cores: 128x128x8, 128x64x8, 64x64x8 with 2 stages (`sgemm_128x128x8` style).

Every candidate may run split-K (1, 2, 4, 8 or 16 slices of K) with a separate reduction of fp32
partials: cuBLAS does so when the m x n tiles cannot fill the GPU and K is long. Tensor-Core candidates
may also run stream-K (CUTLASS `StreamKScheduler`, cuBLAS `*_stream_k` kernels): the K iterations of
all tiles are dealt evenly to the persistent threadblocks, which removes wave quantization at the cost
of one partial-tile fix-up through a workspace.

Selection rule (`gemm.gemm_arrays`): among the candidates (tile, split) of the kernel library, pick the
one with the lowest predicted latency, with the fitted coefficients of each candidate's group (so the
calibrated model picks what it believes fastest, as cuBLAS's heuristics and autotuned dispatch aim to);
exact ties go to the earlier candidate: larger tiles first, then no split. Taking a minimum keeps the model
monotone in SMs, clock and bandwidth. Libraries that dispatch by rule rather than by speed are modelled
by restricting the candidates: vLLM's CUTLASS fp8 GEMM picks its tile from M alone and never splits K
(`HOPPER_FP8_TILES`, learnt from the measured data's `kernel_source`). The measured data carries no
kernel names, so the rule is otherwise validated only through latency.

FlashAttention tiles (`flash_tile`) follow FlashAttention-3 on Hopper (kBlockM x kBlockN by head dim,
softmax overlapped with the two GEMMs by warpgroup ping-pong) and FlashAttention-2 elsewhere.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from dse.perf.arrays import GemmCandidates, GemmRows
from dse.perf.pipeline import select
from dse.perf.rates import Rates

STREAM_K = 0  # the split value that stands for a stream-K schedule
SPLITS: tuple[int, ...] = (1, 2, 4, 8, 16, STREAM_K)
# Coefficient groups' tile part (gemm/<dtype class>/<tile class>).
TILE_CLASSES: tuple[str, ...] = ("small", "medium", "large", "splitk", "streamk", "simt")

_REGS_OVERHEAD_PER_THREAD = 64  # addresses, loop counters, fragments besides the accumulators
_REGS_MAX_PER_THREAD = 255


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmTile:
    """One threadblock tile of a GEMM kernel family.

    `k_step_bytes` is the K extent of one pipeline stage in bytes per row (K elements = k_step_bytes /
    dtype bytes). `warp_m x warp_n` is the tile one warp (Ampere) or warpgroup (Hopper) computes, or on
    Blackwell the CTA's MMA; with the MMA instruction it sets the shared-memory read traffic. `tile_class`
    names the coefficient group (small, medium, large, simt).
    `multicast`: threadblocks of a cluster along M that share one B tile load (Hopper TMA multicast,
    CUTLASS cluster shape 2x1x1), which divides the L2 reads of B; `multicast_a` likewise along N for A.
    `m_dispatch = (lo, hi)`: a library that dispatches on M uses this tile only when
    max(32, next_pow2(m)) lies in (lo, hi]; (0, 0) means any M. `splits`: the split-K counts (and
    STREAM_K) the library offers with this tile. `cta_pair` = 2: one CTA of a Blackwell 2-SM MMA
    (tcgen05 `cta_group::2`), whose MMA tile is 2 tile_m x tile_n: each CTA of the pair holds its tile_m
    rows of A and half of the B tile (tile_n / 2 columns) in its shared memory, and the MMA reads both
    halves, so a CTA stages and serves only its half of B (`gemm_steps.smem_read_bytes`).
    """

    name: str
    tile_m: int
    tile_n: int
    k_step_bytes: int
    warp_m: int
    warp_n: int
    stages: int
    threads: int
    simt: bool = False
    tile_class: str = "medium"
    multicast: int = 1
    multicast_a: int = 1
    m_dispatch: tuple[int, int] = (0, 0)
    splits: tuple[int, ...] = SPLITS
    cta_pair: int = 1

    def stage_count(self, smem_per_sm: float) -> int:
        """Pipeline stages: fixed, or (stages == 0) as many as fit beside the epilogue buffer, at most 16,
        as CUTLASS's `StageCountAutoCarveout` does on Hopper."""
        if self.stages:
            return self.stages
        free = smem_per_sm - self.tile_m * self.tile_n * 2.0
        return int(np.clip(free // self.stage_bytes(), 2, 16))

    def stage_bytes(self) -> float:
        """Shared memory of one operand stage: the A rows and this CTA's B columns."""
        return (self.tile_m + self.tile_n / self.cta_pair) * self.k_step_bytes

    def smem_bytes(self, smem_per_sm: float) -> float:
        """Shared memory of the operand stages plus an epilogue staging buffer (16-bit C tile)."""
        return self.stage_count(smem_per_sm) * self.stage_bytes() + self.tile_m * self.tile_n * 2.0

    def regs_per_thread(self) -> float:
        acc = self.tile_m * self.tile_n / self.threads
        return min(_REGS_MAX_PER_THREAD, acc + _REGS_OVERHEAD_PER_THREAD)


def _tc(
    name: str,
    m: int,
    n: int,
    kb: int,
    wm: int,
    wn: int,
    stages: int,
    threads: int,
    cls: str,
    multicast: int = 1,
    cta_pair: int = 1,
) -> GemmTile:
    return GemmTile(
        name=name,
        tile_m=m,
        tile_n=n,
        k_step_bytes=kb,
        warp_m=wm,
        warp_n=wn,
        stages=stages,
        threads=threads,
        tile_class=cls,
        multicast=multicast,
        cta_pair=cta_pair,
    )


HOPPER_GEMM_TILES: tuple[GemmTile, ...] = (
    _tc("sm90_128x256", 128, 256, 128, 64, 256, 0, 384, "large", 2),
    _tc("sm90_256x128", 256, 128, 128, 64, 128, 0, 384, "large", 2),
    _tc("sm90_128x128", 128, 128, 128, 64, 128, 0, 384, "medium", 2),
    _tc("sm90_128x64", 128, 64, 128, 64, 64, 0, 256, "small"),
    _tc("sm90_64x128", 64, 128, 128, 64, 128, 0, 256, "small"),
    _tc("sm90_64x64", 64, 64, 128, 64, 64, 0, 256, "small"),
)

# Blackwell sm100 (`KernelTmaWarpSpecialized{1,2}SmSm100`): tcgen05.mma is issued by one thread for the
# whole CTA (or CTA pair) tile, M = 64 or 128 per CTA, N up to 256, and the fp32 accumulators live in tensor
# memory, 128 lanes x 512 columns of 32 bits per SM: a 128x256 accumulator takes 256 columns, the
# persistent kernel's two buffers all 512. `_tile_occupancy`'s register checks bound the same 65536 values.
# The shapes are those CUTLASS builds by default for 16-bit inputs (cutlass_library
# `sm100_shapes.py`, level 0: 1-SM 64x128, 128x128, 128x256, 2-SM 256x128, 256x256) and its level-2
# 128x64 and 64x64 for short problems, as the Hopper set has; each exists for 8-bit inputs too. K per
# stage: 4 MMA instructions of 32 bytes each.
# The MMA tile is in the name; tile_m x tile_n is one CTA's share (a 2-SM 256xN MMA: 128xN per CTA).
# `warp_m x warp_n` is the MMA's tile per CTA (one MMA per CTA, no warp tiling). 256 threads: the
# scheduler, TMA, MMA and epilogue-load warps and four epilogue warps (`sm100_gemm_tma_warpspecialized.hpp`).
# The 1-SM large and medium tiles run in 2x1 clusters that multicast B, as Hopper's; the 2-SM tiles' pair
# is their cluster.
BLACKWELL_GEMM_TILES: tuple[GemmTile, ...] = (
    _tc("sm100_2sm_256x256", 128, 256, 128, 128, 256, 0, 256, "large", cta_pair=2),
    _tc("sm100_128x256", 128, 256, 128, 128, 256, 0, 256, "large", 2),
    _tc("sm100_2sm_256x128", 128, 128, 128, 128, 128, 0, 256, "medium", cta_pair=2),
    _tc("sm100_128x128", 128, 128, 128, 128, 128, 0, 256, "medium", 2),
    _tc("sm100_128x64", 128, 64, 128, 128, 64, 0, 256, "small"),
    _tc("sm100_64x128", 64, 128, 128, 64, 128, 0, 256, "small"),
    _tc("sm100_64x64", 64, 64, 128, 64, 64, 0, 256, "small"),
)
# The block-scaled fp4 MMA (tcgen05 `kind::mxf4nvf4`) has no M = 64 shape.
BLACKWELL_FP4_TILES: tuple[GemmTile, ...] = tuple(t for t in BLACKWELL_GEMM_TILES if t.tile_m >= 128)

AMPERE_GEMM_TILES: tuple[GemmTile, ...] = (
    _tc("sm80_256x128", 256, 128, 64, 64, 64, 3, 256, "large"),
    _tc("sm80_128x256", 128, 256, 64, 64, 64, 3, 256, "large"),
    _tc("sm80_128x128", 128, 128, 64, 64, 64, 4, 128, "medium"),
    _tc("sm80_128x64", 128, 64, 64, 64, 32, 4, 128, "small"),
    _tc("sm80_64x128", 64, 128, 64, 32, 64, 4, 128, "small"),
    _tc("sm80_64x64", 64, 64, 64, 32, 32, 5, 128, "small"),
)

SIMT_GEMM_TILES: tuple[GemmTile, ...] = (
    GemmTile(
        name="simt_128x128x8",
        tile_m=128,
        tile_n=128,
        k_step_bytes=32,
        warp_m=32,
        warp_n=64,
        stages=2,
        threads=256,
        simt=True,
        tile_class="simt",
    ),
    GemmTile(
        name="simt_128x64x8",
        tile_m=128,
        tile_n=64,
        k_step_bytes=32,
        warp_m=32,
        warp_n=32,
        stages=2,
        threads=256,
        simt=True,
        tile_class="simt",
    ),
    GemmTile(
        name="simt_64x64x8",
        tile_m=64,
        tile_n=64,
        k_step_bytes=32,
        warp_m=32,
        warp_n=32,
        stages=2,
        threads=128,
        simt=True,
        tile_class="simt",
    ),
)


# Each SM has four warp schedulers, each issuing one warp instruction per clock (CUDA C++ Programming
# Guide, compute capabilities 7.0-9.0): 128 thread-instructions per clock. GA100's 64 FP32 lanes per SM
# keep a warp FFMA on the pipe for two clocks and leave every other issue slot to the mainloop's loads;
# GA10x's and Hopper's 128 lanes (the Guide's throughput table) need every slot for FFMA, so a SIMT
# GEMM's loads, barriers and branches take FFMA slots there.
SM_ISSUE_LANES = 128.0


def simt_ffma_rate_factor(
    warp_m: np.ndarray, warp_n: np.ndarray, tile_m: np.ndarray, tile_n: np.ndarray, k_tile: np.ndarray,
    fp32_flop_per_clk: float,
) -> np.ndarray:  # fmt: skip
    """The share of the FP32 lanes' FFMA rate a SIMT GEMM mainloop reaches under the issue limit (1 on
    SMs with at most half the issue width in FP32 lanes).

    Instructions per thread and K step: warp_m x warp_n / 32 FFMA; the A and B fragments of a square
    thread tile as 16-byte shared loads (2 sqrt(FFMA) floats, 4 a load); the next K tile's global loads and
    shared stores (tile_m + tile_n floats per K step per threadblock, 4 per access, each loaded and
    stored); one barrier and one branch per K tile. For the
    128x128x8 tile: 64 FFMA of 68.75 (0.93)."""
    ffma = warp_m * warp_n / 32.0
    threads = 32.0 * tile_m * tile_n / (warp_m * warp_n)
    other = np.sqrt(ffma) / 2.0 + (tile_m + tile_n) / (2.0 * threads) + 2.0 / k_tile
    lanes = fp32_flop_per_clk / 2.0
    return np.minimum(1.0, SM_ISSUE_LANES * ffma / (ffma + other) / lanes)


# vLLM's CUTLASS per-tensor fp8 GEMM on sm90 (`cutlass_scaled_mm`, `scaled_mm_sm90_fp8_dispatch.cuh`):
# the tile follows M (next power of two, at least 32), one configuration each, no split-K or stream-K.
HOPPER_FP8_TILES: tuple[GemmTile, ...] = (
    GemmTile(
        name="sm90_fp8_64x64_c1x8",
        tile_m=64,
        tile_n=64,
        k_step_bytes=128,
        warp_m=64,
        warp_n=64,
        stages=0,
        threads=256,
        tile_class="small",
        multicast_a=8,
        m_dispatch=(0, 64),
        splits=(1,),
    ),
    GemmTile(
        name="sm90_fp8_64x128_c2x1",
        tile_m=64,
        tile_n=128,
        k_step_bytes=128,
        warp_m=64,
        warp_n=128,
        stages=0,
        threads=384,
        tile_class="medium",
        multicast=2,
        m_dispatch=(64, 128),
        splits=(1,),
    ),
    GemmTile(
        name="sm90_fp8_128x128_c2x1",
        tile_m=128,
        tile_n=128,
        k_step_bytes=128,
        warp_m=64,
        warp_n=128,
        stages=0,
        threads=384,
        tile_class="large",
        multicast=2,
        m_dispatch=(128, 1 << 40),
        splits=(1,),
    ),
)

# Kernel libraries: which candidate set runs a GEMM (see `gemm_library`).
LIBRARIES: tuple[str, ...] = ("hopper_tc", "hopper_fp8", "ampere_tc", "simt", "blackwell_tc", "blackwell_fp4")
_LIBRARY_TILES: dict[str, tuple[GemmTile, ...]] = {
    "hopper_tc": HOPPER_GEMM_TILES,
    "hopper_fp8": HOPPER_FP8_TILES,
    "ampere_tc": AMPERE_GEMM_TILES,
    "simt": SIMT_GEMM_TILES,
    "blackwell_tc": BLACKWELL_GEMM_TILES,
    "blackwell_fp4": BLACKWELL_FP4_TILES,
}
# The MMA instruction of each library's mainloop, which decides its shared-memory operand reads
# (`dse.perf.gemm_steps.smem_read_bytes`): FFMA (CUDA cores), mma.sync (Ampere, per warp), wgmma (Hopper,
# per warpgroup), tcgen05.mma (Blackwell, per CTA or CTA pair).
LIBRARY_MMA: dict[str, str] = {
    "hopper_tc": "wgmma",
    "hopper_fp8": "wgmma",
    "ampere_tc": "mma_sync",
    "simt": "ffma",
    "blackwell_tc": "tcgen05",
    "blackwell_fp4": "tcgen05",
}
# Persistent kernels: one threadblock per slot loops over its tiles (`gemm._phase_times`); on Blackwell the
# accumulator's two buffers in tensor memory let the epilogue of one tile overlap the next tile's mainloop.
PERSISTENT_LIBRARIES: frozenset[str] = frozenset({"hopper_tc", "blackwell_tc", "blackwell_fp4"})


def gemm_library(architecture: str, simt: bool, eight_bit: bool, fp4_mma: bool = False) -> str:
    """The kernel library of a GEMM on a GPU of `architecture` (its spec's name): SIMT for fp32; on
    Blackwell the sm100 set (`fp4_mma`: the GPU multiplies fp4 natively, whose MMA has fewer tiles); on
    Hopper, 8-bit inputs go to the CUTLASS fp8 kernels that vLLM dispatches by M (the measured data's
    `CutlassFP8ScaledMMLinearKernel`), the rest to the cuBLAS-like set; otherwise the Ampere set."""
    arch = architecture.lower()
    if simt:
        return "simt"
    if arch == "blackwell":  # wgmma does not run on sm100: every dtype takes the tcgen05 kernels
        return "blackwell_fp4" if fp4_mma else "blackwell_tc"
    if arch == "hopper":
        return "hopper_fp8" if eight_bit else "hopper_tc"
    return "ampere_tc"


def gemm_tiles(library: str) -> tuple[GemmTile, ...]:
    """Candidate tiles of a kernel library."""
    return _LIBRARY_TILES[library]


@dataclass(frozen=True, slots=True, kw_only=True)
class SmLimits:
    """The SM resources that bound a tile's pipeline stages and occupancy (a `Rates` has them too)."""

    smem_bytes_per_sm: float
    registers_per_sm: int
    max_threads_per_sm: int
    max_threadblocks_per_sm: int


def occupancy(
    rates: Rates | SmLimits,
    *,
    threads: float,
    smem_bytes: np.ndarray | float,
    regs_per_thread: np.ndarray | float,
    min_regs: np.ndarray | float,
    min_smem_bytes: np.ndarray | float,
) -> np.ndarray:
    """Concurrent threadblocks per SM allowed by shared memory, registers, threads and the block limit; 0
    where not even one block fits, so that no kernel runs on an SM too small for it.

    The counts take the block's estimated registers and shared memory, which may exceed an SM that still
    runs one block: the compiler caps a block's registers at what the SM holds (`__launch_bounds__`) and
    spills the rest, and CUTLASS's epilogue reuses the mainloop's stages. What cannot shrink decides
    whether a block fits at all: its threads, `min_regs` (the MMA accumulators, which live in registers)
    and `min_smem_bytes` (shared memory it cannot run without)."""
    by_smem = rates.smem_bytes_per_sm // np.maximum(smem_bytes, 1.0)
    by_regs = rates.registers_per_sm // np.maximum(threads * regs_per_thread, 1.0)
    by_threads = rates.max_threads_per_sm // threads
    conc = np.maximum(
        1.0, np.minimum(np.minimum(by_smem, by_regs), min(by_threads, rates.max_threadblocks_per_sm))
    )
    fits = (
        (threads <= rates.max_threads_per_sm)
        & (np.asarray(min_regs) <= rates.registers_per_sm)
        & (np.asarray(min_smem_bytes) <= rates.smem_bytes_per_sm)
    )
    return np.where(fits, conc, 0.0)


def flash_tile_arrays(arch: str, head_dim: np.ndarray, decode: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """(block_q, block_kv, threads) per head dim: FlashAttention-3 on Hopper, FlashAttention-2 otherwise.

    FA3 (hopper/tile_size.h): head dim <= 64: 192 x 128; <= 128: 128 x 128; <= 192: 128 x 112;
    <= 256: 128 x 80; larger (FA4-style): 128 x 64. Decode packs the query heads of a GQA group into a
    64-row block. FA2: 128 x 128 up to head dim 64, 128 x 64 above, 64 x 64 beyond 128.
    """
    d = np.asarray(head_dim, dtype=float)
    if arch == "hopper":
        bq = np.where(d <= 64, 192.0, 128.0)
        bkv = select([d <= 64, d <= 128, d <= 192, d <= 256], [128.0, 128.0, 112.0, 80.0], 64.0)
        threads = 384
        if decode:
            bq = np.full_like(d, 64.0)
            bkv = select([d <= 128, d <= 256], [128.0, 80.0], 64.0)
            threads = 256
    else:
        bq = np.where(d <= 128, 128.0, 64.0)
        bkv = np.where(d <= 64, 128.0, 64.0)
        threads = 256
        if decode:
            bq = np.full_like(d, 64.0)
            bkv = np.where(d <= 128, 128.0, 64.0)
            threads = 128
    return bq, bkv, threads


def gemm_candidates(library: str, rates: Rates) -> GemmCandidates:
    """Per-candidate constants of `library`'s tiles, shape [1, C] (C = tiles x splits)."""
    limits = SmLimits(
        smem_bytes_per_sm=rates.smem_bytes_per_sm,
        registers_per_sm=rates.registers_per_sm,
        max_threads_per_sm=rates.max_threads_per_sm,
        max_threadblocks_per_sm=rates.max_threadblocks_per_sm,
    )
    return _library_candidates(library, limits)


# Keyed on the library and on the only SM resources its tiles' stages and occupancy read, so GPUs that
# differ in clocks, bandwidths or SM count share an entry; the arrays are read-only (shared).
@functools.lru_cache(maxsize=256)
def _library_candidates(library: str, limits: SmLimits) -> GemmCandidates:
    tiles = gemm_tiles(library)
    concs = [_tile_occupancy(t, limits) for t in tiles]
    # A tile whose threadblock does not fit an SM is no candidate; with none left, every tile stays at
    # occupancy 0, so that the GEMM's latency is not finite and `predict.check_finite` refuses the GPU.
    kept = [ti for ti, conc in enumerate(concs) if conc > 0] or list(range(len(tiles)))
    rows = []
    for ti in kept:
        t = tiles[ti]
        stages = t.stage_count(limits.smem_bytes_per_sm)
        for s in t.splits:
            cls = t.tile_class if t.simt or s == 1 else ("streamk" if s == STREAM_K else "splitk")
            rows.append(
                (
                    ti,
                    t.tile_m,
                    t.tile_n,
                    t.k_step_bytes,
                    t.warp_m,
                    t.warp_n,
                    stages,
                    concs[ti],
                    s,
                    t.multicast,
                    t.multicast_a,
                    t.m_dispatch[0],
                    t.m_dispatch[1],
                    TILE_CLASSES.index(cls),
                    t.cta_pair,
                )
            )
    arr = np.array(rows, dtype=float).T
    arr.flags.writeable = False
    return GemmCandidates(*(arr[i][None, :] for i in range(arr.shape[0])))  # the tuple's order is the fields'


def _tile_occupancy(t: GemmTile, limits: SmLimits) -> float:
    """Threadblocks of tile `t` per SM (0: it does not fit). A block cannot run without its fp32
    accumulators, one register per output element, and two pipeline stages of shared memory."""
    return float(
        occupancy(
            limits,
            threads=t.threads,
            smem_bytes=t.smem_bytes(limits.smem_bytes_per_sm),
            regs_per_thread=t.regs_per_thread(),
            min_regs=t.tile_m * t.tile_n,
            min_smem_bytes=2 * t.stage_bytes(),
        )
    )


def dispatch_valid(
    m: np.ndarray, c: GemmCandidates, stream_k: np.ndarray, s: np.ndarray, k_split: np.ndarray, kt: np.ndarray
) -> np.ndarray:
    """Candidates the library would dispatch: a split-K slice of at least two K steps, the m range."""
    valid = stream_k | (s == 1) | (k_split >= 2 * kt)
    mp2 = np.maximum(32.0, 2.0 ** np.ceil(np.log2(m)))
    return valid & ((c.m_hi == 0) | ((mp2 > c.m_lo) & (mp2 <= c.m_hi)))


def valid_grid(r: GemmRows, c: GemmCandidates, num: int) -> np.ndarray:
    """[num, C]: the candidates `dispatch_valid` admits for `num` rows `r` (a column [num, 1], or
    `GemmRows.uniform_collapsed`'s)."""
    stream_k = c.split == STREAM_K
    s = np.where(stream_k, 1.0, c.split)
    kt = c.k_step_bytes / r.in_elem_bytes
    return np.broadcast_to(dispatch_valid(r.m, c, stream_k, s, np.ceil(r.k / s), kt), (num, c.split.size))


def kernel_name(library: str, tile_idx: float, split: float) -> str:
    """Name of `library`'s tile `tile_idx` at split-K `split` (`STREAM_K`: stream-K)."""
    name = gemm_tiles(library)[int(tile_idx)].name
    if split == STREAM_K:
        return f"{name}_streamk"
    return name if split <= 1 else f"{name}_splitk{int(split)}"
