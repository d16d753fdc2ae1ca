/* Optional compiled kernels: XXH64 of many values (the PLAIN strings of a page where they lie),
 * which values an RLE / bit-packed stream holds, Snappy pages decompressed, and inserts into
 * and probes of a split-block Bloom filter.
 *
 * The Python code in _xxh64.py, _pages.py and _sbbf.py is the reference and the fallback; these
 * loops do the same work in one pass per value instead of one numpy pass per step (or, for the
 * strings of a page, one Python loop iteration per value), and without holding the GIL, so two
 * threads building or probing filters run in parallel. parquet_bloom.kernels decides
 * whether they are used (not on big-endian machines, nor with PARQUET_BLOOM_PURE_PYTHON set).
 *
 * Every function checks that what it reads and writes lies inside the buffers it was given:
 * the bytes come from files, and a bad offset must be an exception, not a crash.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernels_probe.h"
#ifdef __linux__
#include <errno.h>
#include <fcntl.h> /* splice (Python.h asks for _GNU_SOURCE) */
#endif

/* On x86-64 with GCC or Clang, some loops have vector versions (AVX2, AVX-512), used where the
 * CPU has the instructions (checked when the module loads) and set_vector_path leaves them on. */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_VECTOR_PATHS 1
#include <immintrin.h>
#else
#define HAVE_VECTOR_PATHS 0
#endif
/* Whether the CPU has AVX2 (find, insert) and AVX-512 F and DQ (short strings' hashes), and
 * whether they are used (set_vector_path turns them off, so that the tests reach the scalar
 * loops too). */
static int avx2_available = 0, avx2_used = 0;
static int avx512_available = 0, avx512_used = 0;

/* XXH64 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md), seed 0: the hash of
 * docs/format-notes.md#the-hash. */
#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Little-endian loads (the module is used on little-endian machines only). */
static inline uint64_t load64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t load32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static inline uint64_t xxh_round(uint64_t acc, uint64_t lane) {
    acc += lane * P2;
    return rotl64(acc, 31) * P1;
}

static inline uint64_t xxh_avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    return h ^ (h >> 32);
}

static inline uint64_t xxh_merge(uint64_t h, uint64_t acc) {
    h ^= xxh_round(0, acc);
    return h * P1 + P4;
}

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Inlined where it is called, so that a loop over values of one known length (4 or 8 bytes:
 * INT32, INT64, FLOAT, DOUBLE) compiles to that length's few steps, without the loops. */
static ALWAYS_INLINE uint64_t xxh64(const uint8_t *p, size_t length) {
    const uint8_t *end = p + length;
    uint64_t h;
    if (length >= 32) {
        const uint8_t *last_stripe = end - 32;
        uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;
        do {
            v1 = xxh_round(v1, load64(p));
            v2 = xxh_round(v2, load64(p + 8));
            v3 = xxh_round(v3, load64(p + 16));
            v4 = xxh_round(v4, load64(p + 24));
            p += 32;
        } while (p <= last_stripe);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xxh_merge(h, v1);
        h = xxh_merge(h, v2);
        h = xxh_merge(h, v3);
        h = xxh_merge(h, v4);
    } else {
        h = P5;
    }
    h += (uint64_t)length;
    for (; p + 8 <= end; p += 8) {
        h ^= xxh_round(0, load64(p));
        h = rotl64(h, 27) * P1 + P4;
    }
    if (p + 4 <= end) {
        h ^= (uint64_t)load32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; p++) {
        h ^= (uint64_t)(*p) * P5;
        h = rotl64(h, 11) * P1;
    }
    return xxh_avalanche(h);
}

/* xxh64_rows(data, offset, stride, width, count, out): out[i] = XXH64 of the width bytes at
 * data[offset + i * stride], for i < count. */
static PyObject *xxh64_rows(PyObject *module, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t offset, stride, width, count;
    if (!PyArg_ParseTuple(args, "y*nnnnw*:xxh64_rows", &data, &offset, &stride, &width, &count,
                          &out))
        return NULL;
    PyObject *result = NULL;
    if (offset < 0 || stride < 0 || width < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "xxh64_rows: negative offset, stride, width or count");
    } else if (out.len / 8 < count) {
        PyErr_Format(PyExc_ValueError, "xxh64_rows: %zd hashes do not fit in %zd bytes", count,
                     out.len);
    } else if (count > 0 && (width > data.len - offset || offset > data.len ||
                             (count > 1 && stride > 0 &&
                              count - 1 > (data.len - offset - width) / stride))) {
        PyErr_Format(PyExc_ValueError,
                     "xxh64_rows: %zd rows of %zd bytes every %zd from %zd run past the %zd "
                     "bytes of the buffer",
                     count, width, stride, offset, data.len);
    } else {
        const uint8_t *base = (const uint8_t *)data.buf + offset;
        uint8_t *hashes = (uint8_t *)out.buf; /* any alignment: memcpy */
#define HASH_ROWS(WIDTH)                                                                   \
    for (Py_ssize_t i = 0; i < count; i++) {                                                \
        uint64_t h = xxh64(base + i * stride, (WIDTH));                                     \
        memcpy(hashes + 8 * i, &h, 8);                                                      \
    }
        Py_BEGIN_ALLOW_THREADS
        if (width == 8)
            HASH_ROWS(8)
        else if (width == 4)
            HASH_ROWS(4)
        else
            HASH_ROWS((size_t)width)
        Py_END_ALLOW_THREADS
#undef HASH_ROWS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* xxh64_spans(data, starts, lengths, out): out[i] = XXH64 of data[starts[i]:starts[i] +
 * lengths[i]]; starts and lengths are int64 buffers of one length. */
