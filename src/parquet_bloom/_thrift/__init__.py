"""Generated Thrift bindings of thrift/parquet.thrift. Do not edit: run thrift/generate.sh.

Only parquet_bloom._format imports this package.
"""
