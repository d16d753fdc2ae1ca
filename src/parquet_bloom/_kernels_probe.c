/* The point lookup of one local Parquet file, footer to filter blocks, without the GIL.
 *
 * probe_local_file does for one file what parquet_bloom._prune.dataset does in Python for a
 * point lookup (_prune/local_probe.py calls it): read the file's tail, walk its footer (Thrift
 * compact protocol, docs/format-notes.md#file-layout) to each row group's column chunks, check
 * them against the schema as parquet_bloom._format.footer does, locate the probed columns'
 * filters as parquet_bloom._locate does, read each filter's header and the 32-byte blocks the
 * hashes fall in, coalesced as parquet_bloom._filter_reads reads them (so the reads and bytes
 * counted are the same), and test each hash's eight bits (docs/format-notes.md#sbbf-layout).
 *
 * It takes the common case only: a plaintext footer whose schema and key-value metadata are
 * those of a footer the Python path read before (the caller passes that footer's schema key
 * and its leaves), filters whose bloom_filter_length is given and whose header is the one every
 * writer writes. Anything else, and anything wrong (a short read, a field of the wrong type, a
 * length that does not fit, a chunk that disagrees with the schema), is FALLBACK with a short
 * reason: the Python path then reads the file and says, located, what is wrong. So this code
 * never reports an error itself and never decides a file the Python path would not decide the
 * same way.
 *
 * Every read of the footer's bytes is bounds-checked against the bytes read; every count in
 * them is checked against the bytes left before anything is allocated from it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kernels_probe.h"

#if defined(__unix__) || defined(__APPLE__)
#define HAVE_PREAD 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define HAVE_PREAD 0
#endif

enum { PROBE_OK = 0, PROBE_OTHER_KEY = 1, PROBE_FALLBACK = 2 };

/* Thrift compact types (docs/format-notes.md#thrift-compact-protocol). */
enum {
    CT_TRUE = 1, CT_FALSE = 2, CT_BYTE = 3, CT_I16 = 4, CT_I32 = 5, CT_I64 = 6, CT_DOUBLE = 7,
    CT_BINARY = 8, CT_LIST = 9, CT_SET = 10, CT_MAP = 11, CT_STRUCT = 12,
};

#define MAGIC_LEN 4
#define TRAILER_LEN 8 /* footer length, magic */
/* Nesting counted from where a skip starts; fastbinary counts 64 levels from the RowGroup it
 * decodes, whose chunks' fields lie 5 levels down: 32 here stays within that. */
#define MAX_DEPTH 32
#define MAX_FOOTER (256u * 1024u * 1024u)      /* parquet_bloom._format.footer.MAX_FOOTER_SIZE */
#define SCHEMA_KEY_MAX (256 * 1024)             /* ... .SCHEMA_KEY_MAX */
#define MIN_NUM_BYTES 32                        /* parquet_bloom._sbbf */
#define MAX_NUM_BYTES (128ll * 1024 * 1024)
#define BLOCK_READ_GAP 4096                     /* parquet_bloom._filter_reads */

static const uint32_t SALT[8] = {0x47B6137Bu, 0x44974D91u, 0x8824AD5Bu, 0xA2B7289Du,
                                 0x705495C7u, 0x2DF1424Bu, 0x9EFC4947u, 0x5C6BFB31u};

/* -- a bounded reader of compact-protocol bytes --------------------------------------------- */

typedef struct {
    const uint8_t *start, *p, *end;
    int bad;
} cursor;

/* The Python path decodes a row group with thrift's C decoder (fastbinary), which refuses
 * what this reader must refuse too, or it would answer for a file the Python path reports
 * unreadable: a varint longer than its type's (3 bytes an i16, a field id too; 5 an i32 or a
 * size; 10 an i64: "varint exceeded N bytes"), a container of more than
 * parquet_bloom._format._compact.MAX_THRIFT_CONTAINER_SIZE elements, a binary longer than its
 * MAX_THRIFT_STRING_SIZE, nesting past 64 levels, a field id past the i16 range. */
enum { VARINT_I16 = 3, VARINT_I32 = 5, VARINT_I64 = 10, VARINT_SIZE = 5 };
#define MAX_CONTAINER 1000000u
#define MAX_BINARY 100000000u

