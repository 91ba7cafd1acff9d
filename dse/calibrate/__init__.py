"""Calibration: measured datasets (`dse.calibrate.data`) and, later, coefficient fits.

Submodules are imported explicitly (`from dse.calibrate.data import load_aiconfigurator_gemm`) so that
`import dse.calibrate` pulls in neither pandas nor a solver.
"""
