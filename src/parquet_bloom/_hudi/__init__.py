"""Hudi's record-key Bloom filters, behind :mod:`parquet_bloom.hudi`.

- :mod:`.keys`: record keys (``str``, ``bytes``, numpy and Arrow arrays) -> the UTF-8 bytes
  Hudi hashes, as one buffer and offsets;
- :mod:`.murmur`: Hadoop's MurmurHash2 as Hudi chains it, over arrays of keys (numpy, or the
  compiled kernel), and the bit positions it gives;
- :mod:`.codec`: the serialised filter (Java ``DataOutput`` bytes, Base64) decoded with limits
  and encoded byte for byte as Hudi writes it;
- :mod:`.filter`: one filter (:class:`~parquet_bloom.hudi.HudiBloomFilter`), its size by Hudi's
  rule and the footer keys it is read from;
- :mod:`.check`: a base file's filter checked against its record keys;
- :mod:`.table`: which base files of a table may hold a key (the table's file listing from the
  ``hudi`` package).

docs/hudi.md describes the format and names the Hudi and Hadoop sources behind each fact.
"""
