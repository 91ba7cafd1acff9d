"""Calibration: measured datasets (`dse.calibrate.dataset`) and, later, coefficient fits.

Submodules are imported explicitly (`from dse.calibrate.dataset import load_aiconfigurator_gemm`) so that
`import dse.calibrate` pulls in neither pandas nor a solver.
"""
