/*
 * fetcher.adapters.jsonlayout._native: JSON texts re-laid out as contract §5.4 bytes, in C, without
 * building Python objects (issue 23). The Python API and its contract are in texts.py (texts) and columns.py (rows).
 *
 * layout_rows(texts, depth, max_depth) -> bytes | None
 *
 *   Each text (bytes, str or another bytes-like object) is exactly one JSON value (RFC 8259,
 *   strict: whitespace is space, tab, LF and CR only). The result holds each value's §5.4 text
 *   as an array element at `depth` (no leading indentation, the closing bracket indented to
 *   `depth`), the values joined by ",\n" plus 2*depth spaces. None ("decline") for any text
 *   this module does not write exactly as the engine's reference writer would after an exact
 *   parse (fetcher.engine.values.parse_json_exact_fractions):
 *
 *   - not one valid JSON value (trailing data, NaN/Infinity, a raw control character in a
 *     string, a bad escape, leading zeros, an empty text, ...);
 *   - not strict UTF-8 (overlong forms, encoded surrogates, beyond U+10FFFF, a BOM, NUL);
 *   - a \u escape of a lone surrogate (a pair becomes its astral character);
 *   - an object with a key twice (Python keeps the last value: not worth the copy here);
 *   - nesting deeper than `max_depth` containers (`[]` nests 1, a scalar 0).
 *
 *   Written as §5.4 says: 2 spaces per level, one member or element per line, ": " after keys,
 *   keys sorted by code point (the byte order of their decoded UTF-8) at every level, strings
 *   decoded and re-escaped (only '"', '\\' and characters below U+0020: \n \r \t \b \f, the
 *   others as \u00xx in lower case), numbers copied exactly as received (after checking the
 *   JSON number grammar), {} and [] for empty containers.
 *
 * One pass per text: values are written while they are parsed. An object's members are written
 * in the order they arrive, each remembered by its decoded key and the span of output it took;
 * when the object closes and its keys were not strictly increasing, the spans are sorted by
 * key (a duplicate declines) and copied back in that order, with the commas moved. Nested
 * values are complete by then, and their indentation depends only on their level, so moving
 * a span moves them as they are. Rows printed with their keys in order (json_build_object in
 * key order) are never moved; a jsonb object (keys by length, then bytes) often is.
 *
 * Robustness: every read is bounds-checked against the text's length; parsing is iterative
 * with an explicit stack bounded by max_depth (no C recursion, so 10^6 nested brackets only
 * cost the walk to the bound); every size computation is checked for overflow; the GIL is
 * held throughout. Out of memory raises MemoryError; wrong argument types raise
 * TypeError/ValueError.
 *
 * Python code can run in the middle of a call, so nothing the C reads may be borrowed from a
 * container the caller can change (issue 39). The points where it can run: a bytes-like
 * item's buffer (a class's __buffer__ and __release_buffer__ since Python 3.12), and any
 * allocation of a tracked object or exception (the UnicodeEncodeError of a lone surrogate, the
 * ValueError of an int past the str digits limit, a TypeError, a BufferError), where Python
 * 3.11 may collect garbage and run a __del__. No other protocol is called: no __index__,
 * __float__, __str__ (only an exact int's own str), comparison or hashing of a caller's
 * object. So each entry point reads the caller's items one at a time, holding each while it
 * is laid out and declining when the sequence changed size (item_at); the row tuples, keys
 * and kinds it reads are immutable, and a text being read is held by its item (or view).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Outcome of every internal step. */
enum { OK = 0, DECLINE = 1, NOMEM = 2 };

/* The caller's bounds on depth and max_depth: far beyond any use, small enough that indentation
 * arithmetic (2 * (depth + max_depth) + a few bytes) cannot overflow. */
#define MAX_LEVEL_ARG (1 << 20)
/* The largest first allocation of the result (64 MiB); it grows by doubling beyond. */
#define GUESS_CAP ((size_t)1 << 26)
/* Objects with at most this many members are sorted by insertion. */
#define SMALL_OBJECT 16

/* An open container: whether it is an object, how many items it has so far, and (objects)
 * where its members' records start in State.members. */
typedef struct {
    size_t first_member;
    size_t count;
    int is_object;
} Frame;

/* A member of an open object: its decoded key (a source slice when it had no escapes, else
 * scratch bytes: offsets, since both buffers may move) and the output it took, from the comma
 * or line break before it to the end of its value. `key` is resolved when the object closes. */
typedef struct {
    size_t key_off;
    size_t key_len;
    size_t start;
    size_t end;
    const unsigned char *key;
    int key_decoded;
} Member;

typedef struct {
    /* the current text */
    const unsigned char *src;
    size_t len;
    size_t pos;
    size_t max_depth;
    /* K_JSONB: an integer "-0" declines (the general path reads jsonb's integers as ints, and
     * an int has no sign of zero; PostgreSQL never prints one in jsonb) */
    int canonical_ints;
    /* per-text buffers, reused from one text to the next */
    unsigned char *scratch; /* decoded strings that had escapes */
    size_t n_scratch, cap_scratch;
    Frame *stack;
    size_t cap_stack;
    Member *members;
    size_t n_members, cap_members;
    char *moved; /* an object's members while they are put in key order */
    size_t cap_moved;
    /* the result, written straight into a bytes object (shrunk to size at the end: no final
     * copy, which for one huge value was a second output-sized buffer at the peak) */
    PyObject *out_obj;
    char *out;
    size_t n_out, cap_out;
} State;

/* ---- buffers ----------------------------------------------------------------------------- */

/* Make room for `need` more items of `size` bytes after `used` in *buf (capacity *cap),
 * doubling; NOMEM when the size would overflow or allocation fails. */
static int
reserve(void **buf, size_t *cap, size_t used, size_t need, size_t size)
{
    size_t limit = (size_t)PY_SSIZE_T_MAX / size;
    if (need > limit || used > limit - need) {
        return NOMEM;
    }
    size_t want = used + need;
    if (want <= *cap) {
        return OK;
    }
    size_t grown = *cap < 64 ? 64 : *cap;
    while (grown < want) {
        grown = grown > limit / 2 ? limit : grown * 2;
    }
    void *bigger = PyMem_Realloc(*buf, grown * size);
    if (bigger == NULL) {
        return NOMEM;
    }
    *buf = bigger;
    *cap = grown;
    return OK;
}

