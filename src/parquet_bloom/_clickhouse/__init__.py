"""ClickHouse MergeTree skip indexes of the Bloom filter kinds (``bloom_filter``, ``tokenbf_v1``,
``ngrambf_v1``): CityHash v1.0.2, compressed blocks, part files, filters, tokenizers and the
granule decisions. The public face is :mod:`parquet_bloom.clickhouse`."""
