"""Run every benchmark, one after another (each measures its ratios within its own run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHMARKS = [
    "bench_core",
    "bench_hashing",
    "bench_footer",
    "bench_prune",
    "bench_object_store",
    "bench_rewrite",
    "bench_tables",
    "bench_index",
    "bench_text",
    "bench_encryption",
    "bench_spark",
    "bench_spark_probe",
]


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        script = HERE / f"{name}.py"
        if not script.exists():
            continue
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, str(script)], check=False).returncode != 0:
            failed.append(name)
        print(flush=True)
    if failed:
        print(f"targets missed or errors in: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
