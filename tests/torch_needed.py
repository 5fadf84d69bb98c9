"""torch for the parity tests, imported once.

``from tests.torch_needed import torch`` skips the importing test module, with
the reason, where torch is not installed; under REQUIRE_TORCH=1 (``nox -s
parity`` and CI) a missing torch fails instead.
"""

import os

import pytest

if os.environ.get("REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip(
        "torch",
        reason="torch is not installed; `nox -s parity` installs torch==2.13.0 (CPU)",
    )

__all__ = ["torch"]