static int
out_grow(State *s, size_t need)
{
    size_t limit = (size_t)PY_SSIZE_T_MAX;
    if (need > limit || s->n_out > limit - need) {
        return NOMEM;
    }
    size_t want = s->n_out + need;
    size_t grown = s->cap_out < 64 ? 64 : s->cap_out;
    while (grown < want) {
        grown = grown > limit / 2 ? limit : grown * 2;
    }
    if (s->out_obj == NULL) {
        s->out_obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)grown);
    }
    else if (_PyBytes_Resize(&s->out_obj, (Py_ssize_t)grown) < 0) {
        s->out_obj = NULL; /* freed by _PyBytes_Resize */
    }
    if (s->out_obj == NULL) {
        PyErr_Clear(); /* reported as NOMEM by the caller */
        s->out = NULL;
        s->cap_out = s->n_out = 0;
        return NOMEM;
    }
    s->out = PyBytes_AS_STRING(s->out_obj);
    s->cap_out = grown;
    return OK;
}

static inline int
out_reserve(State *s, size_t need)
{
    if (s->out_obj != NULL && s->cap_out - s->n_out >= need) {
        return OK;
    }
    return out_grow(s, need);
}

/* The caller reserved the room. */
static inline void
out_bytes(State *s, const void *data, size_t n)
{
    memcpy(s->out + s->n_out, data, n);
    s->n_out += n;
}

static inline void
out_byte(State *s, char c)
{
    s->out[s->n_out++] = c;
}

/* A line break and the indentation of `level` (2 spaces each), after `prefix` ("," or ""). */
static int
out_newline(State *s, const char *prefix, size_t prefix_len, size_t level)
{
    /* level <= 2 * MAX_LEVEL_ARG: no overflow */
    size_t n = prefix_len + 1 + 2 * level;
    if (out_reserve(s, n) != OK) {
        return NOMEM;
    }
    out_bytes(s, prefix, prefix_len);
    out_byte(s, '\n');
    memset(s->out + s->n_out, ' ', 2 * level);
    s->n_out += 2 * level;
    return OK;
}

/* ---- parsing ----------------------------------------------------------------------------- */

/* Bytes that end the fast scan of a string: '"', '\\', controls and every non-ASCII byte. */
static unsigned char string_stop[256];

static void
init_tables(void)
{
    for (int c = 0; c < 256; c++) {
        string_stop[c] = (unsigned char)(c < 0x20 || c == '"' || c == '\\' || c >= 0x80);
    }
}

/* Whether 8 bytes hold a byte that ends the fast scan of a string (see string_stop): a zero
 * byte of w ^ '"' or w ^ '\\', a byte below 0x20, or a byte with its high bit set. The
 * classic zero-byte test ((x - 0x01..) & ~x & 0x80..) never misses one. */
static inline int
word_has_stop(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL;
    const uint64_t highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"');
    uint64_t backslash = w ^ (ones * '\\');
    uint64_t found = ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) |
                     ((w - ones * 0x20) & ~w) | w;
    return (found & highs) != 0;
}

static inline int
is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline void
skip_ws(State *s)
{
    while (s->pos < s->len && is_ws(s->src[s->pos])) {
        s->pos++;
    }
}

static inline int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the strict UTF-8 sequence of a non-ASCII character at p (avail bytes readable),
 * or 0 when it is not one: no overlong form, no surrogate, nothing beyond U+10FFFF. */
static size_t
utf8_sequence(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    if (c < 0xC2) {
        return 0; /* a continuation byte, or an overlong 2-byte form */
    }
    if (c < 0xE0) {
        return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    }
    if (c < 0xF0) {
        if (avail < 3) {
            return 0;
        }
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
        unsigned char hi = c == 0xED ? 0x9F : 0xBF; /* ED A0..BF: surrogates */
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        return 3;
    }
    if (c < 0xF5) {
        if (avail < 4) {
            return 0;
        }
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        return 4;
    }
    return 0;
}

/* Four hex digits at src[at..at+3] (either case), or -1. */
static long
hex4(const State *s, size_t at)
{
    if (at > s->len || s->len - at < 4) {
        return -1;
    }
    long value = 0;
    for (size_t i = 0; i < 4; i++) {
        unsigned char c = s->src[at + i];
        int digit;
        if (c >= '0' && c <= '9') {
            digit = c - '0';
        }
        else if (c >= 'a' && c <= 'f') {
            digit = c - 'a' + 10;
        }
        else if (c >= 'A' && c <= 'F') {
            digit = c - 'A' + 10;
        }
        else {
            return -1;
        }
        value = value * 16 + digit;
    }
    return value;
}

