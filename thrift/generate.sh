#!/usr/bin/env bash
# Regenerate src/parquet_bloom/_thrift/ (the Python bindings of thrift/parquet.thrift).
#
# The generated code is committed: CI and users have no Thrift compiler. Run this after
# editing parquet.thrift, with the Thrift compiler 0.17 (`thrift --version`), and commit
# the result. `thrift/generate.sh --check` regenerates into a temporary directory and fails
# if the committed bindings differ (for a pre-commit hook or a CI job that has thrift).
#
# Generator options:
#   slots           classes get __slots__: smaller objects, faster attribute access. The C
#                   decoder (thrift.protocol.fastbinary) builds nested structs by calling the
#                   class with keyword arguments, which works the same with slots.
#   package_prefix  the bindings live inside our package as parquet_bloom._thrift.parquet,
#                   not as a top-level `parquet` module that could shadow another one.
# Deliberately NOT used:
#   enum            IntEnum fields would make the pure-Python decoder raise on enum values
#                   newer than this IDL (the C decoder keeps plain ints anyway).
#   dynamic         smaller code, but slower decoding.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
idl="$here/parquet.thrift"
dest="$root/src/parquet_bloom/_thrift"
python="${PYTHON:-$root/.venv/bin/python}"

check=0
if [[ "${1:-}" == "--check" ]]; then
    check=1
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--check]" >&2
    exit 2
fi

command -v thrift >/dev/null || { echo "error: the thrift compiler is not on PATH" >&2; exit 1; }
version="$(thrift --version)"
if [[ "$version" != "Thrift version 0.17."* ]]; then
    echo "warning: generated with '$version'; the committed code was made with 0.17" >&2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/gen"
thrift --gen "py:slots,package_prefix=parquet_bloom._thrift." -out "$tmp/gen" "$idl"

# thrift writes gen/__init__.py (empty) and gen/parquet/{__init__,ttypes,constants}.py.
out="$tmp/_thrift"
mkdir -p "$out"
cp -r "$tmp/gen/parquet" "$out/parquet"
cat >"$out/__init__.py" <<'EOF'
"""Generated Thrift bindings of thrift/parquet.thrift. Do not edit: run thrift/generate.sh.

Only parquet_bloom._format imports this package.
"""
EOF
# Trailing whitespace in generated code only makes noisy diffs.
sed -i 's/[[:space:]]*$//' "$out"/parquet/*.py

if [[ $check -eq 1 ]]; then
    if diff -r -x __pycache__ "$out" "$dest"; then
        echo "src/parquet_bloom/_thrift is up to date"
    else
        echo "error: src/parquet_bloom/_thrift is stale: run thrift/generate.sh" >&2
        exit 1
    fi
    exit 0
fi

rm -rf "$dest"
cp -r "$out" "$dest"

# Smoke test: the bindings import as a subpackage and the C decoder accepts them.
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" "$python" - <<'EOF'
from thrift.protocol import TCompactProtocol
from thrift.transport import TTransport

from parquet_bloom._thrift.parquet import ttypes

buf = TTransport.TMemoryBuffer()
ttypes.KeyValue(key=b"k\xff", value=b"v").write(TCompactProtocol.TCompactProtocolAccelerated(buf))
kv = ttypes.KeyValue()
kv.read(TCompactProtocol.TCompactProtocolAccelerated(TTransport.TMemoryBuffer(buf.getvalue())))
assert kv.key == b"k\xff" and kv.value == b"v", kv
print("generated", ttypes.__file__)
EOF
