import subprocess
import sys

import sparsedp


def test_version_subprocess():
    out = subprocess.run([sys.executable, "-m", "sparsedp", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"sparsedp {sparsedp.__version__}"


def test_core_import_is_light():
    code = "import sys, sparsedp; bad = [m for m in ('polars','scipy','duckdb','pyspark','pandas') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