static size_t
put_utf8(unsigned char *d, uint32_t cp)
{
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xC0 | (cp >> 6));
        d[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xE0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (unsigned char)(0xF0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string whose opening quote is just before s->pos. Sets s->pos after its closing quote and
 * where its decoded text is: a source slice (*decoded = 0) or scratch bytes (*decoded = 1). */
static int
parse_string(State *s, size_t *off, size_t *len, int *decoded)
{
    const unsigned char *p = s->src;
    size_t n = s->len;
    size_t start = s->pos;
    size_t i = start;

    /* Fast scan: no escape means the decoded text is the source slice. */
    for (;;) {
        /* 8 bytes at a time while none needs a look (memcpy: an unaligned load) */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (word_has_stop(w)) {
                break;
            }
            i += 8;
        }
        while (i < n && !string_stop[p[i]]) {
            i++;
        }
        if (i >= n) {
            return DECLINE; /* unterminated */
        }
        unsigned char c = p[i];
        if (c == '"') {
            *off = start;
            *len = i - start;
            *decoded = 0;
            s->pos = i + 1;
            return OK;
        }
        if (c == '\\') {
            break;
        }
        if (c < 0x20) {
            return DECLINE; /* a raw control character (the reference is strict too) */
        }
        size_t k = utf8_sequence(p + i, n - i);
        if (k == 0) {
            return DECLINE;
        }
        i += k;
    }

    /* Escapes: decode into scratch. Every escape decodes to no more bytes than its source
     * (\uXXXX: 6 -> <= 3, a pair: 12 -> 4, \n: 2 -> 1), so the rest of the text bounds it. */
    if (reserve((void **)&s->scratch, &s->cap_scratch, s->n_scratch, n - start, 1) != OK) {
        return NOMEM;
    }
    unsigned char *base = s->scratch + s->n_scratch;
    unsigned char *d = base;
    memcpy(d, p + start, i - start);
    d += i - start;
    for (;;) {
        if (i >= n) {
            return DECLINE;
        }
        unsigned char c = p[i];
        if (c == '"') {
            break;
        }
        if (c == '\\') {
            if (n - i < 2) {
                return DECLINE;
            }
            unsigned char e = p[i + 1];
            i += 2;
            switch (e) {
            case '"':
            case '\\':
            case '/':
                *d++ = e;
                break;
            case 'b':
                *d++ = '\b';
                break;
            case 'f':
                *d++ = '\f';
                break;
            case 'n':
                *d++ = '\n';
                break;
            case 'r':
                *d++ = '\r';
                break;
            case 't':
                *d++ = '\t';
                break;
            case 'u': {
                long cp = hex4(s, i);
                if (cp < 0) {
                    return DECLINE;
                }
                i += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return DECLINE; /* a lone low surrogate */
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* only a \u escape of a low surrogate may follow: the pair is one
                     * character, as the reference decodes it */
                    if (n - i < 2 || p[i] != '\\' || p[i + 1] != 'u') {
                        return DECLINE;
                    }
                    long low = hex4(s, i + 2);
                    if (low < 0xDC00 || low > 0xDFFF) {
                        return DECLINE;
                    }
                    i += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                d += put_utf8(d, (uint32_t)cp);
                break;
            }
            default:
                return DECLINE;
            }
            continue;
        }
        if (c < 0x20) {
            return DECLINE;
        }
        if (c < 0x80) {
            *d++ = c;
            i++;
            continue;
        }
        size_t k = utf8_sequence(p + i, n - i);
        if (k == 0) {
            return DECLINE;
        }
        memcpy(d, p + i, k);
        d += k;
        i += k;
    }
    *off = s->n_scratch;
    *len = (size_t)(d - base);
    *decoded = 1;
    s->n_scratch += *len;
    s->pos = i + 1;
    return OK;
}

/* ---- writing ----------------------------------------------------------------------------- */

/* §5.4 escapes of the bytes below 0x20 (others are written as they are, but '"' and '\\'). */
static const char *const control_escapes[0x20] = {
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
};

/* A string literal of text that holds nothing to escape: copied between quotes. */
static int
write_quoted(State *s, const unsigned char *text, size_t len)
{
    if (len > (size_t)PY_SSIZE_T_MAX - 2 || out_reserve(s, len + 2) != OK) {
        return NOMEM;
    }
    out_byte(s, '"');
    out_bytes(s, text, len);
    out_byte(s, '"');
    return OK;
}

/* A string literal of any UTF-8 text, escaped as §5.4 says: '"' and '\\' with a backslash,
 * the bytes below 0x20 as control_escapes. The escaped length is counted first, so the output
 * grows by exactly what the literal takes (a huge value never reserves six bytes a byte). */
static int
write_text(State *s, const unsigned char *text, size_t len)
{
    size_t extra = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = text[i];
        if (c < 0x20) {
            extra += control_escapes[c][1] == 'u' ? 5 : 1;
        }
        else if (c == '"' || c == '\\') {
            extra += 1;
        }
    }
    if (extra == 0) {
        return write_quoted(s, text, len);
    }
    if (len > (size_t)PY_SSIZE_T_MAX - 2 - extra || out_reserve(s, len + extra + 2) != OK) {
        return NOMEM;
    }
    char *d = s->out + s->n_out;
    *d++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = text[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *d++ = (char)c;
        }
        else if (c >= 0x20) {
            *d++ = '\\';
            *d++ = (char)c;
        }
        else {
            const char *e = control_escapes[c];
            size_t k = e[1] == 'u' ? 6 : 2;
            memcpy(d, e, k);
            d += k;
        }
    }
    *d++ = '"';
    s->n_out = (size_t)(d - s->out);
    return OK;
}

/* A string literal of decoded UTF-8 bytes, or of a source slice without escapes (which holds
 * nothing to escape: it is copied between quotes). */
static int
write_string(State *s, const unsigned char *text, size_t len, int decoded)
{
    return decoded ? write_text(s, text, len) : write_quoted(s, text, len);
}

/* A string value whose opening quote is just before s->pos, written. */
static int
string_value(State *s)
{
    size_t off, len;
    int decoded;
    size_t mark = s->n_scratch;
    int r = parse_string(s, &off, &len, &decoded);
    if (r != OK) {
        return r;
    }
    r = write_string(s, (decoded ? s->scratch : s->src) + off, len, decoded);
    s->n_scratch = mark; /* a value's decoded text is not needed once written */
    return r;
}

/* A number at s->pos, checked against the JSON grammar
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?  and written as its source text. */
static int
number_value(State *s)
{
    const unsigned char *p = s->src;
    size_t n = s->len;
    size_t i = s->pos;
    if (i < n && p[i] == '-') {
        i++;
    }
    if (i >= n) {
        return DECLINE;
    }
    if (p[i] == '0') {
        i++;
        /* an integer -0 declines in K_JSONB (the general path reads it as the int 0); tested
         * here, where only numbers whose integer part is 0 pay for it */
        if (s->canonical_ints && i - s->pos == 2 &&
            (i >= n || (p[i] != '.' && p[i] != 'e' && p[i] != 'E'))) {
            return DECLINE;
        }
    }
    else if (p[i] >= '1' && p[i] <= '9') {
        while (i < n && is_digit(p[i])) {
            i++;
        }
    }
    else {
        return DECLINE;
    }
    if (i < n && p[i] == '.') {
        i++;
        if (i >= n || !is_digit(p[i])) {
            return DECLINE;
        }
        while (i < n && is_digit(p[i])) {
            i++;
        }
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) {
            i++;
        }
        if (i >= n || !is_digit(p[i])) {
            return DECLINE;
        }
        while (i < n && is_digit(p[i])) {
            i++;
        }
    }
    if (out_reserve(s, i - s->pos) != OK) {
        return NOMEM;
    }
    out_bytes(s, p + s->pos, i - s->pos);
    s->pos = i;
    return OK;
}

static int
literal_value(State *s, const char *word, size_t n)
{
    if (s->len - s->pos < n || memcmp(s->src + s->pos, word, n) != 0) {
        return DECLINE;
    }
    s->pos += n;
    if (out_reserve(s, n) != OK) {
        return NOMEM;
    }
    out_bytes(s, word, n);
    return OK;
}

/* Code point order of two keys: the byte order of their UTF-8, shorter first on a tie. */
static inline int
compare_keys(const unsigned char *a, size_t a_len, const unsigned char *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    /* keys are short: a loop beats a call to memcmp, and they mostly differ early */
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return a[i] < b[i] ? -1 : 1;
        }
    }
    return a_len < b_len ? -1 : (a_len > b_len ? 1 : 0);
}

static int
compare_members(const void *a, const void *b)
{
    const Member *x = a, *y = b;
    return compare_keys(x->key, x->key_len, y->key, y->key_len);
}

/* An object whose members were all written (the output ends with its last value): their spans
 * put in key order when they are not already; DECLINE on a duplicate key. Its member records
 * are then dropped. */