static uint64_t varint_of(cursor *c, int most) {
    uint64_t v = 0;
    for (int i = 0, shift = 0; i < most; i++, shift += 7) {
        if (c->p >= c->end) break;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    c->bad = 1;
    return 0;
}

static uint64_t varint(cursor *c) { return varint_of(c, VARINT_SIZE); } /* a size */

static int64_t zigzag_of(cursor *c, int most) {
    uint64_t v = varint_of(c, most);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static int64_t zigzag(cursor *c) { return zigzag_of(c, VARINT_I64); }

static size_t left(const cursor *c) { return (size_t)(c->end - c->p); }

/* A field header: 0 at the struct's stop, else 1 with its type and id. */
static int field(cursor *c, int *last, int *ctype, int *fid) {
    if (c->p >= c->end) {
        c->bad = 1;
        return 0;
    }
    uint8_t b = *c->p++;
    if (b == 0) return 0;
    *ctype = b & 0x0f;
    int delta = b >> 4;
    if (delta) {
        /* fastbinary adds the delta in an int16: past 32767 it wraps, and later deltas reach
         * the known ids again (then a second bloom_filter_offset, say, the last of which
         * wins). Refused here, which also keeps `last` from overflowing. */
        *fid = *last + delta;
        if (*fid > 32767) c->bad = 1;
    } else {
        int64_t id = zigzag_of(c, VARINT_I16);
        if (id < -32768 || id > 32767) c->bad = 1;
        *fid = (int)id;
    }
    *last = *fid;
    return !c->bad;
}

/* A list or set header: its element type and count (checked against the bytes left: every
 * element takes at least one byte). */
static int list_header(cursor *c, int *etype, uint64_t *count) {
    if (c->p >= c->end) {
        c->bad = 1;
        return 0;
    }
    uint8_t b = *c->p++;
    *etype = b & 0x0f;
    *count = b >> 4;
    if (*count == 15) *count = varint(c);
    if (c->bad || *count > left(c) || *count > MAX_CONTAINER) c->bad = 1;
    return !c->bad;
}

static void skip(cursor *c, int ctype, int depth, int in_container);

static void skip_struct(cursor *c, int depth) {
    if (depth > MAX_DEPTH) {
        c->bad = 1;
        return;
    }
    int last = 0, ctype, fid;
    while (!c->bad && field(c, &last, &ctype, &fid)) skip(c, ctype, depth + 1, 0);
}

static void skip(cursor *c, int ctype, int depth, int in_container) {
    uint64_t n;
    int etype;
    switch (ctype) {
    case CT_TRUE:
    case CT_FALSE: /* a field's value is its type; a container's element is a byte */
        if (in_container) {
            if (c->p >= c->end) c->bad = 1;
            else c->p++;
        }
        return;
    case CT_BYTE:
        if (c->p >= c->end) c->bad = 1;
        else c->p++;
        return;
    case CT_I16:
        varint_of(c, VARINT_I16);
        return;
    case CT_I32:
        varint_of(c, VARINT_I32);
        return;
    case CT_I64:
        varint_of(c, VARINT_I64);
        return;
    case CT_DOUBLE:
        if (left(c) < 8) c->bad = 1;
        else c->p += 8;
        return;
    case CT_BINARY:
        n = varint(c);
        if (c->bad || n > left(c) || n > MAX_BINARY) c->bad = 1;
        else c->p += n;
        return;
    case CT_LIST:
    case CT_SET:
        if (depth > MAX_DEPTH || !list_header(c, &etype, &n)) {
            c->bad = 1;
            return;
        }
        for (uint64_t i = 0; i < n && !c->bad; i++) skip(c, etype, depth + 1, 1);
        return;
    case CT_MAP: {
        n = varint(c);
        if (c->bad || n > left(c) || n > MAX_CONTAINER || depth > MAX_DEPTH) {
            c->bad = 1;
            return;
        }
        if (n == 0) return;
        if (c->p >= c->end) {
            c->bad = 1;
            return;
        }
        uint8_t kv = *c->p++;
        for (uint64_t i = 0; i < n && !c->bad; i++) {
            skip(c, kv >> 4, depth + 1, 1);
            skip(c, kv & 0x0f, depth + 1, 1);
        }
        return;
    }
    case CT_STRUCT:
        skip_struct(c, depth);
        return;
    default:
        c->bad = 1;
    }
}

/* -- what the caller knows of the schema, and what one file gives ---------------------------- */

typedef struct {
    /* the schema's leaves: leaf j's path_in_schema as compact-encoded list bytes, its type */
    const uint8_t *paths;
    const int64_t *path_offsets; /* n_leaves + 1 */
    const int32_t *types;
    int64_t n_leaves;
    /* the probed columns: each its leaf and its hashes */
    const int32_t *probe_leaves;
    const int32_t *hash_counts;
    const uint64_t *hashes;
    int64_t n_columns, n_hashes;
    const uint8_t *key;
    size_t key_len;
    /* the row groups asked (a fragment's subset), or none for all */
    const int64_t *asked;
    int64_t n_asked;
} plan;

typedef struct {
    int64_t offset, length; /* -1: no filter */
} filter_at;

typedef struct {
    int status;
    const char *reason;
    int64_t n_row_groups;
    int64_t *sizes;      /* a row group's total_compressed_size, summed over its chunks */
    uint8_t *found;      /* n_row_groups x n_hashes: 1 might be there, 0 not, 2 no filter */
    uint8_t *other_key;  /* PROBE_OTHER_KEY: the file's schema key, when it could be made */
    size_t other_key_len;
    int64_t reads, bytes_read, footer_reads;
} outcome;

static int fallback(outcome *o, const char *why) {
    o->status = PROBE_FALLBACK;
    o->reason = why;
    return 0;
}

/* ColumnMetaData: checked as parquet_bloom._format.footer._checked_meta checks it. */
static int column_meta(cursor *c, const plan *pl, int64_t j, int64_t *compressed,
                       filter_at *filter, outcome *o) {
    int last = 0, ctype, fid;
    int have_type = 0, have_path = 0, have_values = 0, have_page = 0, have_size = 0;
    int64_t v;
    while (field(c, &last, &ctype, &fid)) {
        switch (fid) {
        case 1: /* type */
            if (ctype != CT_I32 || have_type) return fallback(o, "chunk type");
            v = zigzag_of(c, VARINT_I32);
            if (v != pl->types[j]) return fallback(o, "chunk type differs from the schema");
            have_type = 1;
            break;
        case 3: { /* path_in_schema: the schema leaf's, byte for byte */
            if (ctype != CT_LIST || have_path) return fallback(o, "chunk path");
            const uint8_t *at = c->p;
            skip(c, CT_LIST, 1, 0);
            size_t want = (size_t)(pl->path_offsets[j + 1] - pl->path_offsets[j]);
            if (c->bad || (size_t)(c->p - at) != want ||
                memcmp(at, pl->paths + pl->path_offsets[j], want) != 0)
                return fallback(o, "chunk path differs from the schema");
            have_path = 1;
            break;
        }
        case 5: /* num_values */
        case 7: /* total_compressed_size */
        case 9: /* data_page_offset */
        case 14: /* bloom_filter_offset */
            if (ctype != CT_I64) return fallback(o, "chunk field type");
            v = zigzag(c);
            if (v < 0) return fallback(o, "negative chunk field");
            if (fid == 5) have_values++;
            else if (fid == 9) have_page++;
            else if (fid == 7) {
                have_size++;
                *compressed = v;
            } else {
                if (filter->offset >= 0) return fallback(o, "two filter offsets");
                filter->offset = v;
            }
            break;
        case 15: /* bloom_filter_length */
            if (ctype != CT_I32 || filter->length >= 0) return fallback(o, "filter length");
            v = zigzag_of(c, VARINT_I32);
            if (v < 0 || v > INT32_MAX) return fallback(o, "negative filter length");
            filter->length = v;
            break;
        default:
            skip(c, ctype, 1, 0);
        }
        if (c->bad) return fallback(o, "chunk metadata does not decode");
    }
    if (c->bad) return fallback(o, "chunk metadata does not decode");
    if (!have_type || !have_path || have_values != 1 || have_page != 1 || have_size != 1)
        return fallback(o, "chunk metadata lacks a field");
    return 1;
}

/* One RowGroup: its chunks, one a leaf, each checked; the probed ones' filters. */
static int row_group(cursor *c, const plan *pl, const int32_t *probe_of_leaf, int64_t rg,
                     filter_at *filters, outcome *o) {
    int last = 0, ctype, fid, have_columns = 0, have_rows = 0;
    while (field(c, &last, &ctype, &fid)) {
        if (fid == 1) {
            int etype;
            uint64_t n;
            if (ctype != CT_LIST || have_columns || !list_header(c, &etype, &n) ||
                etype != CT_STRUCT || n != (uint64_t)pl->n_leaves)
                return fallback(o, "row group columns");
            have_columns = 1;
            int64_t total = 0;
            for (int64_t j = 0; j < pl->n_leaves; j++) {
                int clast = 0, cct, cfid, have_meta = 0;
                int64_t compressed = 0;
                filter_at at = {-1, -1};
                while (field(c, &clast, &cct, &cfid)) {
                    if (cfid == 3) {
                        if (cct != CT_STRUCT || have_meta) return fallback(o, "chunk meta_data");
                        if (!column_meta(c, pl, j, &compressed, &at, o)) return 0;
                        have_meta = 1;
                    } else if (cfid == 1 || cfid == 8 || cfid == 9) {
                        return fallback(o, "chunk in another file or encrypted");
                    } else {
                        skip(c, cct, 1, 0);
                    }
                    if (c->bad) return fallback(o, "column chunk does not decode");
                }
                if (c->bad || !have_meta) return fallback(o, "column chunk");
                if (total > INT64_MAX - compressed) return fallback(o, "row group size");
                total += compressed;
                int32_t k = probe_of_leaf[j];
                if (k >= 0) filters[rg * pl->n_columns + k] = at;
            }
            o->sizes[rg] = total;
        } else if (fid == 3) {
            if (ctype != CT_I64 || have_rows) return fallback(o, "row group num_rows");
            zigzag(c);
            have_rows = 1;
        } else {
            skip(c, ctype, 1, 0);
        }
        if (c->bad) return fallback(o, "row group does not decode");
    }
    if (c->bad || !have_columns || !have_rows) return fallback(o, "row group");
    return 1;
}

/* -- reads ------------------------------------------------------------------------------------ */

typedef struct {
    int64_t offset, length;
} range;

static int by_offset(const void *a, const void *b) {
    const range *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->length > y->length) - (x->length < y->length);
}

#if HAVE_PREAD
static int read_at(int fd, uint8_t *out, int64_t length, int64_t offset) {
    int64_t done = 0;
    while (done < length) {
        ssize_t got = pread(fd, out + done, (size_t)(length - done), (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        done += got;
    }
    return 1;
}
#endif

/* The parts of [offset, offset + length) outside the held bytes [held_start, held_end). */
static void add_missing(range *out, int64_t *n, int64_t offset, int64_t length,
                        int64_t held_start, int64_t held_end) {
    int64_t end = offset + length;
    if (held_start >= held_end || end <= held_start || offset >= held_end) {
        out[(*n)++] = (range){offset, length};
        return;
    }
    if (offset < held_start) out[(*n)++] = (range){offset, held_start - offset};
    if (end > held_end) out[(*n)++] = (range){held_end, end - held_end};
}

/* Bytes [offset, offset + length) into out, from the held bytes and the reads made (in file
 * order, apart: coalesced). */
static int gather(uint8_t *out, int64_t offset, int64_t length, const uint8_t *held,
                  int64_t held_start, int64_t held_end, const range *reads,
                  uint8_t *const *read_data, int64_t n_reads) {
    int64_t at = offset, end = offset + length;
    while (at < end) {
        if (at >= held_start && at < held_end) {
            int64_t n = (end < held_end ? end : held_end) - at;
            memcpy(out + (at - offset), held + (at - held_start), (size_t)n);
            at += n;
            continue;
        }
        int64_t lo = 0, hi = n_reads; /* the last read starting at or before `at` */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (reads[mid].offset <= at) lo = mid + 1;
            else hi = mid;
        }
        if (lo == 0) return 0;
        const range *r = &reads[lo - 1];
        int64_t r_end = r->offset + r->length;
        if (at >= r_end) return 0;
        int64_t n = (end < r_end ? end : r_end) - at;
        memcpy(out + (at - offset), read_data[lo - 1] + (at - r->offset), (size_t)n);
        at += n;
    }
    return 1;
}

/* The canonical header (parquet_bloom._format.bloom_header._canonical_header): numBytes, then
 * BLOCK, XXHASH, UNCOMPRESSED and the stop byte. Its length, or 0. */
static int64_t canonical_header(const uint8_t *h, int64_t length, int64_t *num_bytes) {
    static const uint8_t tail[13] = {0x1c, 0x1c, 0, 0, 0x1c, 0x1c, 0, 0, 0x1c, 0x1c, 0, 0, 0};
    if (length < 2 || h[0] != 0x15) return 0;
    uint64_t n = 0;
    int64_t at = 1;
    for (int shift = 0;; shift += 7) {
        if (at >= length || at > 5) return 0;
        uint8_t b = h[at++];
        n |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    if (at + 13 > length || memcmp(h + at, tail, 13) != 0) return 0;
    int64_t value = (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
    if (value < 0 || value > INT32_MAX) return 0;
    *num_bytes = value;
    return at + 13;
}

static int64_t bitset_given_length(int64_t length) { /* _sbbf.num_bytes_given_length */
    int64_t p = 1;
    while (p * 2 < length) p *= 2;
    return p < MAX_NUM_BYTES ? p : MAX_NUM_BYTES;
}

static uint8_t find_in_block(const uint8_t *block, uint64_t h) {
    uint32_t key = (uint32_t)h;
    for (int i = 0; i < 8; i++) {
        uint32_t word;
        memcpy(&word, block + 4 * i, 4);
        if (!((word >> ((key * SALT[i]) >> 27)) & 1)) return 0;
    }
    return 1;
}

/* -- one file --------------------------------------------------------------------------------- */

static void probe_file(const char *path, int64_t size, int64_t tail_size, const plan *pl,
                       outcome *o) {
#if !HAVE_PREAD
    (void)path, (void)size, (void)tail_size, (void)pl;
    fallback(o, "no pread on this platform");
#else
    uint8_t *tail = NULL, *footer_copy = NULL;
    uint8_t **read_data = NULL;
    int32_t *probe_of_leaf = NULL;
    filter_at *filters = NULL;
    range *wanted = NULL, *reads = NULL;
    int64_t n_reads = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fallback(o, "cannot open");
        return;
    }
    if (size < 0) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            fallback(o, "cannot stat");
            goto done;
        }
        size = (int64_t)st.st_size;
    }
    if (size < MAGIC_LEN + TRAILER_LEN) {
        fallback(o, "too short");
        goto done;
    }
    int64_t tail_len = size < tail_size ? size : tail_size;
    int64_t tail_start = size - tail_len;
    tail = malloc((size_t)tail_len);
    if (tail == NULL || !read_at(fd, tail, tail_len, tail_start)) {
        fallback(o, tail == NULL ? "no memory" : "short tail read");
        goto done;
    }
    o->reads = 1;
    o->bytes_read = tail_len;
    if (memcmp(tail + tail_len - 4, "PAR1", 4) != 0) {
        fallback(o, "not a plaintext footer");
        goto done;
    }
    uint32_t footer_len;
    memcpy(&footer_len, tail + tail_len - TRAILER_LEN, 4);
    if (footer_len == 0 || footer_len > MAX_FOOTER ||
        (int64_t)footer_len > size - TRAILER_LEN - MAGIC_LEN) {
        fallback(o, "footer length");
        goto done;
    }
    int64_t footer_start = size - TRAILER_LEN - footer_len;
    const uint8_t *footer;
    if ((int64_t)footer_len + TRAILER_LEN <= tail_len) {
        footer = tail + tail_len - TRAILER_LEN - footer_len;
    } else { /* read_footer's second read: the footer's start the tail missed */
        int64_t missed = footer_len + TRAILER_LEN - tail_len;
        footer_copy = malloc(footer_len);
        if (footer_copy == NULL || !read_at(fd, footer_copy, missed, footer_start)) {
            fallback(o, footer_copy == NULL ? "no memory" : "short footer read");
            goto done;
        }
        o->reads += 1;
        o->bytes_read += missed;
        memcpy(footer_copy + missed, tail, (size_t)(tail_len - TRAILER_LEN));
        footer = footer_copy;
    }
    o->footer_reads = o->reads;
    /* Held for the filters: the tail's bytes before the footer. */
    int64_t held_start = tail_start, held_end = footer_start > tail_start ? footer_start : tail_start;

    /* The footer's top-level fields: num_rows and the row group list, and what else there is. */
    cursor c = {footer, footer, footer + footer_len, 0};
    int last = 0, ctype, fid;
    int64_t rows_at = -1, rows_end = -1, rg_start = -1, rg_end = -1;
    probe_of_leaf = malloc(sizeof(int32_t) * (size_t)(pl->n_leaves ? pl->n_leaves : 1));
    if (probe_of_leaf == NULL) {
        fallback(o, "no memory");
        goto done;
    }
    for (int64_t j = 0; j < pl->n_leaves; j++) probe_of_leaf[j] = -1;
    for (int64_t k = 0; k < pl->n_columns; k++) {
        int32_t leaf = pl->probe_leaves[k];
        if (leaf < 0 || leaf >= pl->n_leaves || probe_of_leaf[leaf] >= 0) {
            fallback(o, "probed leaves");
            goto done;
        }
        probe_of_leaf[leaf] = (int32_t)k;
    }
    while (field(&c, &last, &ctype, &fid)) {
        int64_t at = c.p - c.start;
        if (fid == 3) {
            if (ctype != CT_I64 || rows_at >= 0 || rg_start >= 0) {
                fallback(o, "num_rows");
                goto done;
            }
            zigzag(&c);
            rows_at = at;
            rows_end = c.p - c.start;
        } else if (fid == 4) {
            if (ctype != CT_LIST || rg_start >= 0 || rows_at < 0) {
                fallback(o, "row groups");
                goto done;
            }
            /* The schema lies before num_rows: is it the one the plan was made for? */
            uint32_t plan_rows_at = 0;
            if (pl->key_len >= 4) memcpy(&plan_rows_at, pl->key, 4);
            if (pl->key_len < 4 || plan_rows_at != (uint64_t)rows_at ||
                (size_t)(rows_at + 4) > pl->key_len ||
                memcmp(pl->key + 4, footer, (size_t)rows_at) != 0) {
                o->status = PROBE_OTHER_KEY;
                skip(&c, CT_LIST, 1, 0);
                if (c.bad) {
                    fallback(o, "row groups do not decode");
                    goto done;
                }
                rg_start = at;
                rg_end = c.p - c.start;
                continue;
            }
            int etype;
            uint64_t n;
            rg_start = at;
            if (!list_header(&c, &etype, &n) || etype != CT_STRUCT) {
                fallback(o, "row group list");
                goto done;
            }
            /* A row group this walk accepts takes at least 5 bytes and 13 a chunk (each
             * field's header and value, the stops): a count the bytes left cannot hold is
             * refused before anything is allocated from it (sizes, filters). */
            if (n > left(&c) / (5 + 13 * (uint64_t)pl->n_leaves)) {
                fallback(o, "row group count does not fit");
                goto done;
            }
            o->n_row_groups = (int64_t)n;
            o->sizes = calloc(n ? n : 1, sizeof(int64_t));
            filters = malloc(sizeof(filter_at) * (n ? n : 1) * (size_t)(pl->n_columns ? pl->n_columns : 1));
            if (o->sizes == NULL || filters == NULL) {
                fallback(o, "no memory");
                goto done;
            }
            for (uint64_t i = 0; i < n * (uint64_t)pl->n_columns; i++) filters[i] = (filter_at){-1, -1};
            for (uint64_t rg = 0; rg < n; rg++)
                if (!row_group(&c, pl, probe_of_leaf, (int64_t)rg, filters, o)) goto done;
            rg_end = c.p - c.start;
        } else if (fid == 8 || fid == 9) {
            fallback(o, "an encrypted file's plaintext footer");
            goto done;
        } else {
            skip(&c, ctype, 1, 0);
        }
        if (c.bad) {
            fallback(o, "footer does not decode");
            goto done;
        }
    }
    if (c.bad || c.p != c.end || rows_at < 0 || rg_start < 0) {
        fallback(o, "footer does not decode to its end");
        goto done;
    }
    /* The schema key (parquet_bloom._format.footer.FooterView.schema_key): rows_at, then the
     * footer but num_rows's value and the row group list. */
    size_t key_len = 4 + (size_t)rows_at + (size_t)(rg_start - rows_end) + (footer_len - (size_t)rg_end);
    if (key_len > SCHEMA_KEY_MAX + 4) {
        fallback(o, "schema key too long");
        goto done;
    }
    uint8_t *key = malloc(key_len);
    if (key == NULL) {
        fallback(o, "no memory");
        goto done;
    }
    uint32_t at32 = (uint32_t)rows_at;
    memcpy(key, &at32, 4);
    memcpy(key + 4, footer, (size_t)rows_at);
    memcpy(key + 4 + rows_at, footer + rows_end, (size_t)(rg_start - rows_end));
    memcpy(key + 4 + rows_at + (rg_start - rows_end), footer + rg_end, footer_len - (size_t)rg_end);
    if (o->status == PROBE_OTHER_KEY || key_len != pl->key_len || memcmp(key, pl->key, key_len) != 0) {
        o->status = PROBE_OTHER_KEY;
        o->other_key = key;
        o->other_key_len = key_len;
        goto done;
    }
    free(key);

    /* The filters: locate each (parquet_bloom._locate.locate_filter), then the first reads of
     * FilterReads.load_blocks: each header (the length less the bitset guessed from it) and
     * the blocks its column's hashes fall in, less what the tail holds, coalesced. */
    int64_t n_rg = o->n_row_groups, n_col = pl->n_columns;
    if (pl->n_asked > 0) { /* only the row groups asked: the others' filters are not read */
        uint8_t *asked = calloc((size_t)(n_rg ? n_rg : 1), 1);
        if (asked == NULL) {
            fallback(o, "no memory");
            goto done;
        }
        int in_range = 1;
        for (int64_t i = 0; i < pl->n_asked; i++) {
            if (pl->asked[i] < 0 || pl->asked[i] >= n_rg) in_range = 0;
            else asked[pl->asked[i]] = 1;
        }
        for (int64_t rg = 0; rg < n_rg; rg++)
            if (!asked[rg])
                for (int64_t k = 0; k < n_col; k++) filters[rg * n_col + k] = (filter_at){-1, -1};
        free(asked);
        if (!in_range) {
            fallback(o, "a row group asked is not in the footer");
            goto done;
        }
    }
    size_t most = 0; /* the ranges the filters may add: a header and a block a hash, each in
                        two where it straddles the held bytes */
    for (int64_t i = 0; i < n_rg * n_col; i++)
        if (filters[i].offset >= 0) most += 2 * (1 + (size_t)pl->hash_counts[i % n_col]);
    wanted = malloc(sizeof(range) * (most ? most : 1));
    if (wanted == NULL) {
        fallback(o, "no memory");
        goto done;
    }
    int64_t n_wanted = 0;
    for (int64_t i = 0; i < n_rg * n_col; i++) {
        filter_at f = filters[i];
        if (f.offset < 0) continue;
        if (f.offset < MAGIC_LEN || f.offset >= footer_start || f.length < 0 ||
            f.length <= MIN_NUM_BYTES || f.offset + f.length > footer_start) {
            fallback(o, "filter location");
            goto done;
        }
        int64_t bitset_len = bitset_given_length(f.length);
        int64_t bitset = f.offset + f.length - bitset_len;
        add_missing(wanted, &n_wanted, f.offset, f.length - bitset_len, held_start, held_end);
        int64_t k = i % n_col, first = 0;
        for (int64_t q = 0; q < k; q++) first += pl->hash_counts[q];
        uint64_t z = (uint64_t)(bitset_len / 32);
        for (int64_t q = 0; q < pl->hash_counts[k]; q++) {
            uint64_t b = ((pl->hashes[first + q] >> 32) * z) >> 32;
            add_missing(wanted, &n_wanted, bitset + (int64_t)b * 32, 32, held_start, held_end);
        }
    }
    if (n_wanted) {
        qsort(wanted, (size_t)n_wanted, sizeof(range), by_offset);
        reads = malloc(sizeof(range) * (size_t)n_wanted);
        read_data = calloc((size_t)n_wanted, sizeof(uint8_t *));
        if (reads == NULL || read_data == NULL) {
            fallback(o, "no memory");
            goto done;
        }
        for (int64_t i = 0; i < n_wanted; i++) { /* parquet_bloom._io.ranges.coalesce */
            range r = wanted[i];
            if (n_reads && r.offset - (reads[n_reads - 1].offset + reads[n_reads - 1].length) <= BLOCK_READ_GAP) {
                range *m = &reads[n_reads - 1];
                int64_t end = r.offset + r.length > m->offset + m->length ? r.offset + r.length : m->offset + m->length;
                m->length = end - m->offset;
            } else {
                reads[n_reads++] = r;
            }
        }
        for (int64_t i = 0; i < n_reads; i++) {
            read_data[i] = malloc((size_t)reads[i].length);
            if (read_data[i] == NULL || !read_at(fd, read_data[i], reads[i].length, reads[i].offset)) {
                fallback(o, read_data[i] == NULL ? "no memory" : "short filter read");
                goto done;
            }
            o->reads += 1;
            o->bytes_read += reads[i].length;
        }
    }
    const uint8_t *held = tail; /* tail[0] is at tail_start */
    o->found = malloc((size_t)(n_rg * pl->n_hashes > 0 ? n_rg * pl->n_hashes : 1));
    if (o->found == NULL) {
        fallback(o, "no memory");
        goto done;
    }
    uint8_t header[32], block[32];
    for (int64_t rg = 0; rg < n_rg; rg++) {
        int64_t first = 0;
        for (int64_t k = 0; k < n_col; k++) {
            filter_at f = filters[rg * n_col + k];
            uint8_t *out = o->found + rg * pl->n_hashes + first;
            int64_t count = pl->hash_counts[k];
            first += count;
            if (f.offset < 0) {
                memset(out, 2, (size_t)count);
                continue;
            }
            int64_t bitset_len = bitset_given_length(f.length);
            int64_t header_len = f.length - bitset_len, num_bytes = 0;
            if (header_len > (int64_t)sizeof(header) ||
                !gather(header, f.offset, header_len, held, held_start, held_end, reads, read_data, n_reads) ||
                canonical_header(header, header_len, &num_bytes) != header_len ||
                num_bytes != bitset_len) {
                fallback(o, "filter header");
                goto done;
            }
            uint64_t z = (uint64_t)(bitset_len / 32);
            int64_t bitset = f.offset + header_len, h0 = first - count;
            for (int64_t q = 0; q < count; q++) {
                uint64_t h = pl->hashes[h0 + q];
                uint64_t b = ((h >> 32) * z) >> 32;
                if (!gather(block, bitset + (int64_t)b * 32, 32, held, held_start, held_end, reads, read_data, n_reads)) {
                    fallback(o, "filter block");
                    goto done;
                }
                out[q] = find_in_block(block, h);
            }
        }
    }
    o->status = PROBE_OK;
done:
    close(fd);
    free(tail);
    free(footer_copy);
    free(probe_of_leaf);
    free(filters);
    free(wanted);
    if (read_data != NULL)
        for (int64_t i = 0; i < n_reads; i++) free(read_data[i]);
    free(read_data);
    free(reads);
#endif
}

/* The plan's buffers, checked to fit each other (the caller holds the GIL); 0 with a
 * ValueError set when they do not. */
static int plan_from(plan *pl, const char *name, Py_buffer *key, Py_buffer *paths,
                     Py_buffer *offsets, Py_buffer *types, Py_buffer *leaves, Py_buffer *counts,
                     Py_buffer *hashes, long long tail_size) {
    int64_t n_leaves = types->len / 4, n_columns = leaves->len / 4, n_hashes = hashes->len / 8;
    int ok = tail_size >= TRAILER_LEN && offsets->len == 8 * (n_leaves + 1) &&
             counts->len == 4 * n_columns && types->len % 4 == 0 && leaves->len % 4 == 0 &&
             hashes->len % 8 == 0;
    const int64_t *off = offsets->buf;
    for (int64_t j = 0; ok && j <= n_leaves; j++)
        ok = off[j] >= 0 && off[j] <= paths->len && (j == 0 || off[j] >= off[j - 1]);
    int64_t total = 0;
    for (int64_t k = 0; ok && k < n_columns; k++) {
        int32_t n = ((const int32_t *)counts->buf)[k];
        ok = n >= 0;
        total += n;
    }
    if (!ok || total != n_hashes) {
        PyErr_Format(PyExc_ValueError, "%s: inconsistent plan buffers", name);
        return 0;
    }
    *pl = (plan){paths->buf, off, types->buf, n_leaves, leaves->buf, counts->buf, hashes->buf,
                 n_columns, n_hashes, key->buf, (size_t)key->len, NULL, 0};
    return 1;
}

/* The plan's buffers released (every path out of the two functions below). */
static void release_plan(Py_buffer *key, Py_buffer *paths, Py_buffer *offsets, Py_buffer *types,
                         Py_buffer *leaves, Py_buffer *counts, Py_buffer *hashes) {
    Py_buffer *all[] = {key, paths, offsets, types, leaves, counts, hashes};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) PyBuffer_Release(all[i]);
}

