"""LLM serving: per-request and system metrics from engine steps predicted by the kernel and power model.

static      one batch of identical requests, prefilled together and decoded in lock step
steady      the steady-state step mix of continuous batching at a running batch
continuous  the closed-loop benchmark simulated step by step (iteration-level scheduling)
steps       engine step times, memoized by shape, and step-time tables for the simulation
memory      the engines' memory rules: usable share of the GPU and KV-cache capacity
"""

# The request lengths of a serving prediction, a what-if and a study's workload when none are given (here,
# not in `static`, so that the search and CLI layers read them without importing the model stack).
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