static int
order_members(State *s, size_t first)
{
    Member *m = s->members + first;
    size_t count = s->n_members - first;
    s->n_members = first;
    if (count < 2) {
        return OK;
    }
    for (size_t i = 0; i < count; i++) {
        m[i].key = (m[i].key_decoded ? s->scratch : s->src) + m[i].key_off;
    }
    size_t i = 1;
    while (i < count && compare_keys(m[i - 1].key, m[i - 1].key_len, m[i].key, m[i].key_len) < 0) {
        i++;
    }
    if (i == count) {
        return OK; /* strictly increasing: in order, and no key twice */
    }
    size_t base = m[0].start;
    for (i = 0; i + 1 < count; i++) {
        m[i].end = m[i + 1].start;
    }
    m[count - 1].end = s->n_out;
    if (count <= SMALL_OBJECT) {
        /* insertion sort: no call per comparison, no allocation (glibc's qsort may merge
         * sort through a temporary buffer) */
        for (i = 1; i < count; i++) {
            Member moving = m[i];
            size_t j = i;
            while (j > 0 && compare_members(&m[j - 1], &moving) > 0) {
                m[j] = m[j - 1];
                j--;
            }
            m[j] = moving;
        }
    }
    else {
        qsort(m, count, sizeof(Member), compare_members);
    }
    for (i = 1; i < count; i++) {
        if (compare_members(&m[i - 1], &m[i]) == 0) {
            return DECLINE; /* a duplicate key */
        }
    }
    /* Copy the members out and back in key order. Each span starts with "," (all but the
     * object's first member as written) or directly with its line break: the comma is
     * dropped and written again before every member but the new first. */
    size_t total = s->n_out - base;
    if (reserve((void **)&s->moved, &s->cap_moved, 0, total, 1) != OK) {
        return NOMEM;
    }
    memcpy(s->moved, s->out + base, total);
    char *d = s->out + base;
    for (i = 0; i < count; i++) {
        const char *span = s->moved + (m[i].start - base);
        size_t n = m[i].end - m[i].start;
        if (m[i].start != base) {
            span++; /* its comma */
            n--;
        }
        if (i > 0) {
            *d++ = ',';
        }
        memcpy(d, span, n);
        d += n;
    }
    return OK; /* the same bytes in another order: the length is unchanged */
}

/* ---- timestamp texts (layout_columns: MySQL's K_DATETIME, PostgreSQL's K_STAMP) ---------- */

/* Whether t[0..n) is "YYYY-MM-DD HH:MM:SS" in digits, then "." and 1 to 6 digits or nothing:
 * how PostgreSQL (ISO DateStyle, years 1..9999) and MySQL print a timestamp without a zone. */
static int
datetime_shape(const unsigned char *t, size_t n)
{
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    if (!(n == 19 || (n >= 21 && n <= 26 && t[19] == '.'))) {
        return 0;
    }
    for (size_t i = 0; i < 19; i++) {
        if (shape[i] == 'd' ? !is_digit(t[i]) : t[i] != (unsigned char)shape[i]) {
            return 0;
        }
    }
    for (size_t i = 20; i < n; i++) {
        if (!is_digit(t[i])) {
            return 0;
        }
    }
    return 1;
}

/* Whether t is a timestamp(tz) text of years 1..9999 as a UTC, ISO-DateStyle session prints it:
 * datetime_shape, then "+00" when zoned. */
static int
stamp_shape(const unsigned char *t, size_t n, int zoned)
{
    if (!zoned) {
        return datetime_shape(t, n);
    }
    return n >= 3 && memcmp(t + n - 3, "+00", 3) == 0 && datetime_shape(t, n - 3);
}

/* Whether the connector's general path (_DateTimeText.text) slices an ASCII timestamp text:
 * "-" at 4, " " at 10, and a "+00" end when zoned, a digit end when not. */
static int
stamp_sliced(const unsigned char *t, size_t n, int zoned)
{
    if (n < 11 || t[4] != '-' || t[10] != ' ') {
        return 0;
    }
    return zoned ? memcmp(t + n - 3, "+00", 3) == 0 : is_digit(t[n - 1]);
}

/* Whether the general path keeps an ASCII timestamp text as the engine printed it
 * (_special_datetime): it holds "infinity", ends with " BC", or its part before the first "-"
 * is more than four digits. */
static int
stamp_special(const unsigned char *t, size_t n)
{
    static const char infinity[] = "infinity";
    for (size_t i = 0; i + 8 <= n; i++) {
        if (memcmp(t + i, infinity, 8) == 0) {
            return 1;
        }
    }
    if (n >= 3 && memcmp(t + n - 3, " BC", 3) == 0) {
        return 1;
    }
    size_t digits = 0;
    while (digits < n && is_digit(t[digits])) {
        digits++;
    }
    return digits > 4 && (digits == n || t[digits] == '-');
}

/* An ASCII timestamp text as the general path writes it: of stamp_shape's shape, §5.3's UTC
 * text ("YYYY-MM-DDTHH:MM:SS[.f]Z", the fraction as printed); infinity, BC and five-digit
 * years as they are. Anything else declines: the general path's own parse decides it. */
static int
write_stamp(State *s, const unsigned char *text, size_t len, int zoned)
{
    if (stamp_sliced(text, len, zoned)) {
        if (!stamp_shape(text, len, zoned)) {
            return DECLINE;
        }
        size_t end = zoned ? len - 3 : len;
        if (out_reserve(s, end + 3) != OK) {
            return NOMEM;
        }
        out_byte(s, '"');
        out_bytes(s, text, 10);
        out_byte(s, 'T');
        out_bytes(s, text + 11, end - 11);
        out_byte(s, 'Z');
        out_byte(s, '"');
        return OK;
    }
    return stamp_special(text, len) ? write_text(s, text, len) : DECLINE;
}

/* One JSON text (s->src) written at `level`. Iterative: the open containers are on s->stack,
 * at most max_depth of them; `depth` counts them. */
