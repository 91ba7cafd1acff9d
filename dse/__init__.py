"""dse: design-space exploration of the energy and latency of AI workloads on GPUs.

Package map (imports flow downwards only; see STYLE.md):

    dse.units, dse.errors     SI constants, converters, the exceptions the CLI reports
    dse.hardware              GpuSpec, the GPU and memory-technology catalogs, overrides and memory swaps
    dse.workload              operators (GEMM, attention, softmax, norms, elementwise), graphs, model builders
    dse.perf                  the analytical kernel model: latency, traffic, utilization, power
    dse.cli                   the `dse` command (typer), a thin skin over the above

`import dse` needs only numpy, pydantic and pyyaml; heavier dependencies stay in their own modules.
"""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["__version__"]
