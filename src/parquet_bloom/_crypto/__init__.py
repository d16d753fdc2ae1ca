"""Parquet Modular Encryption, for reading (parquet-format ``Encryption.md``).

Pure, like :mod:`parquet_bloom._format`: bytes and keys in, plaintext out. :mod:`.cipher` holds
the ciphers and module AADs, :mod:`.keys` the keys a caller gives (:class:`DecryptionKeys`,
explicit, by retriever, or through a KMS), :mod:`.file` one file's context (its footer opened,
its column chunks' keys). The ciphers need the ``cryptography`` package (the ``encryption``
extra), imported when a module is first decrypted.
"""

from parquet_bloom._crypto.file import FileDecryptor, open_encrypted_footer, open_plaintext_footer
from parquet_bloom._crypto.keys import (
    DecryptionKeys,
    external_key_material_name,
    parse_key_material_file,
)

__all__ = [
    "DecryptionKeys",
    "FileDecryptor",
    "external_key_material_name",
    "open_encrypted_footer",
    "open_plaintext_footer",
    "parse_key_material_file",
]
