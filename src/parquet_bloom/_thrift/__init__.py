"""Generated Thrift bindings of thrift/parquet.thrift. Do not edit: run thrift/generate.sh.

Only parquet_bloom.format imports this package.
"""
