/*
 * fetcher.adapters._json_layout: JSON texts re-laid out as contract §5.4 bytes, in C, without
 * building Python objects (issue 23). The Python API and its contract are in json_layout.py.
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
 * Robustness: every read is bounds-checked against the text's length; parsing and writing are
 * iterative with explicit stacks bounded by max_depth (no C recursion, so 10^6 nested brackets
 * only cost the walk to the bound); every size computation is checked for overflow; the GIL is
 * held throughout and no Python code runs, so the texts cannot change under the parser. Out of
 * memory raises MemoryError; wrong argument types raise TypeError/ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Outcome of every internal step. */
enum { OK = 0, DECLINE = 1, NOMEM = 2 };

enum { T_NULL, T_TRUE, T_FALSE, T_NUMBER, T_STRING, T_ARRAY, T_OBJECT };

#define NO_NODE UINT32_MAX
/* The caller's bounds on depth and max_depth: far beyond any use, small enough that indentation
 * arithmetic (2 * (depth + max_depth) + a few bytes) cannot overflow. */
#define MAX_LEVEL_ARG (1 << 20)
/* The largest first allocation of the result (64 MiB); it grows by doubling beyond. */
#define GUESS_CAP ((size_t)1 << 26)

/* One parsed value. Offsets, not pointers: the buffers they point into may move as they grow.
 * A string value or key is either a slice of the source text (no escapes: it is its own
 * decoded UTF-8, and needs no escaping on output since '"', '\\' and controls cannot occur in
 * it raw) or, when it had escapes, its decoded bytes in the scratch buffer. */
typedef struct {
    size_t off;      /* number, string: where its text starts */
    size_t len;      /* ... and its length */
    size_t key_off;  /* member of an object: its key */
    size_t key_len;
    uint32_t next;   /* next element or member of the parent, NO_NODE after the last */
    uint32_t first;  /* container: its first child (NO_NODE when empty) */
    uint32_t count;  /* container: its number of children */
    uint8_t type;
    uint8_t decoded;     /* string value held in scratch */
    uint8_t key_decoded; /* key held in scratch */
} Node;

/* An open container while parsing: its node and its last child so far. */
typedef struct {
    uint32_t node;
    uint32_t last;
} Frame;

/* An object member while sorting by key. */
typedef struct {
    const unsigned char *key;
    size_t len;
    uint32_t node;
} Member;

