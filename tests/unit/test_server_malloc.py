"""The broker keeps freed memory for reuse (glibc mallopt), unless the operator set glibc's knobs."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(env: dict[str, str]) -> str:
    code = "from broker.server.__main__ import tune_malloc; print(tune_malloc())"
    return subprocess.run([sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, check=True, cwd=".").stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_applied_on_glibc_and_left_alone_when_the_operator_chose():
    import os

    base = {"PYTHONPATH": os.pathsep.join(sys.path)}
    assert _run(base) == "True"
    assert _run({**base, "MALLOC_TRIM_THRESHOLD_": "1000000"}) == "False"
    assert _run({**base, "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000000"}) == "False"
    assert _run({**base, "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"}) == "True"