/* One file's answer as Python sees it (see probe_local_file); its buffers freed. */
static PyObject *answer(outcome *o, int64_t n_hashes) {
    PyObject *result;
    if (o->status == PROBE_OK) {
        result = Py_BuildValue("(iLy#y#LLL)", PROBE_OK, (long long)o->n_row_groups,
                               (const char *)o->sizes, (Py_ssize_t)(8 * o->n_row_groups),
                               (const char *)o->found, (Py_ssize_t)(o->n_row_groups * n_hashes),
                               (long long)o->reads, (long long)o->bytes_read,
                               (long long)(o->reads - o->footer_reads));
    } else if (o->status == PROBE_OTHER_KEY && o->other_key != NULL) {
        result = Py_BuildValue("(iy#)", PROBE_OTHER_KEY, (const char *)o->other_key,
                               (Py_ssize_t)o->other_key_len);
    } else if (o->status == PROBE_OTHER_KEY) {
        result = Py_BuildValue("(iO)", PROBE_OTHER_KEY, Py_None);
    } else {
        result = Py_BuildValue("(is)", PROBE_FALLBACK, o->reason);
    }
    free(o->sizes);
    free(o->found);
    free(o->other_key);
    o->sizes = NULL, o->found = NULL, o->other_key = NULL;
    return result;
}

