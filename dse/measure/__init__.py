"""Measurement on real GPUs: the only part of `dse` that imports pynvml and torch.

    dse.measure.nvml        NvmlGpu: clocks, power, energy counter, temperature; error map; SI at the edge
    dse.measure.sampler     PowerSampler thread (~10 ms), trapezoid integration, trace/timeline alignment
    dse.measure.harness     measure_ops(): warm-up, idle power, >= 1 s windows, repeats, stability gate
    dse.measure.kernels     torch launchers per op type (torch imported lazily)
    dse.measure.suites      the kernel suites (GEMM sweeps, attention, softmax, norms, elementwise)
    dse.measure.names       CUDA kernel names -> tile configurations
    dse.measure.model_run   whole-model runs and per-operator energy from the aligned power trace
    dse.measure.torch_llm   the torch transformer those runs execute (random weights, graph op names)
    dse.measure.replay      ReplayGpu: recorded or synthetic samples on a virtual clock (tests, --dry-run)
    dse.calibrate.data.samples     KernelSample schema, write_samples()/read_samples()
    dse.measure.env         collect_env(): driver, GPU, library versions
    dse.measure.cli_commands  the functions behind `dse measure kernels|model`

Submodules are imported explicitly; importing this package imports neither pynvml nor torch.
"""