static int
layout_text(State *s, size_t level)
{
    size_t depth = 0;
    int r;

    s->pos = 0;
    s->n_scratch = 0;
    s->n_members = 0;

value:
    skip_ws(s);
    if (s->pos >= s->len) {
        return DECLINE;
    }
    switch (s->src[s->pos]) {
    case '{':
    case '[': {
        int is_object = s->src[s->pos] == '{';
        if (depth >= s->max_depth) {
            return DECLINE; /* deeper than the bound: the caller's path reports it */
        }
        if (depth == s->cap_stack &&
            reserve((void **)&s->stack, &s->cap_stack, depth, 1, sizeof(Frame)) != OK) {
            return NOMEM;
        }
        s->stack[depth].first_member = s->n_members;
        s->stack[depth].count = 0;
        s->stack[depth].is_object = is_object;
        depth++;
        s->pos++;
        skip_ws(s);
        if (out_reserve(s, 2) != OK) {
            return NOMEM;
        }
        out_byte(s, is_object ? '{' : '[');
        if (s->pos < s->len && s->src[s->pos] == (is_object ? '}' : ']')) {
            s->pos++;
            depth--;
            out_byte(s, is_object ? '}' : ']'); /* {} or [] */
            goto after;
        }
        if (is_object) {
            goto key;
        }
        goto element;
    }
    case '"':
        s->pos++;
        r = string_value(s);
        break;
    case 't':
        r = literal_value(s, "true", 4);
        break;
    case 'f':
        r = literal_value(s, "false", 5);
        break;
    case 'n':
        r = literal_value(s, "null", 4);
        break;
    default:
        r = number_value(s);
        break;
    }
    if (r != OK) {
        return r;
    }

after:
    skip_ws(s);
    if (depth == 0) {
        return s->pos == s->len ? OK : DECLINE; /* nothing but whitespace after the value */
    }
    if (s->pos >= s->len) {
        return DECLINE;
    }
    {
        Frame *frame = &s->stack[depth - 1];
        unsigned char c = s->src[s->pos++];
        if (c == ',') {
            if (frame->is_object) {
                goto key;
            }
            goto element;
        }
        if (c != (frame->is_object ? '}' : ']')) {
            return DECLINE;
        }
        if (frame->is_object) {
            r = order_members(s, frame->first_member);
            if (r != OK) {
                return r;
            }
        }
        depth--;
        if (out_newline(s, "", 0, level + depth) != OK || out_reserve(s, 1) != OK) {
            return NOMEM;
        }
        out_byte(s, c);
        goto after;
    }

element: {
    /* an array's next element: its line (and the comma ending the previous one) */
    Frame *frame = &s->stack[depth - 1];
    if (out_newline(s, ",", frame->count ? 1 : 0, level + depth) != OK) {
        return NOMEM;
    }
    frame->count++;
    goto value;
}

key: {
    size_t key_off, key_len;
    int key_decoded;
    skip_ws(s);
    if (s->pos >= s->len || s->src[s->pos] != '"') {
        return DECLINE;
    }
    s->pos++;
    r = parse_string(s, &key_off, &key_len, &key_decoded);
    if (r != OK) {
        return r;
    }
    skip_ws(s);
    if (s->pos >= s->len || s->src[s->pos] != ':') {
        return DECLINE;
    }
    s->pos++;
    if (s->n_members == s->cap_members &&
        reserve((void **)&s->members, &s->cap_members, s->n_members, 1, sizeof(Member)) != OK) {
        return NOMEM;
    }
    Member *member = &s->members[s->n_members++];
    member->key_off = key_off;
    member->key_len = key_len;
    member->key_decoded = key_decoded;
    member->start = s->n_out;
    Frame *frame = &s->stack[depth - 1];
    if (out_newline(s, ",", frame->count ? 1 : 0, level + depth) != OK) {
        return NOMEM;
    }
    frame->count++;
    r = write_string(s, (key_decoded ? s->scratch : s->src) + key_off, key_len, key_decoded);
    if (r != OK || out_reserve(s, 2) != OK) {
        return NOMEM;
    }
    out_bytes(s, ": ", 2);
    goto value;
}
}

/* ---- module ------------------------------------------------------------------------------ */

static void
state_free(State *s)
{
    PyMem_Free(s->scratch);
    PyMem_Free(s->stack);
    PyMem_Free(s->members);
    PyMem_Free(s->moved);
    Py_CLEAR(s->out_obj);
    s->out = NULL;
}

/* The UTF-8 bytes of one text: bytes, str (its UTF-8; a str with a lone surrogate has none,
 * which declines) or another contiguous bytes-like object (*view is then held and must be
 * released; one that is not contiguous, a strided memoryview, declines). Returns OK, DECLINE,
 * or -1 with an exception set. The buffer protocol may run Python code (see the top). */
static int
text_bytes(PyObject *item, const unsigned char **data, size_t *len, Py_buffer *view, int *held)
{
    *held = 0;
    if (PyBytes_Check(item)) {
        *data = (const unsigned char *)PyBytes_AS_STRING(item);
        *len = (size_t)PyBytes_GET_SIZE(item);
        return OK;
    }
    if (PyUnicode_Check(item)) {
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(item, &size);
        if (utf8 == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear();
                return DECLINE;
            }
            return -1;
        }
        *data = (const unsigned char *)utf8;
        *len = (size_t)size;
        return OK;
    }
    if (PyObject_CheckBuffer(item)) {
        if (PyObject_GetBuffer(item, view, PyBUF_SIMPLE) < 0) {
            if (PyErr_ExceptionMatches(PyExc_BufferError)) {
                PyErr_Clear(); /* not one contiguous run of bytes: the caller's path decides */
                return DECLINE;
            }
            return -1;
        }
        *held = 1;
        *data = (const unsigned char *)view->buf;
        *len = (size_t)view->len;
        return OK;
    }
    PyErr_Format(PyExc_TypeError, "a JSON text must be bytes or str, not %.100s",
                 Py_TYPE(item)->tp_name);
    return -1;
}

/* The item at `i` of the caller's sequence (a list or tuple from PySequence_Fast) as a new
 * reference, or NULL when the sequence no longer holds `count` items: Python code that ran
 * during the call (see the top) changed it, and the call declines. Each item is read afresh
 * (never through a pointer to the list's storage kept across a point where Python code may
 * run) and held while it is laid out: one reference count on a line the layout reads
 * anyway, where a copy of the whole list cost 4-10 % of layout_rows (cache misses). */
static inline PyObject *
item_at(PyObject *sequence, Py_ssize_t count, Py_ssize_t i)
{
    if (PySequence_Fast_GET_SIZE(sequence) != count) {
        return NULL;
    }
    return Py_NewRef(PySequence_Fast_GET_ITEM(sequence, i));
}

static Py_ssize_t
level_argument(PyObject *arg, const char *name)
{
    Py_ssize_t value = PyLong_AsSsize_t(arg);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (value < 0 || value > MAX_LEVEL_ARG) {
        PyErr_Format(PyExc_ValueError, "%s must be in 0..%d", name, MAX_LEVEL_ARG);
        return -1;
    }
    return value;
}

PyDoc_STRVAR(layout_rows_doc,
             "layout_rows(texts, depth, max_depth, /)\n--\n\n"
             "The §5.4 bytes of JSON texts as array elements at depth, or None to decline.");

