"""Paimon's file indexes, behind :mod:`parquet_bloom.paimon`.

- :mod:`.fasthash`: Paimon's column types (as its schema files and SQL spell them) and the
  64-bit hash its bloom-filter index takes of a value of each type (``FastHash``), over arrays;
- :mod:`.bloom`: the ``BloomFilter64`` payload (hash count and bitset), its sizing from items
  and fpp, and the bit positions of a hash;
- :mod:`.container`: the ``FileIndexFormat`` container of one data file's indexes (a
  ``.index`` file, or the bytes embedded in a manifest entry), decoded with limits and encoded
  byte for byte, columns in the order Paimon's writer puts them;
- :mod:`.avro`: Avro object container files (Paimon's manifests and manifest lists), decoded
  with limits;
- :mod:`.table`: a table's data files from its latest snapshot (snapshot, manifest lists,
  manifests, schemas, partition paths).

docs/paimon.md describes the format and names the Paimon sources behind each fact.
"""