static PyObject *xxh64_spans(PyObject *module, PyObject *args) {
    Py_buffer data, starts, lengths, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*:xxh64_spans", &data, &starts, &lengths, &out))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = starts.len / 8;
    if (starts.len % 8 || lengths.len != starts.len) {
        PyErr_SetString(PyExc_ValueError,
                        "xxh64_spans: starts and lengths must be int64 buffers of one length");
    } else if (out.len / 8 < count) {
        PyErr_Format(PyExc_ValueError, "xxh64_spans: %zd hashes do not fit in %zd bytes", count,
                     out.len);
    } else {
        const uint8_t *bytes = (const uint8_t *)data.buf;
        const uint8_t *s = (const uint8_t *)starts.buf, *n = (const uint8_t *)lengths.buf;
        uint8_t *hashes = (uint8_t *)out.buf; /* any alignment: memcpy */
        int64_t size = (int64_t)data.len;
        Py_ssize_t bad = -1;
        int64_t start = 0, length = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < count; i++) {
            memcpy(&start, s + 8 * i, 8);
            memcpy(&length, n + 8 * i, 8);
            if (start < 0 || length < 0 || start > size || length > size - start) {
                bad = i;
                break;
            }
            uint64_t h = xxh64(bytes + start, (size_t)length);
            memcpy(hashes + 8 * i, &h, 8);
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "xxh64_spans: span %zd (%lld bytes at %lld) lies outside the %zd bytes "
                         "of the buffer",
                         bad, (long long)length, (long long)start, data.len);
        } else {
            result = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&out);
    return result;
}

/* XXH64 of a value of fewer than 16 bytes with at least one readable byte after it: xxh64()'s
 * steps, its last 0-3 one-byte steps without branches (each computed, then kept or not). The
 * lengths of consecutive strings vary at random, and a mispredicted branch costs more than the
 * steps it would skip (docs/performance.md, the table rewrite). */
