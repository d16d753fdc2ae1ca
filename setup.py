"""The optional compiled kernels (see src/parquet_bloom/kernels.py); everything else is in
pyproject.toml. ``optional=True``: where the C file does not compile (no compiler), the
package installs without it and runs on numpy alone."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "parquet_bloom._kernels",
            ["src/parquet_bloom/_kernels.c", "src/parquet_bloom/_kernels_probe.c"],
            depends=["src/parquet_bloom/_kernels_probe.h"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
