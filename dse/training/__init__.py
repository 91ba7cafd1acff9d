"""Training steps (forward + backward + optimizer, data/tensor/pipeline parallel): not modelled yet.

This package is where the training-step model goes (DESIGN.md section 14); it sits beside `dse.serving.static`
and aggregates the same kernel estimates.
"""