static PyObject *
layout_rows(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "layout_rows takes texts, depth and max_depth");
        return NULL;
    }
    Py_ssize_t depth = level_argument(args[1], "depth");
    if (depth < 0) {
        return NULL;
    }
    Py_ssize_t max_depth = level_argument(args[2], "max_depth");
    if (max_depth < 0) {
        return NULL;
    }
    PyObject *sequence = PySequence_Fast(args[0], "texts must be a sequence");
    if (sequence == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    PyObject **items = PySequence_Fast_ITEMS(sequence); /* only until Python code may run */

    State s;
    memset(&s, 0, sizeof(s));
    s.max_depth = (size_t)max_depth;
    PyObject *result = NULL;
    int outcome = OK;
    /* A first guess of the output size: the texts plus a little layout each (at most
     * GUESS_CAP; the buffer grows past it when needed, and shrinks to size at the end). A low
     * guess costs one doubling of a batch-sized buffer; a high one is memory held at the peak
     * beside a huge value (tests/e2e/test_wide_rows_memory.py). */
    size_t guess = 64;
    for (Py_ssize_t i = 0; i < count && guess < GUESS_CAP; i++) {
        PyObject *item = items[i];
        size_t n = PyBytes_Check(item)     ? (size_t)PyBytes_GET_SIZE(item)
                   : PyUnicode_Check(item) ? (size_t)PyUnicode_GET_LENGTH(item)
                                           : 0;
        guess += (n < GUESS_CAP ? n + n / 16 : GUESS_CAP) + 16;
    }
    if (guess > GUESS_CAP) {
        guess = GUESS_CAP;
    }
    if (out_reserve(&s, guess) != OK) {
        outcome = NOMEM;
    }

    for (Py_ssize_t i = 0; i < count && outcome == OK; i++) {
        PyObject *item = item_at(sequence, count, i);
        if (item == NULL) {
            outcome = DECLINE;
            break;
        }
        Py_buffer view;
        int held;
        int got = text_bytes(item, &s.src, &s.len, &view, &held);
        if (got != OK) {
            Py_DECREF(item);
            if (got < 0) {
                goto done;
            }
            outcome = DECLINE;
            break;
        }
        if (i > 0) {
            outcome = out_newline(&s, ",", 1, (size_t)depth);
        }
        if (outcome == OK) {
            outcome = layout_text(&s, (size_t)depth);
        }
        if (held) {
            PyBuffer_Release(&view); /* may run Python code: the next item_at checks */
        }
        Py_DECREF(item);
    }

    if (outcome == OK) {
        if (_PyBytes_Resize(&s.out_obj, (Py_ssize_t)s.n_out) == 0) {
            result = s.out_obj;
        }
        s.out_obj = NULL; /* handed over, or freed by _PyBytes_Resize with its error set */
    }
    else if (outcome == DECLINE) {
        result = Py_NewRef(Py_None);
    }
    else {
        PyErr_NoMemory();
    }
done:
    state_free(&s);
    Py_DECREF(sequence);
    return result;
}

/* ---- rows from a driver's values (layout_columns) ----------------------------------------- */

/* What a column of layout_columns holds, and how its values are written (columns.py's
 * ColumnKind repeats these numbers). None is null for every kind; a value of another type
 * than its kind lists declines. */
enum {
    K_NUMBER = 0,   /* int (exactly, nothing else: a str declines, issue 39): a number */
    K_STRING = 1,   /* str: a string */
    K_DATETIME = 2, /* str "YYYY-MM-DD HH:MM:SS[.f]": MySQL's datetime_text, as a string */
    K_TIME = 3,     /* str of [-0-9:.]: MySQL's time_text (fraction's trailing zeros), a string */
    K_BYTES = 4,    /* bytes or bytearray: standard base64 with padding, a string */
    K_JSON = 5,     /* str holding one JSON value: laid out as layout_rows lays out a text */
    K_SCALAR = 6,   /* str as K_STRING, int as K_NUMBER, bytes as K_BYTES */
    K_FLOAT = 7,    /* float: its repr (§5.3 float row), NaN and the infinities as strings */
    K_BOOL = 8,     /* bool: true or false */
    K_STAMP = 9,    /* str, a PostgreSQL timestamp's text: write_stamp of it, unzoned */
    K_ZONED = 10,   /* str, a PostgreSQL timestamptz's text (UTC session): write_stamp, zoned */
    K_JSONB = 11,   /* as K_JSON, but an integer -0 declines (PostgreSQL jsonb: canonical ints) */
    K_COUNT = 12
};

/* A Python error inside a conversion: MemoryError is NOMEM, any other declines (the caller's
 * path then meets the value and says what it makes of it). */
static int
converted_error(void)
{
    int nomem = PyErr_ExceptionMatches(PyExc_MemoryError);
    PyErr_Clear();
    return nomem ? NOMEM : DECLINE;
}

/* The UTF-8 of a str: an ASCII str's own bytes, else a new bytes object (*owned, released by
 * the caller) rather than the UTF-8 copy CPython would cache on the str for its lifetime. A
 * lone surrogate, which has no UTF-8, declines. */
static int
str_utf8(PyObject *item, const unsigned char **data, size_t *len, PyObject **owned)
{
    *owned = NULL;
    if (PyUnicode_IS_ASCII(item)) {
        *data = PyUnicode_1BYTE_DATA(item);
        *len = (size_t)PyUnicode_GET_LENGTH(item);
        return OK;
    }
    *owned = PyUnicode_AsUTF8String(item);
    if (*owned == NULL) {
        return converted_error();
    }
    *data = (const unsigned char *)PyBytes_AS_STRING(*owned);
    *len = (size_t)PyBytes_GET_SIZE(*owned);
    return OK;
}

/* An exact int in decimal digits (beyond 64 bits: its str). */
static int
write_int(State *s, PyObject *item)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return converted_error();
    }
    if (overflow) {
        PyObject *text = PyObject_Str(item);
        if (text == NULL) {
            return converted_error();
        }
        const unsigned char *data;
        size_t len;
        PyObject *owned;
        int r = str_utf8(text, &data, &len, &owned);
        if (r == OK) {
            r = out_reserve(s, len) != OK ? NOMEM : OK;
            if (r == OK) {
                out_bytes(s, data, len);
            }
        }
        Py_XDECREF(owned);
        Py_DECREF(text);
        return r;
    }
    char digits[24];
    char *end = digits + sizeof(digits);
    char *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *--p = '-';
    }
    if (out_reserve(s, (size_t)(end - p)) != OK) {
        return NOMEM;
    }
    out_bytes(s, p, (size_t)(end - p));
    return OK;
}

