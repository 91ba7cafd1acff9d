"""dse: design-space exploration of the energy and latency of AI workloads on GPUs.

Package map (a package imports only those listed above it; the contracts in pyproject.toml check this):

    dse.units, dse.errors     SI constants, converters, the exceptions the CLI reports (with exit codes)
    dse.config                the one safe YAML loader (file:line errors, size/depth/alias limits)
    dse.hardware              GpuSpec, the GPU and memory-technology catalogs, the one override vocabulary
    dse.workload              operators (GEMM, attention, softmax, norms, elementwise), graphs, models,
                              serving-engine kernel fusions
    dse.perf                  the analytical kernel model: latency, traffic, utilization, power, DVFS, bounds
    dse.serving, dse.training LLM serving (a static batch; a server under load, simulated step by step);
                              training steps (to come)
    dse.calibrate, dse.search fits and validations against measured data; studies, spaces, samplers, runs
    dse.report, dse.bench     the HTML report and its figures; `dse bench` timings
    dse.cli                   the `dse` command (typer), a thin skin over the above
    dse.measure               the NVML / torch harness for a real GPU (only the CLI imports it)

`import dse` needs only numpy, pydantic and pyyaml; heavier dependencies stay in their own modules.
"""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["__version__"]
