"""Whether the measured datasets (`../shared/data`, or `$DSE_DATA_DIR`) are here, and the marker for tests
that read them: without the data those tests skip with this reason, and everything else still runs."""

from __future__ import annotations

import pytest

from dse.calibrate.data.common import data_root
from dse.errors import ConfigError


def _have_shared_data() -> bool:
    try:
        data_root()
    except ConfigError:
        return False
    return True


HAVE_SHARED_DATA = _have_shared_data()
needs_shared_data = pytest.mark.skipif(
    not HAVE_SHARED_DATA,
    reason="measured data not found: put shared/data beside the repository or set DSE_DATA_DIR",
)
