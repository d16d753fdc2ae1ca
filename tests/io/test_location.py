"""_io.location: names of files (paths, URLs, filesystems) resolved, and directories, prefixes
and globs listed once to their Parquet files, hidden and metadata entries left out. The pure
rules first (no IO), then local directories and fsspec's memory filesystem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import parquet_bloom as pb
from parquet_bloom._io import location
from parquet_bloom._io.source import ByteSource

# -- pure rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("s3://bucket/key", True),
        ("https://host/x.parquet", True),
        ("file:///tmp/x", True),
        ("simplecache::s3://b/k", True),
        ("lake/part-0.parquet", False),
        ("/abs/path", False),
        ("C:\\data\\x.parquet", False),
        ("weird:name", False),
    ],
)
def test_urls_are_told_from_paths(text: str, url: bool) -> None:
    assert location.is_url(text) is url


@pytest.mark.parametrize(
    ("protocol", "extra"),
    [
        ("s3", "s3"),
        ("gs", "gcs"),
        ("gcs", "gcs"),
        ("abfs", "azure"),
        ("abfss", "azure"),
        ("az", "azure"),
        ("http", "http"),
        ("HTTPS", "http"),
        ("ftp", "fsspec"),
    ],
)
def test_install_hints_name_the_extra(protocol: str, extra: str) -> None:
    assert location.install_hint(protocol) == f"pip install 'parquet-bloom[{extra}]'"


def test_glob_detection_and_split() -> None:
    assert not location.has_glob("lake/day=1/x.parquet")
    assert all(location.has_glob(p) for p in ("lake/*", "a?b", "x[0-9]"))
    assert location.split_glob("lake/day=*/x") == ("lake", "day=*/x")
    assert location.split_glob("bucket/t/**/*.parquet") == ("bucket/t", "**/*.parquet")
    assert location.split_glob("/*.parquet") == ("/", "*.parquet")
    assert location.split_glob("*.parquet") == ("", "*.parquet")
    assert location.split_glob("plain/path") == ("plain/path", "")


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("day=*", "day=1", True),
        ("day=*", "day=1/x", False),  # * stays inside one component
        ("*.parquet", "a.parquet", True),
        ("*.parquet", "d/a.parquet", False),
        ("**/*.parquet", "a/b/c.parquet", True),
        ("**/*.parquet", "c.parquet", True),
        ("part-?.parquet", "part-1.parquet", True),
        ("part-?.parquet", "part-12.parquet", False),
        ("day=[12]", "day=2", True),
        ("day=[!12]", "day=2", False),
        ("day=[!12]", "day=3", True),
        ("a[", "a[", True),  # an unclosed bracket is literal
        ("a.b", "axb", False),  # regex characters are literal
    ],
)
def test_globs_translate_per_component(pattern: str, path: str, matches: bool) -> None:
    assert bool(location.translate_glob(pattern).match(path)) is matches


@pytest.mark.parametrize(
    ("parts", "named", "hidden"),
    [
        (["part-0.parquet"], (), False),
        (["day=1", "part-0.parquet"], (), False),
        (["_delta_log", "0000.json"], (), True),
        (["_SUCCESS"], (), True),
        ([".part-0.parquet.crc"], (), True),
        ([".hoodie", "hoodie.properties"], (), True),
        (["day=1", "_temporary", "x.parquet"], (), True),
        (["_staging", "x.parquet"], ("_stag*",), False),  # named by the caller's glob
        (["_staging", "x.parquet"], ("*",), True),
    ],
)
def test_hidden_and_metadata_entries(
    parts: list[str], named: tuple[str, ...], hidden: bool
) -> None:
    assert location.is_hidden(parts, named) is hidden


# -- resolving -----------------------------------------------------------------------------------


def test_resolve_local_urls_and_filesystems(tmp_path: Path) -> None:
    assert location.resolve(str(tmp_path)) == (None, str(tmp_path))
    assert location.resolve(tmp_path.as_uri()) == (None, str(tmp_path))
    fs, path = location.resolve("memory://bucket/key")
    assert isinstance(fs, fsspec.AbstractFileSystem) and path == "/bucket/key"
    memory = fsspec.filesystem("memory")
    assert location.resolve("x/y", filesystem=memory) == (memory, "x/y")
    with pytest.raises(ValueError, match="storage_options= is for URLs"):
        location.resolve(str(tmp_path), storage_options={"anon": True})
    with pytest.raises(ValueError, match="not with filesystem="):
        location.resolve("x", filesystem=memory, storage_options={"anon": True})
    with pytest.raises(ValueError, match="nosuchproto://x"):
        location.resolve("nosuchproto://x")


def test_a_missing_backend_names_the_extra_to_install() -> None:
    # s3fs made unimportable in a fresh interpreter: the URL's error says what to install.
    code = (
        "import sys; sys.modules['s3fs'] = None\n"
        "import parquet_bloom as pb\n"
        "try:\n"
        "    pb.BloomFilterReader('s3://bucket/key.parquet')\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'parquet-bloom[s3]'" in out.stdout
    code = code.replace("sys.modules['s3fs']", "sys.modules['fsspec']")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "needs fsspec: pip install 'parquet-bloom[s3]'" in out.stdout


# -- listing -------------------------------------------------------------------------------------

# A table as Spark and Delta leave one: part files in partition directories, and the entries
# pyarrow's discovery skips.
_PARTS = ["day=1/part-0.parquet", "day=1/part-1.parquet", "day=2/part-0.parquet", "top.parquet"]
_HIDDEN = [
    "_delta_log/00000000000000000000.json",
    "_SUCCESS",
    "day=1/.part-0.parquet.crc",
    ".hoodie/hoodie.properties",
    "day=2/_temporary/0/part-9.parquet",
]


def _write_lake() -> dict[str, bytes]:
    table = pa.table({"x": [1, 2, 3]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    return {name: data for name in _PARTS} | dict.fromkeys(_HIDDEN, b"not parquet")


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    for name, data in _write_lake().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_local_directory_lists_its_parquet_files_only(lake: Path) -> None:
    entries = location.list_files(str(lake))
    assert [e.path for e in entries] == [str(lake / p) for p in sorted(_PARTS)]
    assert all(e.size == (lake / e.path).stat().st_size and e.filesystem is None for e in entries)
    assert location.list_files(str(lake) + "/") == entries
    # A glob: the directories it matches stand for the files under them.
    assert [e.path for e in location.list_files(f"{lake}/day=*/")] == [
        str(lake / p) for p in _PARTS[:3]
    ]
    assert [e.path for e in location.list_files(f"{lake}/*/part-0.parquet")] == [
        str(lake / "day=1/part-0.parquet"),
        str(lake / "day=2/part-0.parquet"),
    ]
    # A file stands for itself, hidden or not; a list is each name's files in turn.
    assert [e.path for e in location.list_files(str(lake / "_SUCCESS"))] == [str(lake / "_SUCCESS")]
    both = location.list_files([str(lake / "top.parquet"), f"{lake}/day=2"])
    assert [e.path for e in both] == [str(lake / "top.parquet"), str(lake / "day=2/part-0.parquet")]


def test_an_empty_listing_is_file_not_found(tmp_path: Path) -> None:
    (tmp_path / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="no Parquet files under"):
        location.list_files(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no Parquet files under"):
        location.list_files(f"{tmp_path}/day=*")
    with pytest.raises(NotADirectoryError):
        location.list_files(f"{tmp_path}/_SUCCESS/")


@pytest.fixture
def memory_lake() -> str:
    memory = fsspec.filesystem("memory")
    memory.pipe({f"/lake-test/{name}": data for name, data in _write_lake().items()})
    yield "memory://lake-test"
    memory.rm("/lake-test", recursive=True)


def test_fsspec_urls_list_once_with_sizes(memory_lake: str) -> None:
    calls: list[str] = []
    memory = fsspec.filesystem("memory")
    find = memory.find

    def counted(path: str, **kwargs: object) -> object:
        calls.append(path)
        return find(path, **kwargs)

    memory.find = counted  # type: ignore[method-assign]
    try:
        entries = location.list_files(memory_lake + "/")
        globbed = location.list_files(memory_lake + "/day=*/")
    finally:
        del memory.find
    assert calls == ["/lake-test", "/lake-test"]  # one listing of the root each
    assert [e.path for e in entries] == [f"/lake-test/{p}" for p in sorted(_PARTS)]
    assert entries[0].name == "memory:///lake-test/day=1/part-0.parquet"
    assert all(e.size == memory.size(e.path) and e.listed for e in entries)
    assert [e.path for e in globbed] == [f"/lake-test/{p}" for p in _PARTS[:3]]
    # A plain URL is one object, not listed; listing it finds a directory or a file.
    (plain,) = location.list_files(memory_lake + "/top.parquet")
    assert (plain.path, plain.size, plain.listed) == ("/lake-test/top.parquet", None, False)
    assert location.list_files(memory_lake, list_plain=True) == entries
    (file,) = location.list_files(memory_lake + "/top.parquet", list_plain=True)
    assert file.size == memory.size("/lake-test/top.parquet")


def test_pyarrow_filesystems_list_too(lake: Path) -> None:
    local = pafs.LocalFileSystem()
    entries = location.list_files(str(lake) + "/", filesystem=local)
    assert [e.path for e in entries] == [str(lake / p) for p in sorted(_PARTS)]
    assert all(e.filesystem is local and e.size for e in entries)
    (one,) = location.list_files(str(lake / "top.parquet"), filesystem=local, list_plain=True)
    assert one.size == (lake / "top.parquet").stat().st_size


def test_a_known_size_is_trusted(memory_lake: str) -> None:
    url = memory_lake + "/top.parquet"
    real = fsspec.filesystem("memory").size("/lake-test/top.parquet")
    with ByteSource(url) as source:
        assert source.size == real and source.name == url
    # A smaller size is what the file is taken to be; a larger one fails its first read.
    with ByteSource(url, size=real - 4) as source:
        assert source.size == real - 4
    with pytest.raises(pb.errors.CorruptFileError, match="short read") as err:
        pb.BloomFilterReader(url, size=real + 10)
    assert err.value.source == url
    with pytest.raises(TypeError, match="size must be an integer"):
        ByteSource(url, size=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size must be >= 0"):
        ByteSource(url, size=-1)


def test_a_directory_is_not_a_file(lake: Path, memory_lake: str) -> None:
    with pytest.raises(IsADirectoryError):
        ByteSource(str(lake))
    with pytest.raises(IsADirectoryError):
        pb.BloomFilterReader(memory_lake + "/day=1")


def test_the_reader_takes_urls(memory_lake: str, lake: Path) -> None:
    with pb.BloomFilterReader(memory_lake + "/top.parquet") as reader:
        assert reader.columns == ["x"]
    with pb.BloomFilterReader((lake / "top.parquet").as_uri()) as reader:
        assert reader.columns == ["x"] and reader.bytes_read > 0


def test_a_file_url_is_percent_decoded(tmp_path: Path) -> None:
    """Path.as_uri() encodes "=" and spaces; the file is the decoded path."""
    target = tmp_path / "region=us" / "a file.parquet"
    target.parent.mkdir()
    target.write_bytes(b"x")
    assert "%3D" in target.as_uri() or "%20" in target.as_uri()
    filesystem, path = location.resolve(target.as_uri())
    assert filesystem is None and path == str(target)
