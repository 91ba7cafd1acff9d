"""Fixtures of the kernel-model tests."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs


@pytest.fixture(scope="session")
def h100():
    return load_gpu("h100-sxm")


@pytest.fixture(scope="session")
def a100():
    return load_gpu("a100-sxm-80gb")


@pytest.fixture(scope="session")
def hopper_coeffs(h100):
    return load_default_coeffs(h100)


@pytest.fixture(scope="session")
def ampere_coeffs(a100):
    return load_default_coeffs(a100)