/* MySQL's datetime_text (fetcher.adapters.sql.mysql) of the server's DATETIME/TIMESTAMP text:
 * "YYYY-MM-DDTHH:MM:SS[.fraction without trailing zeros]Z", or with a space and no Z for a
 * zero year, month or day (the engine's text). Any other shape declines. */
static int
write_datetime(State *s, const unsigned char *t, size_t n)
{
    if (!datetime_shape(t, n)) {
        return DECLINE;
    }
    size_t end = n;
    while (end > 20 && t[end - 1] == '0') {
        end--;
    }
    int zero = memcmp(t, "0000", 4) == 0 || (t[5] == '0' && t[6] == '0') ||
               (t[8] == '0' && t[9] == '0');
    if (out_reserve(s, 32) != OK) {
        return NOMEM;
    }
    out_byte(s, '"');
    out_bytes(s, t, 10);
    out_byte(s, zero ? ' ' : 'T');
    out_bytes(s, t + 11, 8);
    if (end > 20) {
        out_bytes(s, t + 19, end - 19); /* "." and the fraction */
    }
    if (!zero) {
        out_byte(s, 'Z');
    }
    out_byte(s, '"');
    return OK;
}

/* MySQL's time_text: TIME text ([-]HHH:MM:SS[.ffffff]) with, when it holds a '.', its
 * trailing zeros and then dots removed. Characters other than digits, '-', ':' and '.'
 * decline. */
static int
write_time(State *s, const unsigned char *t, size_t n)
{
    int dot = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = t[i];
        if (c == '.') {
            dot = 1;
        }
        else if (!is_digit(c) && c != '-' && c != ':') {
            return DECLINE;
        }
    }
    if (dot) {
        while (n > 0 && t[n - 1] == '0') {
            n--;
        }
        while (n > 0 && t[n - 1] == '.') {
            n--;
        }
    }
    return write_quoted(s, t, n); /* nothing to escape */
}

static const char base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding, as a string (§5.3 bytes). */
static int
write_base64(State *s, const unsigned char *b, size_t n)
{
    size_t groups = n / 3 + (n % 3 != 0);
    if (groups > ((size_t)PY_SSIZE_T_MAX - 2) / 4 || out_reserve(s, 4 * groups + 2) != OK) {
        return NOMEM;
    }
    char *d = s->out + s->n_out;
    *d++ = '"';
    size_t i = 0;
    for (; n - i >= 3; i += 3) {
        uint32_t v = ((uint32_t)b[i] << 16) | ((uint32_t)b[i + 1] << 8) | b[i + 2];
        d[0] = base64_alphabet[v >> 18];
        d[1] = base64_alphabet[(v >> 12) & 63];
        d[2] = base64_alphabet[(v >> 6) & 63];
        d[3] = base64_alphabet[v & 63];
        d += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)b[i] << 16;
        d[0] = base64_alphabet[v >> 18];
        d[1] = base64_alphabet[(v >> 12) & 63];
        d[2] = '=';
        d[3] = '=';
        d += 4;
    }
    else if (n - i == 2) {
        uint32_t v = ((uint32_t)b[i] << 16) | ((uint32_t)b[i + 1] << 8);
        d[0] = base64_alphabet[v >> 18];
        d[1] = base64_alphabet[(v >> 12) & 63];
        d[2] = base64_alphabet[(v >> 6) & 63];
        d[3] = '=';
        d += 4;
    }
    *d++ = '"';
    s->n_out = (size_t)(d - s->out);
    return OK;
}

/* A float as the engine writes it (fetcher.adapters.jsonlayout.fastjson._float_value): its repr, the
 * shortest text that round-trips; "NaN", "Infinity" and "-Infinity" as strings. */
static int
write_float(State *s, double v)
{
    if (!isfinite(v)) {
        const char *text = isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
        size_t n = strlen(text);
        if (out_reserve(s, n) != OK) {
            return NOMEM;
        }
        out_bytes(s, text, n);
        return OK;
    }
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) {
        return converted_error();
    }
    size_t n = strlen(repr);
    int r = out_reserve(s, n) != OK ? NOMEM : OK;
    if (r == OK) {
        out_bytes(s, repr, n);
    }
    PyMem_Free(repr);
    return r;
}

/* One value of a column of `kind`, as a member's value at `level`. */
static int
write_value(State *s, PyObject *item, int kind, size_t level)
{
    if (item == Py_None) {
        if (out_reserve(s, 4) != OK) {
            return NOMEM;
        }
        out_bytes(s, "null", 4);
        return OK;
    }
    if (kind == K_SCALAR) {
        kind = PyUnicode_CheckExact(item) ? K_STRING
               : PyLong_CheckExact(item)  ? K_NUMBER
                                          : K_BYTES;
    }
    if (kind == K_BYTES) {
        if (PyBytes_CheckExact(item)) {
            return write_base64(s, (const unsigned char *)PyBytes_AS_STRING(item),
                                (size_t)PyBytes_GET_SIZE(item));
        }
        if (PyByteArray_CheckExact(item)) {
            return write_base64(s, (const unsigned char *)PyByteArray_AS_STRING(item),
                                (size_t)PyByteArray_GET_SIZE(item));
        }
        return DECLINE;
    }
    if (kind == K_NUMBER) {
        /* only an exact int: a str that reads as a number is a string on the general path
         * (a driver hands one over when the column is not what discovery said) */
        return PyLong_CheckExact(item) ? write_int(s, item) : DECLINE;
    }
    if (kind == K_FLOAT) {
        return PyFloat_CheckExact(item) ? write_float(s, PyFloat_AS_DOUBLE(item)) : DECLINE;
    }
    if (kind == K_BOOL) {
        if (item != Py_True && item != Py_False) {
            return DECLINE;
        }
        const char *word = item == Py_True ? "true" : "false";
        size_t n = item == Py_True ? 4 : 5;
        if (out_reserve(s, n) != OK) {
            return NOMEM;
        }
        out_bytes(s, word, n);
        return OK;
    }
    if (!PyUnicode_CheckExact(item)) {
        return DECLINE; /* a bool, a float, a subclass, ...: the caller's path knows */
    }
    const unsigned char *text;
    size_t len;
    PyObject *owned;
    int r = str_utf8(item, &text, &len, &owned);
    if (r != OK) {
        return r;
    }
    switch (kind) {
    case K_STRING:
        r = write_text(s, text, len);
        break;
    case K_DATETIME:
        r = write_datetime(s, text, len);
        break;
    case K_TIME:
        r = write_time(s, text, len);
        break;
    case K_STAMP:
    case K_ZONED:
        /* ASCII only: the general path's indices are characters, these bytes */
        r = PyUnicode_IS_ASCII(item) ? write_stamp(s, text, len, kind == K_ZONED) : DECLINE;
        break;
    case K_JSON:
    case K_JSONB:
        s->src = text;
        s->len = len;
        s->canonical_ints = kind == K_JSONB;
        r = layout_text(s, level);
        break;
    default:
        r = DECLINE;
        break;
    }
    Py_XDECREF(owned);
    return r;
}