static const outcome NOT_RUN = {PROBE_FALLBACK, "not run", 0, NULL, NULL, NULL, 0, 0, 0, 0};

/* probe_local_file(path, size, tail_size, key, paths, path_offsets, types, probe_leaves,
 *                  hash_counts, hashes, row_groups)
 *   -> (0, n_row_groups, sizes, found, reads, bytes_read, filter_reads)
 *    | (1, key or None)  the file's schema is not the plan's (its schema key, if made)
 *    | (2, reason)       the Python path is to read this file
 * See parquet_bloom._prune.local_probe for the arguments' layout. */
PyObject *pb_probe_local_file(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *path_obj;
    long long size, tail_size;
    Py_buffer key, paths, offsets, types, leaves, counts, hashes, asked;
    if (!PyArg_ParseTuple(args, "O&LLy*y*y*y*y*y*y*y*:probe_local_file", PyUnicode_FSConverter,
                          &path_obj, &size, &tail_size, &key, &paths, &offsets, &types, &leaves,
                          &counts, &hashes, &asked))
        return NULL;
    PyObject *result = NULL;
    plan pl;
    if (asked.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "probe_local_file: inconsistent plan buffers");
    } else if (plan_from(&pl, "probe_local_file", &key, &paths, &offsets, &types, &leaves,
                         &counts, &hashes, tail_size)) {
        pl.asked = asked.buf;
        pl.n_asked = asked.len / 8;
        outcome o = NOT_RUN;
        const char *p = PyBytes_AS_STRING(path_obj);
        Py_BEGIN_ALLOW_THREADS
        probe_file(p, (int64_t)size, (int64_t)tail_size, &pl, &o);
        Py_END_ALLOW_THREADS
        result = answer(&o, pl.n_hashes);
    }
    Py_DECREF(path_obj);
    release_plan(&key, &paths, &offsets, &types, &leaves, &counts, &hashes);
    PyBuffer_Release(&asked);
    return result;
}