static ALWAYS_INLINE uint64_t xxh64_short(const uint8_t *p, size_t length) {
    uint64_t h = P5 + (uint64_t)length, step;
    if (length >= 8) {
        h ^= xxh_round(0, load64(p));
        h = rotl64(h, 27) * P1 + P4;
        p += 8;
    }
    if (length & 4) {
        h ^= (uint64_t)load32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    size_t left = length & 3; /* p[0] is read even when 0 are left: the byte after the value */
    step = rotl64(h ^ ((uint64_t)p[0] * P5), 11) * P1;
    h = left > 0 ? step : h;
    step = rotl64(h ^ ((uint64_t)p[left > 1] * P5), 11) * P1;
    h = left > 1 ? step : h;
    step = rotl64(h ^ ((uint64_t)p[left > 2 ? 2 : 0] * P5), 11) * P1;
    h = left > 2 ? step : h;
    return xxh_avalanche(h);
}

/* The hash of a value of a page: xxh64_short where the value is short and a byte follows it in
 * the page (value_end < size), xxh64 otherwise. */
static ALWAYS_INLINE uint64_t xxh64_value(const uint8_t *value, uint32_t length,
                                          Py_ssize_t value_end, Py_ssize_t size) {
    return length < 16 && value_end < size ? xxh64_short(value, length) : xxh64(value, length);
}

#if HAVE_VECTOR_PATHS
#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq")))

TARGET_AVX512 static inline __m512i mul_avx512(__m512i a, uint64_t c) {
    return _mm512_mullo_epi64(a, _mm512_set1_epi64((long long)c));
}

/* xxh64_short of eight values at once, a 64-bit lane each: each value under 16 bytes, with 16
 * bytes readable from its start. Its first 16 bytes are two gathered words; each of xxh64's
 * steps is computed in every lane and kept in those whose value has the bytes for it (the
 * 8-byte step where the length has bit 3, the 4-byte step where it has bit 2, the k-th one-byte
 * step where its last two bits exceed k). With the walk, 3.7 ns a key of 11-12 bytes against 5.2
 * one at a time (docs/performance.md, the table rewrite). */
TARGET_AVX512 static void xxh64_short8_avx512(const uint8_t *bytes, const int64_t *starts,
                                              const int64_t *lengths, uint8_t *out) {
    const __m512i start = _mm512_loadu_si512(starts), length = _mm512_loadu_si512(lengths);
    const __m512i first = _mm512_i64gather_epi64(start, (const void *)bytes, 1);
    const __m512i second =
        _mm512_i64gather_epi64(_mm512_add_epi64(start, _mm512_set1_epi64(8)), bytes, 1);
    __m512i h = _mm512_add_epi64(_mm512_set1_epi64((long long)P5), length), step;
    const __mmask8 has8 = _mm512_test_epi64_mask(length, _mm512_set1_epi64(8));
    step = mul_avx512(_mm512_rol_epi64(mul_avx512(first, P2), 31), P1);
    step = _mm512_add_epi64(mul_avx512(_mm512_rol_epi64(_mm512_xor_si512(h, step), 27), P1),
                            _mm512_set1_epi64((long long)P4));
    h = _mm512_mask_blend_epi64(has8, h, step);
    /* The rest of the value lies in the word after the 8-byte step, if there was one. */
    const __m512i rest = _mm512_mask_blend_epi64(has8, first, second);
    const __mmask8 has4 = _mm512_test_epi64_mask(length, _mm512_set1_epi64(4));
    step = mul_avx512(_mm512_and_si512(rest, _mm512_set1_epi64(0xFFFFFFFFLL)), P1);
    step = _mm512_add_epi64(mul_avx512(_mm512_rol_epi64(_mm512_xor_si512(h, step), 23), P2),
                            _mm512_set1_epi64((long long)P3));
    h = _mm512_mask_blend_epi64(has4, h, step);
    /* The last bytes: after the 4-byte step, if there was one. */
    const __m512i tail = _mm512_srlv_epi64(
        rest, _mm512_slli_epi64(_mm512_and_si512(length, _mm512_set1_epi64(4)), 3));
    const __m512i left = _mm512_and_si512(length, _mm512_set1_epi64(3));
    for (int k = 0; k < 3; k++) {
        __m512i byte = _mm512_and_si512(_mm512_srli_epi64(tail, 8 * k), _mm512_set1_epi64(0xFF));
        step = mul_avx512(_mm512_rol_epi64(_mm512_xor_si512(h, mul_avx512(byte, P5)), 11), P1);
        h = _mm512_mask_blend_epi64(_mm512_cmpgt_epu64_mask(left, _mm512_set1_epi64(k)), h, step);
    }
    h = mul_avx512(_mm512_xor_si512(h, _mm512_srli_epi64(h, 33)), P2);
    h = mul_avx512(_mm512_xor_si512(h, _mm512_srli_epi64(h, 29)), P3);
    _mm512_storeu_si512(out, _mm512_xor_si512(h, _mm512_srli_epi64(h, 32)));
}

/* xxh64_byte_arrays' walk eight values at a time, each group hashed by xxh64_short8_avx512
 * where its values are all short and 16 bytes are readable from the last one's start (else one
 * by one). Stops before a group in which a value runs past the end (the scalar walk reports
 * it); returns the values done, *position the bytes they took. */
TARGET_AVX512 static Py_ssize_t byte_arrays_avx512(const uint8_t *bytes, Py_ssize_t size,
                                                   Py_ssize_t count, uint8_t *hashes,
                                                   Py_ssize_t *position) {
    int64_t starts[8], lengths[8];
    Py_ssize_t done = 0, at = *position;
    while (count - done >= 8) {
        Py_ssize_t walk = at;
        int all_short = 1, k;
        for (k = 0; k < 8; k++) {
            if (size - walk < 4)
                break;
            uint32_t length = load32(bytes + walk);
            walk += 4;
            if ((uint64_t)length > (uint64_t)(size - walk))
                break;
            starts[k] = (int64_t)walk;
            lengths[k] = (int64_t)length;
            all_short &= length < 16;
            walk += (Py_ssize_t)length;
        }
        if (k < 8)
            break;
        if (all_short && size - (Py_ssize_t)starts[7] >= 16) {
            xxh64_short8_avx512(bytes, starts, lengths, hashes + 8 * done);
        } else {
            for (k = 0; k < 8; k++) {
                uint64_t h = xxh64_value(bytes + starts[k], (uint32_t)lengths[k],
                                         (Py_ssize_t)(starts[k] + lengths[k]), size);
                memcpy(hashes + 8 * (done + k), &h, 8);
            }
        }
        done += 8;
        at = walk;
    }
    *position = at;
    return done;
}
#endif

/* xxh64_byte_arrays(data, count, out) -> bytes used: out[i] = XXH64 of the i-th of the `count`
 * PLAIN BYTE_ARRAY values at the start of data (Encodings.md, "Plain": a 4-byte little-endian
 * length, then that many bytes), hashed where they lie as the walk finds them. */
static PyObject *xxh64_byte_arrays(PyObject *module, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*nw*:xxh64_byte_arrays", &data, &count, &out))
        return NULL;
    PyObject *result = NULL;
    if (count < 0 || out.len / 8 < count) {
        PyErr_Format(PyExc_ValueError, "xxh64_byte_arrays: %zd hashes do not fit in %zd bytes",
                     count, out.len);
    } else {
        const uint8_t *bytes = (const uint8_t *)data.buf;
        uint8_t *hashes = (uint8_t *)out.buf; /* any alignment: memcpy */
        Py_ssize_t size = data.len, position = 0, bad = -1, i = 0;
        Py_BEGIN_ALLOW_THREADS
#if HAVE_VECTOR_PATHS
        if (avx512_used)
            i = byte_arrays_avx512(bytes, size, count, hashes, &position);
#endif
        for (; i < count; i++) {
            if (size - position < 4) {
                bad = i;
                break;
            }
            uint32_t length = load32(bytes + position);
            position += 4;
            if ((uint64_t)length > (uint64_t)(size - position)) {
                bad = i;
                break;
            }
            const uint8_t *value = bytes + position;
            position += (Py_ssize_t)length;
            uint64_t h = xxh64_value(value, length, position, size);
            memcpy(hashes + 8 * i, &h, 8);
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "xxh64_byte_arrays: value %zd of %zd runs past the %zd bytes of the "
                         "buffer",
                         bad, count, size);
        } else {
            result = PyLong_FromSsize_t(position);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* rle_scan(data, bit_width, count, marks, target) -> (status, a, b): one pass over the first
 * `count` values of an RLE / bit-packing hybrid stream (Encodings.md, "RLE"), the loop of
 * _pages.rle_hybrid: marks[v] = 1 for each value v (when marks is not empty), and how many
 * values equal `target`. Statuses, in the order _pages reports them (a stream that does not
 * parse first, then values outside marks):
 *   0: done; a = entries of marks newly set, b = values equal to target;
 *   1: the stream ends after a values;  2: a run header longer than 5 bytes;
 *   3: an RLE run of value a, wider than bit_width;
 *   4: a bit-packed run of a groups with b bytes left in the stream (cut short);
 *   5: value a (the first RLE run's, else the largest bit-packed one) outside marks.
 * On a status other than 0, marks may be partly set. */
static PyObject *rle_scan(PyObject *module, PyObject *args) {
    Py_buffer data, marks;
    int bit_width;
    Py_ssize_t count;
    long long target;
    if (!PyArg_ParseTuple(args, "y*inw*L:rle_scan", &data, &bit_width, &count, &marks, &target))
        return NULL;
    if (bit_width < 0 || bit_width > 32 || count < 0) {
        PyErr_Format(PyExc_ValueError, "rle_scan: bit width %d and count %zd", bit_width, count);
        PyBuffer_Release(&data);
        PyBuffer_Release(&marks);
        return NULL;
    }
    const uint8_t *bytes = (const uint8_t *)data.buf;
    uint8_t *mark = (uint8_t *)marks.buf;
    const uint64_t size = (uint64_t)data.len, num_marks = (uint64_t)marks.len;
    const uint64_t value_bytes = ((uint64_t)bit_width + 7) / 8;
    const uint64_t mask = bit_width == 32 ? 0xFFFFFFFFULL : ((1ULL << bit_width) - 1);
    const int marking = num_marks > 0;
    uint64_t pos = 0, remaining = (uint64_t)count, newly = 0, hits = 0;
    int64_t bad_run = -1, bad_packed = -1;
    long long status = 0, a = 0, b = 0;
    Py_BEGIN_ALLOW_THREADS
    while (remaining > 0) {
        uint64_t header = 0;
        int shift = 0;
        for (;;) { /* ULEB128 */
            if (pos >= size) {
                status = 1;
                a = (long long)((uint64_t)count - remaining);
                goto done;
            }
            uint8_t byte = bytes[pos++];
            header |= (uint64_t)(byte & 0x7F) << shift;
            if (byte < 0x80)
                break;
            shift += 7;
            if (shift > 28) {
                status = 2;
                goto done;
            }
        }
        uint64_t groups = header >> 1, taken;
        if ((header & 1) && bit_width == 0) { /* bit-packed zeros take no bytes */
            taken = groups * 8 < remaining ? groups * 8 : remaining;
            if (marking) {
                newly += !mark[0];
                mark[0] = 1;
            }
            if (target == 0)
                hits += taken;
        } else if (header & 1) { /* bit-packed: groups of 8 values, bit_width bytes each */
            taken = groups * 8 < remaining ? groups * 8 : remaining;
            uint64_t need = (taken * (uint64_t)bit_width + 7) / 8;
            if (need > size - pos) {
                status = 1;
                a = (long long)((uint64_t)count - remaining);
                goto done;
            }
            if (groups * (uint64_t)bit_width > size - pos) {
                status = 4;
                a = (long long)groups;
                b = (long long)(size - pos);
                goto done;
            }
            const uint8_t *run = bytes + pos;
/* Each value of the run to STATEMENT. Its bits lie within the run's need bytes: all but the
 * last few values load 8 bytes at once, those the bytes left. */
#define EACH_PACKED(STATEMENT)                                                                \
    for (uint64_t i = 0; i < taken; i++) {                                                    \
        uint64_t bit = i * (uint64_t)bit_width, at = bit >> 3, word = 0;                      \
        if (at + 8 <= need)                                                                   \
            word = load64(run + at);                                                          \
        else                                                                                  \
            memcpy(&word, run + at, need - at);                                               \
        uint64_t value = (word >> (bit & 7)) & mask;                                          \
        STATEMENT;                                                                            \
    }
#define COUNT(value) (hits += (long long)(value) == target)
#define MARK(value)                                                                           \
    if ((value) < num_marks) {                                                                \
        newly += !mark[value];                                                                \
        mark[value] = 1;                                                                      \
    } else if ((int64_t)(value) > bad_packed) {                                               \
        bad_packed = (int64_t)(value);                                                        \
    }
            /* A dictionary's indices are marked, definition levels counted: a loop for each. */
            if (!marking)
                EACH_PACKED(COUNT(value))
            else if (target < 0)
                EACH_PACKED(MARK(value))
            else
                EACH_PACKED(COUNT(value); MARK(value))
#undef EACH_PACKED
#undef COUNT
#undef MARK
            pos += groups * (uint64_t)bit_width;
        } else { /* RLE: one value, repeated */
            taken = groups < remaining ? groups : remaining;
            if (value_bytes > size - pos) {
                status = 1;
                a = (long long)((uint64_t)count - remaining);
                goto done;
            }
            uint64_t value = 0;
            memcpy(&value, bytes + pos, value_bytes);
            if (value >> bit_width) {
                status = 3;
                a = (long long)value;
                goto done;
            }
            pos += value_bytes;
            if ((long long)value == target)
                hits += taken;
            if (marking) {
                if (value < num_marks) {
                    newly += !mark[value];
                    mark[value] = 1;
                } else if (bad_run < 0) {
                    bad_run = (int64_t)value;
                }
            }
        }
        remaining -= taken;
    }
    if (bad_run >= 0) {
        status = 5;
        a = bad_run;
    } else if (bad_packed >= 0) {
        status = 5;
        a = bad_packed;
    } else {
        a = (long long)newly;
        b = (long long)hits;
    }
done:
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&marks);
    return Py_BuildValue("(LLL)", status, a, b);
}

/* Snappy's raw block format (docs/format-notes.md#snappy), the codec of most Parquet pages:
 * a varint of the decompressed length, then elements, each a literal (bytes to append) or a
 * copy (bytes to repeat from earlier in the output). snappy_raw's statuses: */
#define SNAPPY_OK 0
#define SNAPPY_TRUNCATED 1  /* an element runs past the end of the input */
#define SNAPPY_BAD_OFFSET 2 /* a copy from 0 bytes back, or from before the output's start */
#define SNAPPY_TOO_LONG 3   /* the elements make more bytes than the stated length */
#define SNAPPY_TOO_SHORT 4  /* ... or fewer */
/* Where the output buffer has this much room past an element, its bytes are moved 16 or 8 at a
 * time, writing up to this many bytes past the element's end (which the next elements
 * overwrite); near the buffer's end, exactly. */
#define SNAPPY_SLOP 16

/* Append `length` bytes from `distance` back (1 <= distance <= bytes already out), as if one
 * byte at a time: a copy may overlap itself (distance 1 repeats one byte). With room, 8-byte
 * words, each read from bytes already written: a distance under 8 is first widened to the
 * smallest multiple of it that is at least 8 (the bytes repeat with that period too). */
static inline void snappy_copy(uint8_t *op, size_t distance, size_t length, size_t room) {
    const uint8_t *src = op - distance;
    if (room < length + SNAPPY_SLOP) {
        for (size_t i = 0; i < length; i++)
            op[i] = src[i];
        return;
    }
    size_t done = 0;
    if (distance < 8) {
        for (; done < 8; done++) /* (length may be less: the slop) */
            op[done] = src[done];
        size_t period = distance;
        while (period < 8)
            period += distance;
        distance = period;
    }
    for (; done < length; done += 8)
        memcpy(op + done, op + done - distance, 8);
}

/* Decompress the elements in [ip, end) into out[0:length]; out has `capacity` >= length bytes,
 * those past `length` free for the slop. */
static int snappy_raw(const uint8_t *ip, const uint8_t *end, uint8_t *out, size_t length,
                      size_t capacity) {
    uint8_t *op = out;
    const uint8_t *stop = out + length;
    while (ip < end) {
        uint32_t tag = *ip++;
        size_t size, distance;
        switch (tag & 3) {
        case 0: /* literal: 1 + (tag >> 2) bytes, or past 60, a length in the next 1-4 bytes */
            size = (tag >> 2) + 1;
            if (size > 60) {
                size_t extra = size - 60;
                if ((size_t)(end - ip) < extra)
                    return SNAPPY_TRUNCATED;
                uint32_t value = 0;
                memcpy(&value, ip, extra); /* little-endian, as the machine */
                size = (uint32_t)(value + 1u); /* in 32 bits, as Google's: 2^32 - 1 + 1 is 0 */
                ip += extra;
            }
            if ((size_t)(end - ip) < size)
                return SNAPPY_TRUNCATED;
            if ((size_t)(stop - op) < size)
                return SNAPPY_TOO_LONG;
            if (size <= 16 && end - ip >= 16 && capacity - (size_t)(op - out) >= SNAPPY_SLOP)
                memcpy(op, ip, 16);
            else
                memcpy(op, ip, size);
            op += size;
            ip += size;
            continue;
        case 1: /* copy: 4-11 bytes, an 11-bit distance (3 bits in the tag) */
            if (ip >= end)
                return SNAPPY_TRUNCATED;
            size = 4 + ((tag >> 2) & 7);
            distance = ((size_t)(tag >> 5) << 8) | *ip++;
            break;
        case 2: /* copy: 1-64 bytes, a 16-bit distance */
            if (end - ip < 2)
                return SNAPPY_TRUNCATED;
            size = 1 + (tag >> 2);
            distance = (size_t)ip[0] | ((size_t)ip[1] << 8);
            ip += 2;
            break;
        default: /* copy: 1-64 bytes, a 32-bit distance */
            if (end - ip < 4)
                return SNAPPY_TRUNCATED;
            size = 1 + (tag >> 2);
            distance = load32(ip);
            ip += 4;
            break;
        }
        if (distance == 0 || distance > (size_t)(op - out))
            return SNAPPY_BAD_OFFSET;
        if ((size_t)(stop - op) < size)
            return SNAPPY_TOO_LONG;
        snappy_copy(op, distance, size, capacity - (size_t)(op - out));
        op += size;
    }
    return op == stop ? SNAPPY_OK : SNAPPY_TOO_SHORT;
}

/* snappy_decompress(data, out, length) -> None: decompress the raw Snappy block `data`, which
 * must say it holds `length` bytes, into out[0:length] (the rest of out, if any, is scratch).
 * Raises ValueError, before writing, for a stated length other than `length` or an `out`
 * shorter; and for elements that do not decode to exactly that many bytes (out may then be
 * partly written). */
static PyObject *snappy_decompress(PyObject *module, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y*w*n:snappy_decompress", &data, &out, &length))
        return NULL;
    const uint8_t *ip = (const uint8_t *)data.buf, *end = ip + data.len;
    uint64_t stated = 0;
    int shift = 0, status = -1;
    while (ip < end && shift <= 28) { /* a varint of at most 5 bytes, 32 bits (the fifth at
                                         * most 0x0F, as Google's library reads it) */
        uint8_t byte = *ip++;
        if (shift == 28 && byte > 0x0F)
            break;
        stated |= (uint64_t)(byte & 0x7F) << shift;
        shift += 7;
        if (byte < 0x80) {
            status = SNAPPY_OK;
            break;
        }
    }
    if (status != SNAPPY_OK) {
        PyErr_SetString(PyExc_ValueError, "snappy_decompress: no length at the start");
    } else if (length < 0 || stated != (uint64_t)length || out.len < length) {
        PyErr_Format(PyExc_ValueError,
                     "snappy_decompress: the data holds %llu bytes; %zd expected, %zd of room",
                     (unsigned long long)stated, length, out.len);
        status = -1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = snappy_raw(ip, end, (uint8_t *)out.buf, (size_t)length, (size_t)out.len);
        Py_END_ALLOW_THREADS
        if (status != SNAPPY_OK) {
            static const char *const why[] = {
                "",
                "an element runs past the end of the data",
                "a copy from before the start of the output",
                "the elements make more bytes than stated",
                "the elements make fewer bytes than stated",
            };
            PyErr_Format(PyExc_ValueError, "snappy_decompress: %s", why[status]);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (status != SNAPPY_OK)
        return NULL;
    Py_RETURN_NONE;
}

/* docs/format-notes.md#sbbf-layout: the eight salts, one per 32-bit word of a block. */
static const uint32_t SALT[8] = {0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
                                 0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U};

/* Each hash's block is a cache miss in a filter larger than the cache: ask for the block of
 * the hash this many ahead while setting this one's bits. */
#ifndef PREFETCH_DISTANCE
#define PREFETCH_DISTANCE 16
#endif
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_FOR_WRITE(address) __builtin_prefetch((address), 1)
#else
#define PREFETCH_FOR_WRITE(address) ((void)(address))
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_FOR_READ(address) __builtin_prefetch((address), 0)
#else
#define PREFETCH_FOR_READ(address) ((void)(address))
#endif

/* Whether a hash's eight bits are all set in the z blocks of `filter`: 1 or 0 (insert's
 * block and bits). */
static inline uint8_t find_one(const uint32_t *filter, uint64_t z, uint64_t x) {
    uint32_t key = (uint32_t)x;
    const uint32_t *block = filter + 8 * (((x >> 32) * z) >> 32);
    uint32_t missing = 0;
    for (int j = 0; j < 8; j++) {
        uint32_t word = load32((const uint8_t *)(block + j)); /* at any address */
        missing |= ~word & ((uint32_t)1 << ((key * SALT[j]) >> 27));
    }
    return missing == 0;
}

/* The loop of insert and find: STATEMENT for each hash i, asking for the block of the hash
 * PREFETCH_DISTANCE ahead meanwhile (with PREFETCH: for writing, or for reading). */
#define EACH_HASH(PREFETCH, STATEMENT)                                                        \
    for (Py_ssize_t i = 0; i < count; i++) {                                                   \
        if (i + PREFETCH_DISTANCE < count) {                                                   \
            uint64_t ahead = load64(h + 8 * (i + PREFETCH_DISTANCE));                          \
            PREFETCH(filter + 8 * (((ahead >> 32) * z) >> 32));                                \
        }                                                                                      \
        STATEMENT;                                                                             \
    }

/* The probe loop: found[i] = PROBE(hash i). */
#define FIND_LOOP(PROBE)                                                                      \
    EACH_HASH(PREFETCH_FOR_READ, found[i] = PROBE(filter, z, load64(h + 8 * i)))

static void find_scalar(const uint32_t *filter, uint64_t z, const uint8_t *h, uint8_t *found,
                        Py_ssize_t count) {
    FIND_LOOP(find_one)
}

/* On x86-64 with AVX2 (checked when the module loads) a block is one 256-bit register: the
 * eight lanes' bits in one multiply and two shifts, tested against the block in one
 * instruction, where the scalar probe takes eight of each. Probing a filter that fits in the
 * caches is bound by those instructions, not by memory: 3x faster (docs/performance.md). */
#if HAVE_VECTOR_PATHS

/* The bits hash x sets in its block, as eight 32-bit lanes: each lane's salt times the low
 * half, its top five bits naming the bit. */
__attribute__((target("avx2"))) static inline __m256i block_bits_avx2(uint64_t x) {
    const __m256i salt =
        _mm256_setr_epi32((int)SALT[0], (int)SALT[1], (int)SALT[2], (int)SALT[3],
                          (int)SALT[4], (int)SALT[5], (int)SALT[6], (int)SALT[7]);
    __m256i lanes = _mm256_mullo_epi32(_mm256_set1_epi32((int)(uint32_t)x), salt);
    return _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_srli_epi32(lanes, 27));
}

__attribute__((target("avx2"))) static inline uint8_t find_one_avx2(const uint32_t *filter,
                                                                    uint64_t z, uint64_t x) {
    const uint32_t *block = filter + 8 * (((x >> 32) * z) >> 32);
    /* testc: 1 when every bit of the hash's is set in the block */
    return (uint8_t)_mm256_testc_si256(_mm256_loadu_si256((const __m256i *)block),
                                       block_bits_avx2(x));
}

__attribute__((target("avx2"))) static void find_avx2(const uint32_t *filter, uint64_t z,
                                                      const uint8_t *h, uint8_t *found,
                                                      Py_ssize_t count) {
    FIND_LOOP(find_one_avx2)
}
#endif

/* The insert loop: SET(hash i) sets its bits. */
#define INSERT_LOOP(SET) EACH_HASH(PREFETCH_FOR_WRITE, SET(filter, z, load64(h + 8 * i)))

static inline void insert_one(uint32_t *filter, uint64_t z, uint64_t x) {
    uint32_t key = (uint32_t)x;
    uint32_t *block = filter + 8 * (((x >> 32) * z) >> 32);
    for (int j = 0; j < 8; j++)
        block[j] |= (uint32_t)1 << ((key * SALT[j]) >> 27);
}

static void insert_scalar(uint32_t *filter, uint64_t z, const uint8_t *h, Py_ssize_t count) {
    INSERT_LOOP(insert_one)
}

#if HAVE_VECTOR_PATHS
/* The hash's bits OR-ed into its block in one load and one store. */
__attribute__((target("avx2"))) static inline void insert_one_avx2(uint32_t *filter, uint64_t z,
                                                                   uint64_t x) {
    __m256i *block = (__m256i *)(filter + 8 * (((x >> 32) * z) >> 32));
    _mm256_storeu_si256(block, _mm256_or_si256(_mm256_loadu_si256(block), block_bits_avx2(x)));
}

__attribute__((target("avx2"))) static void insert_avx2(uint32_t *filter, uint64_t z,
                                                        const uint8_t *h, Py_ssize_t count) {
    INSERT_LOOP(insert_one_avx2)
}
#endif

/* KERNEL's AVX2 loop where the CPU has it and set_vector_path left it on, else its scalar
 * loop, without the GIL. Which one is read before the GIL is let go (set_vector_path changes
 * it under the GIL). */
#if HAVE_VECTOR_PATHS
#define RUN_LOOP(KERNEL, ...)                                                                 \
    do {                                                                                      \
        int vector_ = avx2_used;                                                              \
        Py_BEGIN_ALLOW_THREADS                                                                \
        if (vector_)                                                                          \
            KERNEL##_avx2(__VA_ARGS__);                                                       \
        else                                                                                  \
            KERNEL##_scalar(__VA_ARGS__);                                                     \
        Py_END_ALLOW_THREADS                                                                  \
    } while (0)
#else
#define RUN_LOOP(KERNEL, ...)                                                                 \
    do {                                                                                      \
        Py_BEGIN_ALLOW_THREADS                                                                \
        KERNEL##_scalar(__VA_ARGS__);                                                         \
        Py_END_ALLOW_THREADS                                                                  \
    } while (0)
#endif

/* Whether `words` is a filter of whole blocks and `hashes` whole 64-bit hashes; if not, sets a
 * ValueError naming the kernel and returns 0. */
static int filter_and_hashes_ok(const char *kernel, const Py_buffer *words,
                                const Py_buffer *hashes) {
    if (words->len == 0 || words->len % 32) {
        PyErr_Format(PyExc_ValueError, "%s: a filter of %zd bytes is not whole blocks", kernel,
                     words->len);
        return 0;
    }
    if (hashes->len % 8) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes are not whole 64-bit hashes", kernel,
                     hashes->len);
        return 0;
    }
    return 1;
}

/* insert(words, hashes): set each hash's eight bits in the filter whose blocks of eight
 * uint32 words are `words` (docs/format-notes.md#sbbf-layout: block ((h >> 32) * z) >> 32, which is always
 * below z; in word i, bit (key * SALT[i]) >> 27 of the low half key). */
static PyObject *insert(PyObject *module, PyObject *args) {
    Py_buffer words, hashes;
    if (!PyArg_ParseTuple(args, "w*y*:insert", &words, &hashes))
        return NULL;
    PyObject *result = NULL;
    if (filter_and_hashes_ok("insert", &words, &hashes)) {
        uint32_t *filter = (uint32_t *)words.buf;
        const uint8_t *h = (const uint8_t *)hashes.buf;
        uint64_t z = (uint64_t)(words.len / 32);
        RUN_LOOP(insert, filter, z, h, hashes.len / 8);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&words);
    PyBuffer_Release(&hashes);
    return result;
}

/* find(words, hashes, out): out[i] = 1 if all eight bits of hash i are set in the filter whose
 * blocks of eight uint32 words are `words` (it might have been inserted), else 0 (it certainly
 * was not); `out` holds one byte per hash (a numpy bool array). */
static PyObject *find(PyObject *module, PyObject *args) {
    Py_buffer words, hashes, out;
    if (!PyArg_ParseTuple(args, "y*y*w*:find", &words, &hashes, &out))
        return NULL;
    PyObject *result = NULL;
    if (!filter_and_hashes_ok("find", &words, &hashes)) {
        /* the error is set */
    } else if (out.len != hashes.len / 8) {
        PyErr_Format(PyExc_ValueError,
                     "find: %zd hashes need an output of %zd bytes (one a hash), not %zd",
                     hashes.len / 8, hashes.len / 8, out.len);
    } else {
        const uint32_t *filter = (const uint32_t *)words.buf;
        const uint8_t *h = (const uint8_t *)hashes.buf;
        uint8_t *found = (uint8_t *)out.buf;
        uint64_t z = (uint64_t)(words.len / 32);
        RUN_LOOP(find, filter, z, h, found, hashes.len / 8);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&words);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&out);
    return result;
}

/* set_vector_path(use) -> bool: find and insert use their AVX2 loops if `use` is true and the
 * CPU has AVX2, the scalar loops otherwise; returns whether they now use the AVX2 loops. */
static PyObject *set_vector_path(PyObject *module, PyObject *arg) {
    int use = PyObject_IsTrue(arg);
    if (use < 0)
        return NULL;
    avx2_used = use && avx2_available;
    avx512_used = use && avx512_available;
    return PyBool_FromLong(avx2_used);
}

/* Hudi's record-key filters (docs/hudi.md#the-hash): Hadoop's MurmurHash2 (m = 0x5bd1e995,
 * r = 24, h = seed ^ length, little-endian body words, the tail bytes read as Java bytes, so
 * SIGN-EXTENDED before they are shifted in), chained: a key's hash i is murmur(key, seed = hash
 * i - 1), from seed 0. A body word's mixed value and the tail's xor do not depend on the seed,
 * so they are computed once per key, and each hash of the chain only folds them into h. The
 * chain is sequential, so HUDI_LANES keys of one length (record keys often share one) are
 * chained side by side for the processor to overlap their multiplications. */
#define HUDI_M 0x5bd1e995U
#define HUDI_MIXED_WORDS 64 /* keys up to 256 bytes keep their mixed words; longer mix again */
#define HUDI_LANES 4

static inline uint32_t hudi_mix(uint32_t k) {
    k *= HUDI_M;
    k ^= k >> 24;
    return k * HUDI_M;
}

/* The xor of a key's 1 to 3 tail bytes as MurmurHash.java folds them in: (int) byte << 16, << 8
 * and << 0, each byte sign-extended. */
static inline uint32_t hudi_tail(const uint8_t *tail, int left) {
    uint32_t x = 0;
    for (int i = 0; i < left; i++)
        x ^= (uint32_t)(int32_t)(int8_t)tail[i] << (8 * (left - 1 - i));
    return x;
}

static inline uint32_t hudi_finish(uint32_t h, int left, uint32_t tail) {
    if (left) {
        h ^= tail;
        h *= HUDI_M;
    }
    h ^= h >> 13;
    h *= HUDI_M;
    return h ^ (h >> 15);
}

/* One key's num_hashes chained hashes into dst (int32, any alignment). */
static void hudi_chain(const uint8_t *key, uint32_t length, Py_ssize_t num_hashes, uint8_t *dst) {
    uint32_t blocks = length >> 2, mixed[HUDI_MIXED_WORDS];
    int left = (int)(length & 3), stored = blocks <= HUDI_MIXED_WORDS;
    if (stored)
        for (uint32_t j = 0; j < blocks; j++)
            mixed[j] = hudi_mix(load32(key + 4 * j));
    uint32_t tail = hudi_tail(key + 4 * blocks, left), h = 0; /* the first seed */
    for (Py_ssize_t n = 0; n < num_hashes; n++) {
        h ^= length;
        if (stored)
            for (uint32_t j = 0; j < blocks; j++)
                h = (h * HUDI_M) ^ mixed[j];
        else
            for (uint32_t j = 0; j < blocks; j++)
                h = (h * HUDI_M) ^ hudi_mix(load32(key + 4 * j));
        h = hudi_finish(h, left, tail);
        memcpy(dst + 4 * n, &h, 4);
    }
}

/* HUDI_LANES keys of one length, at most HUDI_MIXED_WORDS words, chained side by side. */
static void hudi_chain_lanes(const uint8_t *const *keys, uint32_t length, Py_ssize_t num_hashes,
                             uint8_t *dst) {
    uint32_t blocks = length >> 2, mixed[HUDI_LANES][HUDI_MIXED_WORDS], tail[HUDI_LANES];
    uint32_t h[HUDI_LANES] = {0};
    int left = (int)(length & 3);
    for (int l = 0; l < HUDI_LANES; l++) {
        for (uint32_t j = 0; j < blocks; j++)
            mixed[l][j] = hudi_mix(load32(keys[l] + 4 * j));
        tail[l] = hudi_tail(keys[l] + 4 * blocks, left);
    }
    for (Py_ssize_t n = 0; n < num_hashes; n++) {
        for (int l = 0; l < HUDI_LANES; l++)
            h[l] ^= length;
        for (uint32_t j = 0; j < blocks; j++)
            for (int l = 0; l < HUDI_LANES; l++)
                h[l] = (h[l] * HUDI_M) ^ mixed[l][j];
        for (int l = 0; l < HUDI_LANES; l++) {
            h[l] = hudi_finish(h[l], left, tail[l]);
            memcpy(dst + 4 * (l * num_hashes + n), &h[l], 4);
        }
    }
}

/* hudi_hashes(data, offsets, num_hashes, out): for key i = data[offsets[i]:offsets[i + 1]]
 * (offsets: n + 1 int64), out[i * num_hashes + j] = the key's hash j as a Java int (out: n *
 * num_hashes int32). Raises ValueError before writing anything when an offset lies outside
 * data, offsets decrease, or out is not n * num_hashes int32. */
static PyObject *hudi_hashes(PyObject *module, PyObject *args) {
    Py_buffer data, offsets, out;
    Py_ssize_t num_hashes;
    if (!PyArg_ParseTuple(args, "y*y*nw*:hudi_hashes", &data, &offsets, &num_hashes, &out))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = offsets.len / 8 - 1;
    if (offsets.len % 8 || offsets.len < 8) {
        PyErr_SetString(PyExc_ValueError,
                        "hudi_hashes: offsets must be an int64 buffer of at least one offset");
    } else if (num_hashes < 0 || (count > 0 && num_hashes > out.len / 4 / count) ||
               out.len != 4 * count * num_hashes) {
        PyErr_Format(PyExc_ValueError,
                     "hudi_hashes: %zd hashes of %zd keys do not fill an output of %zd bytes",
                     num_hashes, count, out.len);
    } else {
        const uint8_t *bytes = (const uint8_t *)data.buf, *o = (const uint8_t *)offsets.buf;
        uint8_t *hashes = (uint8_t *)out.buf; /* any alignment: memcpy */
        int64_t size = (int64_t)data.len, start = 0, stop = 0;
        Py_ssize_t bad = -1, row = 4 * num_hashes;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < count; i++) {
            memcpy(&start, o + 8 * i, 8);
            memcpy(&stop, o + 8 * (i + 1), 8);
            if (start < 0 || stop < start || stop > size || stop - start > INT32_MAX) {
                bad = i;
                break;
            }
        }
        for (Py_ssize_t i = 0; bad < 0 && i < count;) {
            /* Offsets i to i + HUDI_LANES are read only when the keys exist (count + 1
             * offsets); the next HUDI_LANES keys share the lanes if they share one length. */
            int64_t at[HUDI_LANES + 1];
            memcpy(&at[0], o + 8 * i, 8);
            memcpy(&at[1], o + 8 * (i + 1), 8);
            int64_t length = at[1] - at[0];
            int same = i + HUDI_LANES <= count && (length >> 2) <= HUDI_MIXED_WORDS;
            for (int l = 2; same && l <= HUDI_LANES; l++) {
                memcpy(&at[l], o + 8 * (i + l), 8);
                same = at[l] - at[l - 1] == length;
            }
            if (same) {
                const uint8_t *keys[HUDI_LANES];
                for (int l = 0; l < HUDI_LANES; l++)
                    keys[l] = bytes + at[l];
                hudi_chain_lanes(keys, (uint32_t)length, num_hashes, hashes + row * i);
                i += HUDI_LANES;
            } else {
                hudi_chain(bytes + at[0], (uint32_t)length, num_hashes, hashes + row * i);
                i += 1;
            }
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError,
                         "hudi_hashes: key %zd (offsets %lld to %lld) lies outside the %zd bytes "
                         "of the buffer",
                         bad, (long long)start, (long long)stop, data.len);
        } else {
            result = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}

#ifdef __linux__
/* splice_copy(src_fd, dst_fd, start, end, pipe_read, pipe_write, align) -> (position, errno):
 * _io.sink's copy through a pipe, its loop without the GIL: src's bytes from `start` go into
 * the pipe (splice(2): references to src's page-cache pages) and out of it into dst, until
 * `end`, a write that is not a multiple of `align` (dst, opened for direct I/O, would be
 * unaligned from there), the end of src (nothing moved) or an error, whose errno is returned
 * for the caller to decide (0: none). `position` is where src's bytes stopped going into dst;
 * what the pipe still holds is the caller's to drop. */
static PyObject *splice_copy(PyObject *module, PyObject *args) {
    int src, dst, pipe_read, pipe_write;
    long long start, end, align;
    if (!PyArg_ParseTuple(args, "iiLLiiL:splice_copy", &src, &dst, &start, &end, &pipe_read,
                          &pipe_write, &align))
        return NULL;
    if (start < 0 || end < start || align < 1) {
        PyErr_Format(PyExc_ValueError, "splice_copy: start %lld, end %lld, align %lld", start,
                     end, align);
        return NULL;
    }
    long long position = start;
    int error = 0, stop = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!stop && position < end) {
        loff_t offset = (loff_t)position;
        ssize_t held = splice(src, &offset, pipe_write, NULL, (size_t)(end - position), 0);
        if (held < 0 && errno == EINTR) { /* Python's signal handlers run, as for os.splice */
            Py_BLOCK_THREADS
            stop = PyErr_CheckSignals() < 0; /* one raised: the copy stops with its error */
            Py_UNBLOCK_THREADS
            continue;
        }
        if (held <= 0) {
            error = held < 0 ? errno : 0;
            break;
        }
        while (held > 0) {
            ssize_t written = splice(pipe_read, NULL, dst, NULL, (size_t)held, 0);
            if (written < 0 && errno == EINTR) {
                Py_BLOCK_THREADS
                stop = PyErr_CheckSignals() < 0;
                Py_UNBLOCK_THREADS
                if (stop)
                    break;
                continue;
            }
            if (written <= 0) {
                error = written < 0 ? errno : 0;
                stop = 1;
                break;
            }
            position += written;
            held -= written;
            if (written % align) { /* unaligned from here */
                stop = 1;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (PyErr_Occurred())
        return NULL; /* a signal handler raised (KeyboardInterrupt) */
    return Py_BuildValue("(Li)", position, error);
}
#endif

static PyMethodDef methods[] = {
    {"xxh64_rows", xxh64_rows, METH_VARARGS,
     "xxh64_rows(data, offset, stride, width, count, out): XXH64 of count rows of width bytes."},
    {"xxh64_spans", xxh64_spans, METH_VARARGS,
     "xxh64_spans(data, starts, lengths, out): XXH64 of each span of data."},
    {"xxh64_byte_arrays", xxh64_byte_arrays, METH_VARARGS,
     "xxh64_byte_arrays(data, count, out): XXH64 of count PLAIN BYTE_ARRAY values."},
    {"rle_scan", rle_scan, METH_VARARGS,
     "rle_scan(data, bit_width, count, marks, target): mark and count an RLE/bit-packed stream."},
    {"snappy_decompress", snappy_decompress, METH_VARARGS,
     "snappy_decompress(data, out, length): decompress a raw Snappy block into out[:length]."},
#ifdef __linux__
    {"splice_copy", splice_copy, METH_VARARGS,
     "splice_copy(src_fd, dst_fd, start, end, pipe_read, pipe_write, align): copy through a "
     "pipe."},
#endif
    {"insert", insert, METH_VARARGS,
     "insert(words, hashes): insert 64-bit hashes into a split-block Bloom filter's words."},
    {"find", find, METH_VARARGS,
     "find(words, hashes, out): out[i] = whether hash i might be in the filter (1) or not (0)."},
    {"set_vector_path", set_vector_path, METH_O,
     "set_vector_path(use): whether find and insert use their AVX2 loops (where the CPU has "
     "AVX2); returns it."},
    {"probe_local_file", pb_probe_local_file, METH_VARARGS,
     "probe_local_file(path, size, tail_size, key, paths, path_offsets, types, probe_leaves, "
     "hash_counts, hashes, row_groups): a point lookup of one local file (see _kernels_probe.c)."},
    {"probe_local_files", pb_probe_local_files, METH_VARARGS,
     "probe_local_files(paths, sizes, tail_size, key, paths, path_offsets, types, probe_leaves, "
     "hash_counts, hashes, threads): probe_local_file of every row group of many files, on "
     "threads of its own."},
    {"hudi_hashes", hudi_hashes, METH_VARARGS,
     "hudi_hashes(data, offsets, num_hashes, out): each key's chained Hudi MurmurHash2 hashes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "parquet_bloom._kernels",
    "Optional compiled kernels for parquet_bloom (see parquet_bloom.kernels).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) {
#if HAVE_VECTOR_PATHS
    __builtin_cpu_init();
    avx2_available = __builtin_cpu_supports("avx2") != 0;
    avx512_available =
        __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512dq") != 0;
#endif
    avx2_used = avx2_available;
    avx512_used = avx512_available;
    return PyModule_Create(&module);
}