/* A guess of the output size of `count` rows (see layout_rows): their str and bytes values plus
 * the keys and the layout of every member. */
static size_t
columns_guess(PyObject **rows, Py_ssize_t count, size_t member_bytes)
{
    size_t guess = 64;
    for (Py_ssize_t i = 0; i < count && guess < GUESS_CAP; i++) {
        PyObject *row = rows[i];
        if (!PyTuple_CheckExact(row)) {
            break; /* layout_columns declines it */
        }
        guess += member_bytes;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); j++) {
            PyObject *item = PyTuple_GET_ITEM(row, j);
            size_t n = PyBytes_CheckExact(item)     ? (size_t)PyBytes_GET_SIZE(item) / 3 * 4
                       : PyUnicode_CheckExact(item) ? (size_t)PyUnicode_GET_LENGTH(item)
                                                    : 8;
            guess += n < GUESS_CAP ? n + n / 16 : GUESS_CAP;
        }
    }
    return guess > GUESS_CAP ? GUESS_CAP : guess;
}

PyDoc_STRVAR(layout_columns_doc,
             "layout_columns(rows, order, keys, kinds, depth, max_depth, /)\n--\n\n"
             "The §5.4 bytes of driver rows (tuples) as row objects at depth, or None to "
             "decline.");

static PyObject *
layout_columns(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "layout_columns takes rows, order, keys, kinds, depth and max_depth");
        return NULL;
    }
    Py_ssize_t depth = level_argument(args[4], "depth");
    if (depth < 0) {
        return NULL;
    }
    Py_ssize_t max_depth = level_argument(args[5], "max_depth");
    if (max_depth < 0) {
        return NULL;
    }
    PyObject *order = args[1], *keys = args[2], *kinds = args[3];
    if (!PyTuple_CheckExact(order) || !PyTuple_CheckExact(keys) || !PyBytes_CheckExact(kinds)) {
        PyErr_SetString(PyExc_TypeError, "order and keys must be tuples, kinds bytes");
        return NULL;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(order);
    if (width == 0 || PyTuple_GET_SIZE(keys) != width || PyBytes_GET_SIZE(kinds) != width) {
        PyErr_SetString(PyExc_ValueError, "order, keys and kinds must be as long, and not empty");
        return NULL;
    }
    const unsigned char *kind_of = (const unsigned char *)PyBytes_AS_STRING(kinds);
    Py_ssize_t *column_at = PyMem_New(Py_ssize_t, (size_t)width);
    if (column_at == NULL) {
        return PyErr_NoMemory();
    }
    size_t member_bytes = 16;
    for (Py_ssize_t j = 0; j < width; j++) {
        PyObject *index = PyTuple_GET_ITEM(order, j);
        PyObject *key = PyTuple_GET_ITEM(keys, j);
        Py_ssize_t at = PyLong_Check(index) ? PyLong_AsSsize_t(index) : -1;
        if (at < 0 || at >= width || !PyBytes_CheckExact(key) || kind_of[j] >= K_COUNT) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError,
                                "order holds column indices, keys bytes, kinds known kinds");
            }
            PyMem_Free(column_at);
            return NULL;
        }
        column_at[j] = at;
        member_bytes += (size_t)PyBytes_GET_SIZE(key) + 2 * (size_t)depth + 8;
    }
    PyObject *sequence = PySequence_Fast(args[0], "rows must be a sequence");
    if (sequence == NULL) {
        PyMem_Free(column_at);
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    PyObject **rows = PySequence_Fast_ITEMS(sequence); /* only for the guess: no Python runs */

    State s;
    memset(&s, 0, sizeof(s));
    s.max_depth = (size_t)max_depth;
    PyObject *result = NULL;
    int outcome = out_reserve(&s, columns_guess(rows, count, member_bytes));

    PyObject *row = NULL; /* held while its values are written (a tuple: they are its own) */
    for (Py_ssize_t i = 0; i < count && outcome == OK; i++) {
        Py_XSETREF(row, item_at(sequence, count, i));
        if (row == NULL) {
            outcome = DECLINE;
            break;
        }
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != width) {
            outcome = DECLINE; /* the caller's path reports a row of another width */
            break;
        }
        if (i > 0) {
            outcome = out_newline(&s, ",", 1, (size_t)depth);
        }
        if (outcome == OK) {
            outcome = out_reserve(&s, 1);
        }
        if (outcome != OK) {
            break;
        }
        out_byte(&s, '{');
        for (Py_ssize_t j = 0; j < width && outcome == OK; j++) {
            PyObject *key = PyTuple_GET_ITEM(keys, j);
            size_t key_len = (size_t)PyBytes_GET_SIZE(key);
            outcome = out_newline(&s, ",", j ? 1 : 0, (size_t)depth + 1);
            if (outcome == OK) {
                outcome = out_reserve(&s, key_len + 2);
            }
            if (outcome == OK) {
                out_bytes(&s, PyBytes_AS_STRING(key), key_len);
                out_bytes(&s, ": ", 2);
                outcome = write_value(&s, PyTuple_GET_ITEM(row, column_at[j]), kind_of[j],
                                      (size_t)depth + 1);
            }
        }
        if (outcome == OK) {
            outcome = out_newline(&s, "", 0, (size_t)depth);
        }
        if (outcome == OK) {
            outcome = out_reserve(&s, 1);
        }
        if (outcome == OK) {
            out_byte(&s, '}');
        }
    }
    Py_XDECREF(row);

    if (outcome == OK) {
        if (_PyBytes_Resize(&s.out_obj, (Py_ssize_t)s.n_out) == 0) {
            result = s.out_obj;
        }
        s.out_obj = NULL;
    }
    else if (outcome == DECLINE) {
        result = Py_NewRef(Py_None);
    }
    else {
        PyErr_NoMemory();
    }
    state_free(&s);
    PyMem_Free(column_at);
    Py_DECREF(sequence);
    return result;
}

static PyMethodDef methods[] = {
    {"layout_rows", (PyCFunction)(void (*)(void))layout_rows, METH_FASTCALL, layout_rows_doc},
    {"layout_columns", (PyCFunction)(void (*)(void))layout_columns, METH_FASTCALL,
     layout_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fetcher.adapters.jsonlayout._native",
    .m_doc = "JSON texts re-laid out as contract §5.4 bytes (see texts.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    init_tables();
    return PyModuleDef_Init(&module);
}
