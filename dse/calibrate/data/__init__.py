"""Readers of measured data: the public datasets in `shared/data` (one module per source) and the sample
files that `dse measure` writes (`samples`). Each converts units once, at the edge, to SI columns.

| loader | module | GPUs |
|---|---|---|
| `load_aiconfigurator_gemm(gpu)` | `aiconfigurator` | h100_sxm, h200_sxm (with power), a100_sxm |
| `load_aiconfigurator_attention(gpu, phase)` | `aiconfigurator` | h100_sxm, h200_sxm (with power) |
| `load_aiconfigurator_silicon()` | `aiconfigurator` | end-to-end serving, h100_sxm and h200_sxm |
| `load_llmcompass(kind)` | `llmcompass` | A100 80 GB (form factor not stated) |
| `load_energaizer_measurements(which)` | `energaizer` | A10, A100 PCIe 40 GB (fixed clock and DVFS) |
| `load_mlenergy()` | `mlenergy` | H100, B200 serving |
| `read_samples(path)` | `samples` | kernel samples from `dse measure kernels` |

The data root (`common.data_root`) is `$DSE_DATA_DIR` when set, else `shared/data` beside or inside the
repository.
"""