typedef struct {
    /* the current text */
    const unsigned char *src;
    size_t len;
    size_t pos;
    size_t max_depth;
    /* per-text buffers, reused from one text to the next */
    Node *nodes;
    size_t n_nodes, cap_nodes;
    unsigned char *scratch;
    size_t n_scratch, cap_scratch;
    Frame *stack;
    size_t cap_stack;
    Member *members;
    size_t cap_members;
    /* the result */
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

static inline int
out_reserve(State *s, size_t need)
{
    if (s->cap_out - s->n_out >= need) {
        return OK;
    }
    return reserve((void **)&s->out, &s->cap_out, s->n_out, need, 1);
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
parse_string(State *s, size_t *off, size_t *len, uint8_t *decoded)
{
    const unsigned char *p = s->src;
    size_t n = s->len;
    size_t start = s->pos;
    size_t i = start;

    /* Fast scan: no escape means the decoded text is the source slice. */
    for (;;) {
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

/* A number at s->pos, checked against the JSON grammar
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?  and kept as its source text. */
static int
parse_number(State *s, Node *node)
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
    node->type = T_NUMBER;
    node->off = s->pos;
    node->len = i - s->pos;
    s->pos = i;
    return OK;
}

static int
parse_literal(State *s, Node *node, const char *word, size_t n, uint8_t type)
{
    if (s->len - s->pos < n || memcmp(s->src + s->pos, word, n) != 0) {
        return DECLINE;
    }
    s->pos += n;
    node->type = type;
    return OK;
}

static inline const unsigned char *
key_of(const State *s, const Node *node)
{
    return (node->key_decoded ? s->scratch : s->src) + node->key_off;
}

/* Code point order of two keys: the byte order of their UTF-8, shorter first on a tie. */
static inline int
compare_keys(const unsigned char *a, size_t a_len, const unsigned char *b, size_t b_len)
{
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    if (c != 0) {
        return c;
    }
    return a_len < b_len ? -1 : (a_len > b_len ? 1 : 0);
}

static int
compare_members(const void *a, const void *b)
{
    const Member *x = a, *y = b;
    return compare_keys(x->key, x->len, y->key, y->len);
}

/* A closed object: its members relinked in key order; DECLINE on a duplicate key. Most objects
 * arrive sorted (json_build_object in key order), which one pass confirms. */
static int
finish_object(State *s, uint32_t object)
{
    Node *nodes = s->nodes;
    size_t count = nodes[object].count;
    if (count < 2) {
        return OK;
    }
    uint32_t a = nodes[object].first;
    uint32_t b = nodes[a].next;
    while (b != NO_NODE) {
        if (compare_keys(key_of(s, &nodes[a]), nodes[a].key_len, key_of(s, &nodes[b]),
                         nodes[b].key_len) >= 0) {
            break;
        }
        a = b;
        b = nodes[b].next;
    }
    if (b == NO_NODE) {
        return OK; /* strictly increasing: sorted, and no key twice */
    }
    if (reserve((void **)&s->members, &s->cap_members, 0, count, sizeof(Member)) != OK) {
        return NOMEM;
    }
    size_t i = 0;
    for (uint32_t m = nodes[object].first; m != NO_NODE; m = nodes[m].next) {
        s->members[i].key = key_of(s, &nodes[m]);
        s->members[i].len = nodes[m].key_len;
        s->members[i].node = m;
        i++;
    }
    qsort(s->members, count, sizeof(Member), compare_members);
    for (i = 1; i < count; i++) {
        if (compare_members(&s->members[i - 1], &s->members[i]) == 0) {
            return DECLINE; /* a duplicate key */
        }
    }
    nodes[object].first = s->members[0].node;
    for (i = 0; i + 1 < count; i++) {
        nodes[s->members[i].node].next = s->members[i + 1].node;
    }
    nodes[s->members[count - 1].node].next = NO_NODE;
    return OK;
}

/* The whole text as a tree of nodes (node 0 is the value). Iterative: the open containers are
 * on s->stack, at most max_depth of them. */
static int
parse(State *s)
{
    size_t depth = 0;
    size_t key_off = 0, key_len = 0;
    uint8_t key_decoded = 0;
    int r;

    s->pos = 0;
    s->n_nodes = 0;
    s->n_scratch = 0;

value:
    skip_ws(s);
    if (s->pos >= s->len) {
        return DECLINE;
    }
    {
        if (s->n_nodes >= (size_t)NO_NODE - 1) {
            return DECLINE; /* more values than 32-bit indices count */
        }
        if (reserve((void **)&s->nodes, &s->cap_nodes, s->n_nodes, 1, sizeof(Node)) != OK) {
            return NOMEM;
        }
        uint32_t index = (uint32_t)s->n_nodes++;
        Node *node = &s->nodes[index];
        memset(node, 0, sizeof(Node));
        node->next = NO_NODE;
        node->first = NO_NODE;
        if (depth > 0) {
            Frame *frame = &s->stack[depth - 1];
            Node *parent = &s->nodes[frame->node];
            if (parent->type == T_OBJECT) {
                node->key_off = key_off;
                node->key_len = key_len;
                node->key_decoded = key_decoded;
            }
            if (frame->last == NO_NODE) {
                parent->first = index;
            }
            else {
                s->nodes[frame->last].next = index;
            }
            frame->last = index;
            parent->count++;
        }
        unsigned char c = s->src[s->pos];
        switch (c) {
        case '{':
        case '[': {
            if (depth >= s->max_depth) {
                return DECLINE; /* deeper than the bound: the caller's path reports it */
            }
            if (reserve((void **)&s->stack, &s->cap_stack, depth, 1, sizeof(Frame)) != OK) {
                return NOMEM;
            }
            node = &s->nodes[index];
            node->type = c == '{' ? T_OBJECT : T_ARRAY;
            s->stack[depth].node = index;
            s->stack[depth].last = NO_NODE;
            depth++;
            s->pos++;
            skip_ws(s);
            if (s->pos < s->len && s->src[s->pos] == (c == '{' ? '}' : ']')) {
                s->pos++;
                depth--; /* empty */
                goto after;
            }
            if (c == '{') {
                goto key;
            }
            goto value;
        }
        case '"':
            s->pos++;
            r = parse_string(s, &node->off, &node->len, &node->decoded);
            if (r != OK) {
                return r;
            }
            node->type = T_STRING;
            goto after;
        case 't':
            r = parse_literal(s, node, "true", 4, T_TRUE);
            break;
        case 'f':
            r = parse_literal(s, node, "false", 5, T_FALSE);
            break;
        case 'n':
            r = parse_literal(s, node, "null", 4, T_NULL);
            break;
        default:
            r = parse_number(s, node);
            break;
        }
        if (r != OK) {
            return r;
        }
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
        uint32_t open = s->stack[depth - 1].node;
        int is_object = s->nodes[open].type == T_OBJECT;
        unsigned char c = s->src[s->pos++];
        if (c == ',') {
            if (is_object) {
                goto key;
            }
            goto value;
        }
        if (c != (is_object ? '}' : ']')) {
            return DECLINE;
        }
        depth--;
        if (is_object) {
            r = finish_object(s, open);
            if (r != OK) {
                return r;
            }
        }
        goto after;
    }

key:
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
    goto value;
}

/* ---- writing ----------------------------------------------------------------------------- */

/* §5.4 escapes of the bytes below 0x20 (others are written as they are, but '"' and '\\'). */
static const char *const control_escapes[0x20] = {
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
};

/* A string literal of decoded UTF-8 bytes, or of a source slice without escapes (which holds
 * nothing to escape: it is copied between quotes). */
static int
write_string(State *s, const unsigned char *text, size_t len, int decoded)
{
    if (!decoded) {
        if (len > (size_t)PY_SSIZE_T_MAX - 2 || out_reserve(s, len + 2) != OK) {
            return NOMEM;
        }
        out_byte(s, '"');
        out_bytes(s, text, len);
        out_byte(s, '"');
        return OK;
    }
    /* at most 6 bytes per byte (\u00xx), plus the quotes */
    if (len > ((size_t)PY_SSIZE_T_MAX - 2) / 6 || out_reserve(s, 6 * len + 2) != OK) {
        return NOMEM;
    }
    char *d = s->out + s->n_out;
    *d++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = text[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *d++ = (char)c;
        }
        else if (c == '"' || c == '\\') {
            *d++ = '\\';
            *d++ = (char)c;
        }
        else {
            const char *e = control_escapes[c];
            size_t k = strlen(e);
            memcpy(d, e, k);
            d += k;
        }
    }
    *d++ = '"';
    s->n_out = (size_t)(d - s->out);
    return OK;
}

static int
write_key(State *s, const Node *node)
{
    if (write_string(s, key_of(s, node), node->key_len, node->key_decoded) != OK ||
        out_reserve(s, 2) != OK) {
        return NOMEM;
    }
    out_bytes(s, ": ", 2);
    return OK;
}

static int
write_scalar(State *s, const Node *node)
{
    switch (node->type) {
    case T_NULL:
    case T_TRUE:
    case T_FALSE: {
        const char *word = node->type == T_NULL ? "null" : (node->type == T_TRUE ? "true" : "false");
        size_t n = strlen(word);
        if (out_reserve(s, n) != OK) {
            return NOMEM;
        }
        out_bytes(s, word, n);
        return OK;
    }
    case T_NUMBER:
        if (out_reserve(s, node->len) != OK) {
            return NOMEM;
        }
        out_bytes(s, s->src + node->off, node->len);
        return OK;
    case T_STRING:
        return write_string(s, (node->decoded ? s->scratch : s->src) + node->off, node->len,
                            node->decoded);
    default: /* an empty container */
        if (out_reserve(s, 2) != OK) {
            return NOMEM;
        }
        out_bytes(s, node->type == T_OBJECT ? "{}" : "[]", 2);
        return OK;
    }
}

/* The parsed value (node 0) at `level`, walked without recursion: the stack holds the open
 * containers (their nodes in Frame.node), at most max_depth of them. */
static int
write_value(State *s, size_t level)
{
    size_t depth = 0;
    uint32_t current = 0;
    for (;;) {
        const Node *node = &s->nodes[current];
        if ((node->type == T_OBJECT || node->type == T_ARRAY) && node->count > 0) {
            /* the parser pushed this many containers, so the stack has the room */
            if (out_reserve(s, 1) != OK) {
                return NOMEM;
            }
            out_byte(s, node->type == T_OBJECT ? '{' : '[');
            s->stack[depth++].node = current;
            current = node->first;
            if (out_newline(s, "", 0, level + depth) != OK) {
                return NOMEM;
            }
            if (node->type == T_OBJECT && write_key(s, &s->nodes[current]) != OK) {
                return NOMEM;
            }
            continue;
        }
        if (write_scalar(s, node) != OK) {
            return NOMEM;
        }
        /* the value is complete: on to the next sibling, closing finished containers */
        for (;;) {
            if (depth == 0) {
                return OK;
            }
            uint32_t parent = s->stack[depth - 1].node;
            uint32_t next = s->nodes[current].next;
            if (next != NO_NODE) {
                current = next;
                if (out_newline(s, ",", 1, level + depth) != OK) {
                    return NOMEM;
                }
                if (s->nodes[parent].type == T_OBJECT &&
                    write_key(s, &s->nodes[current]) != OK) {
                    return NOMEM;
                }
                break;
            }
            depth--;
            if (out_newline(s, "", 0, level + depth) != OK || out_reserve(s, 1) != OK) {
                return NOMEM;
            }
            out_byte(s, s->nodes[parent].type == T_OBJECT ? '}' : ']');
            current = parent;
        }
    }
}

/* ---- module ------------------------------------------------------------------------------ */

static void
state_free(State *s)
{
    PyMem_Free(s->nodes);
    PyMem_Free(s->scratch);
    PyMem_Free(s->stack);
    PyMem_Free(s->members);
    PyMem_Free(s->out);
}

/* The UTF-8 bytes of one text: bytes, str (its UTF-8; a str with a lone surrogate has none,
 * which declines) or another contiguous bytes-like object (*view is then held and must be
 * released). Returns OK, DECLINE, or -1 with an exception set. */
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
    PyObject **items = PySequence_Fast_ITEMS(sequence);

    State s;
    memset(&s, 0, sizeof(s));
    s.max_depth = (size_t)max_depth;
    PyObject *result = NULL;
    int outcome = OK;

    /* A first guess of the output size: the texts plus a little layout each (at most
     * GUESS_CAP; the buffer grows past it when needed). */
    size_t guess = 64;
    for (Py_ssize_t i = 0; i < count && guess < GUESS_CAP; i++) {
        PyObject *item = items[i];
        size_t n = PyBytes_Check(item)     ? (size_t)PyBytes_GET_SIZE(item)
                   : PyUnicode_Check(item) ? (size_t)PyUnicode_GET_LENGTH(item)
                                           : 0;
        guess += (n < GUESS_CAP ? n + n / 4 : GUESS_CAP) + 16;
    }
    if (guess > GUESS_CAP) {
        guess = GUESS_CAP;
    }
    if (out_reserve(&s, guess) != OK) {
        outcome = NOMEM;
    }

    for (Py_ssize_t i = 0; i < count && outcome == OK; i++) {
        Py_buffer view;
        int held;
        int got = text_bytes(items[i], &s.src, &s.len, &view, &held);
        if (got < 0) {
            goto done;
        }
        if (got == DECLINE) {
            outcome = DECLINE;
            break;
        }
        if (i > 0) {
            outcome = out_newline(&s, ",", 1, (size_t)depth);
        }
        if (outcome == OK) {
            outcome = parse(&s);
        }
        if (outcome == OK) {
            outcome = write_value(&s, (size_t)depth);
        }
        if (held) {
            PyBuffer_Release(&view);
        }
    }

    if (outcome == OK) {
        result = PyBytes_FromStringAndSize(s.out, (Py_ssize_t)s.n_out);
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

static PyMethodDef methods[] = {
    {"layout_rows", (PyCFunction)(void (*)(void))layout_rows, METH_FASTCALL, layout_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fetcher.adapters._json_layout",
    .m_doc = "JSON texts re-laid out as contract §5.4 bytes (see json_layout.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__json_layout(void)
{
    init_tables();
    return PyModuleDef_Init(&module);
}