/* -- many files, on threads of our own ---------------------------------------------------------- */

typedef struct {
    const char *const *paths;
    const int64_t *sizes;
    int64_t tail_size, n;
    const plan *pl;
    outcome *outcomes;
    int64_t next; /* the next file to take (atomic) */
} batch;

static void *work(void *arg) {
    batch *b = arg;
    for (;;) {
        int64_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->n) break;
        probe_file(b->paths[i], b->sizes[i], b->tail_size, b->pl, &b->outcomes[i]);
    }
    return NULL;
}

/* probe_local_files(paths, sizes, tail_size, key, paths, path_offsets, types, probe_leaves,
 *                   hash_counts, hashes, threads) -> [probe_local_file's answer, a file]
 * Every row group of each file; `threads` threads (this one and threads - 1 of our own,
 * fewer if they cannot be started) each take the next file when done, without the GIL and
 * without a Python object: one call for a table's files, where a thread a file taking turns
 * with the GIL cost more than it saved. */
PyObject *pb_probe_local_files(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *files;
    long long tail_size;
    int threads;
    Py_buffer sizes, key, paths, offsets, types, leaves, counts, hashes;
    if (!PyArg_ParseTuple(args, "Oy*Ly*y*y*y*y*y*y*i:probe_local_files", &files, &sizes,
                          &tail_size, &key, &paths, &offsets, &types, &leaves, &counts, &hashes,
                          &threads))
        return NULL;
    PyObject *result = NULL, *seq = NULL, **names = NULL;
    const char **cpaths = NULL;
    outcome *outcomes = NULL;
    Py_ssize_t n = 0, made = 0;
    plan pl;
    if (!plan_from(&pl, "probe_local_files", &key, &paths, &offsets, &types, &leaves, &counts,
                   &hashes, tail_size))
        goto release;
    seq = PySequence_Fast(files, "probe_local_files: paths must be a sequence");
    if (seq == NULL) goto release;
    n = PySequence_Fast_GET_SIZE(seq);
    if (sizes.len != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "probe_local_files: one size a path");
        goto release;
    }
    names = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    cpaths = PyMem_Calloc((size_t)(n ? n : 1), sizeof(char *));
    outcomes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(outcome));
    if (names == NULL || cpaths == NULL || outcomes == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    for (; made < n; made++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, made), &names[made])) goto release;
        cpaths[made] = PyBytes_AS_STRING(names[made]);
        outcomes[made] = NOT_RUN;
    }
    batch b = {cpaths, sizes.buf, (int64_t)tail_size, (int64_t)n, &pl, outcomes, 0};
    Py_BEGIN_ALLOW_THREADS
#if HAVE_PREAD
    pthread_t helpers[64];
    int started = 0;
    for (int t = 1; t < threads && t < 64 && t < n; t++)
        if (pthread_create(&helpers[started], NULL, work, &b) == 0) started++;
    work(&b);
    for (int t = 0; t < started; t++) pthread_join(helpers[t], NULL);
#else
    work(&b);
#endif
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *one = answer(&outcomes[i], pl.n_hashes);
        if (one == NULL) Py_CLEAR(result);
        else PyList_SET_ITEM(result, i, one);
    }
release:
    if (outcomes != NULL)
        for (Py_ssize_t i = 0; i < n; i++) {
            free(outcomes[i].sizes);
            free(outcomes[i].found);
            free(outcomes[i].other_key);
        }
    for (Py_ssize_t i = 0; i < made; i++) Py_XDECREF(names ? names[i] : NULL);
    PyMem_Free(names);
    PyMem_Free(cpaths);
    PyMem_Free(outcomes);
    Py_XDECREF(seq);
    PyBuffer_Release(&sizes);
    release_plan(&key, &paths, &offsets, &types, &leaves, &counts, &hashes);
    return result;
}
