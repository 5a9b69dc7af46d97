/* template.h — the chat-template engine's internals: a Jinja subset, rendered the way
 * Hugging Face transformers renders tokenizer.chat_template with jinja2
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols).
 *
 * The files, in the order a render goes through them:
 *   template.c           the arena, errors, output buffers, UTF-8 helpers; the public API
 *                        (lean_chat_render...), the ChatML fallback, the model's template
 *   template_lex.c       source -> tokens (jinja2's lexer rules)
 *   template_parse.c     tokens -> tj_node tree (jinja2's parser)
 *   template_eval.c      the tree -> output: scopes, statements, expressions, Python's
 *                        operators, attribute and item lookup, calls, macros, loops
 *   template_builtins.c  filters, tests, global functions
 *   template_text.c      Python's str()/repr()/json.dumps()/% of values, str/dict/list
 *                        methods, the text helpers the filters share
 *
 * Memory: everything a parse and a render make (tokens, nodes, values, strings, output
 * buffers) comes from one arena (tj_ctx.arena) freed at once at the end, so an error can
 * leave from anywhere without leaking. The arena takes at most TJ_MAX_BYTES.
 *
 * Errors: the first failure is kept in tj_ctx (status + message); every function that can
 * fail returns false (or NULL) after calling tj_fail, and callers pass that up. Messages
 * name the template position: "template line 3 col 12: filter 'urlize' is not supported".
 */
#ifndef LEAN_TEMPLATE_H
#define LEAN_TEMPLATE_H

#include "core/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits (each one ends a render with an error naming it) ---- */
#define TJ_MAX_BYTES (256ull << 20) /* arena bytes for one parse + render */
#define TJ_MAX_PARSE_DEPTH 100      /* nested blocks + nested expressions */
#define TJ_MAX_CALL_DEPTH 64        /* nesting of values printed or written as JSON */
#define TJ_MAX_MACRO_DEPTH 32       /* nested macro calls (recursion) */
#define TJ_MAX_EVAL_DEPTH 1000      /* nested evaluation (expressions, statements, calls) */
#define TJ_MAX_STEPS 10000000ull    /* statements, loop iterations and calls, all counted */
#define TJ_CHUNK_BYTES 32768        /* default arena chunk */

/* ---- strings: a byte range; UTF-8 by convention, never NUL-terminated by contract ---- */
typedef struct tj_str {
    const char *p;
    size_t n; /* bytes */
} tj_str;

/* ---- the arena and the per-render context ---- */
typedef struct tj_chunk tj_chunk;
typedef struct tj_arena {
    tj_chunk *head;
    uint64_t total_bytes; /* all chunks, for the TJ_MAX_BYTES cap */
    size_t chunk_bytes;   /* size of a new chunk (tests make it tiny to multiply allocations) */
} tj_arena;

typedef struct tj_node tj_node;
typedef struct tj_frame tj_frame;

typedef struct tj_ctx {
    tj_arena arena;
    lean_error *err;       /* nullable */
    lean_status status;    /* LEAN_OK until the first failure */
    uint64_t steps;        /* TJ_MAX_STEPS */
    int call_depth;        /* TJ_MAX_MACRO_DEPTH */
    int eval_depth;        /* TJ_MAX_EVAL_DEPTH: bounds the C stack a render uses */
    int64_t now_s;         /* strftime_now's clock, seconds since 1970 UTC */
    struct tj_value *block_input; /* the body of {% set x | f %} / {% filter f %}: the value
                                     a filter chain with no operand applies to */
} tj_ctx;

void tj_ctx_init(tj_ctx *c, lean_error *err);
void tj_ctx_free(tj_ctx *c);
/* Records the first error ("template line L col C: ..." when line > 0); returns false. */
bool tj_fail(tj_ctx *c, int line, int col, lean_status st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Arena allocation, aligned for any type; NULL (and the error set) on failure. */
void *tj_alloc(tj_ctx *c, size_t bytes);
void *tj_alloc_array(tj_ctx *c, size_t n, size_t elem_bytes);
/* Grows an allocation (in place when it is the arena's latest), copying old_bytes. */
void *tj_realloc(tj_ctx *c, void *p, size_t old_bytes, size_t new_bytes);
tj_str tj_strdup(tj_ctx *c, const char *p, size_t n, bool *ok);

/* ---- output buffers (arena memory) ---- */
typedef struct tj_buf {
    char *p;
    size_t n, cap; /* bytes */
} tj_buf;
bool tj_buf_put(tj_ctx *c, tj_buf *b, const char *s, size_t n);
bool tj_buf_puts(tj_ctx *c, tj_buf *b, const char *s);
bool tj_buf_putc(tj_ctx *c, tj_buf *b, char ch);
bool tj_buf_printf(tj_ctx *c, tj_buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The buffer as a string (never a NULL pointer, even when empty). */
static inline tj_str tj_buf_str(const tj_buf *b) { return b->p ? (tj_str){b->p, b->n} : (tj_str){"", 0}; }

/* ---- UTF-8 (invalid bytes count as one character each, like a lenient decoder) ---- */
/* Decodes the character at s[*i] (advancing *i); returns its code point. */
uint32_t tj_utf8_next(const char *s, size_t n, size_t *i);
size_t tj_utf8_len(tj_str s); /* characters */
bool tj_buf_put_cp(tj_ctx *c, tj_buf *b, uint32_t cp);
/* Python's str.isspace() for one code point. */
bool tj_py_space(uint32_t cp);

/* ---- values: Python's objects as jinja2 sees them ---- */
enum tj_type {
    TJ_UNDEF,  /* jinja2's Undefined: prints "", iterates empty, fails on most uses */
    TJ_NONE,
    TJ_BOOL,
    TJ_INT,    /* int64: Python ints beyond it are refused with an error */
    TJ_FLOAT,
    TJ_STR,
    TJ_LIST,   /* list, tuple, generator, dict view, range: see tj_list.kind */
    TJ_DICT,   /* insertion-ordered */
    TJ_NS,     /* jinja2's namespace(): a dict reached by attribute, assignable in place */
    TJ_LOOP,   /* the loop variable */
    TJ_FUNC,   /* a global function, a bound method, a macro */
};
#define TJ_F_MARKUP 1u   /* TJ_STR: markupsafe.Markup (from |safe, |escape) */
#define TJ_F_UNSAFE 1u   /* TJ_UNDEF: an attribute the sandbox refuses (SecurityError) */
#define TJ_F_UNDEF_HINT 2u /* TJ_UNDEF: u.s is the whole message */
#define TJ_F_UNDEF_ATTR 4u /* TJ_UNDEF: u.s is a missing attribute or item */

enum tj_list_kind {
    TJ_L_LIST, TJ_L_TUPLE,
    TJ_L_GEN,     /* a one-shot iterator (select, map, reverse...): truthy, no len */
    TJ_L_ITEMS, TJ_L_KEYS, TJ_L_VALUES, /* dict views (items are (key, value) tuples) */
    TJ_L_RANGE,
};

typedef struct tj_list tj_list;
typedef struct tj_dict tj_dict;
typedef struct tj_loop tj_loop;
typedef struct tj_func tj_func;

typedef struct tj_value {
    uint8_t type;  /* enum tj_type */
    uint8_t flags; /* TJ_F_* */
    union {
        bool b;
        int64_t i;
        double f;
        tj_str s;  /* TJ_STR; TJ_UNDEF: the name or message for errors */
        tj_list *l;
        tj_dict *d; /* TJ_DICT, TJ_NS */
        tj_loop *loop;
        tj_func *fn;
    } u;
} tj_value;

struct tj_list {
    tj_value *v;
    size_t n, cap;
    uint8_t kind;        /* enum tj_list_kind */
    int64_t r_start, r_stop, r_step; /* TJ_L_RANGE: for repr */
};
struct tj_dict {
    tj_value *k, *v;
    size_t n, cap;
};
struct tj_loop {
    tj_list *items;      /* what the loop runs over */
    int64_t index0;
    int depth;           /* 1 for the outermost loop */
    tj_value last_changed;
    bool has_changed;
};
enum tj_func_kind { TJ_FN_GLOBAL, TJ_FN_METHOD, TJ_FN_MACRO };
struct tj_func {
    uint8_t kind;
    int id;              /* TJ_FN_GLOBAL / TJ_FN_METHOD: a builtin id (template_builtins.c) */
    tj_str name;
    tj_value self;       /* TJ_FN_METHOD: the bound object */
    const tj_node *macro;/* TJ_FN_MACRO */
    tj_frame *closure;   /* TJ_FN_MACRO: the scope it was defined in */
};

static inline tj_value tj_undef(tj_str name) { tj_value v = {TJ_UNDEF, 0, {0}}; v.u.s = name; return v; }
static inline tj_value tj_none(void) { tj_value v = {TJ_NONE, 0, {0}}; return v; }
static inline tj_value tj_bool(bool b) { tj_value v = {TJ_BOOL, 0, {0}}; v.u.b = b; return v; }
static inline tj_value tj_int(int64_t i) { tj_value v = {TJ_INT, 0, {0}}; v.u.i = i; return v; }
static inline tj_value tj_float(double f) { tj_value v = {TJ_FLOAT, 0, {0}}; v.u.f = f; return v; }
static inline tj_value tj_strv(tj_str s) { tj_value v = {TJ_STR, 0, {0}}; v.u.s = s; return v; }
static inline tj_str tj_cstr(const char *s);

/* New containers (arena); NULL on failure. */
tj_list *tj_list_new(tj_ctx *c, uint8_t kind, size_t cap);
bool tj_list_push(tj_ctx *c, tj_list *l, tj_value v);
tj_dict *tj_dict_new(tj_ctx *c, size_t cap);
/* Sets key (replacing an equal key's value, else appending). */
bool tj_dict_set(tj_ctx *c, tj_dict *d, tj_value k, tj_value v);
/* The value of an equal key, or NULL. */
tj_value *tj_dict_get(tj_dict *d, tj_value k);
tj_value *tj_dict_get_str(tj_dict *d, tj_str k);
static inline tj_value tj_listv(tj_list *l) { tj_value v = {TJ_LIST, 0, {0}}; v.u.l = l; return v; }
static inline tj_value tj_dictv(tj_dict *d) { tj_value v = {TJ_DICT, 0, {0}}; v.u.d = d; return v; }

/* ---- the syntax tree ---- */
enum tj_kind {
    /* expressions */
    TJ_N_CONST, TJ_N_NAME, TJ_N_ATTR, TJ_N_ITEM, TJ_N_SLICE, TJ_N_CALL, TJ_N_FILTER, TJ_N_TEST,
    TJ_N_NEG, TJ_N_POS, TJ_N_NOT, TJ_N_AND, TJ_N_OR, TJ_N_BIN, TJ_N_CONCAT, TJ_N_COMPARE,
    TJ_N_OPERAND, TJ_N_COND, TJ_N_LIST, TJ_N_TUPLE, TJ_N_DICT, TJ_N_NSREF,
    /* statements */
    TJ_N_DATA, TJ_N_OUTPUT, TJ_N_IF, TJ_N_FOR, TJ_N_SET, TJ_N_SETBLOCK, TJ_N_MACRO,
    TJ_N_FILTERBLOCK, TJ_N_WITH, TJ_N_BREAK, TJ_N_CONTINUE, TJ_N_BODY,
};
/* TJ_N_BIN ops and TJ_N_OPERAND (comparison) ops */
enum tj_op {
    TJ_OP_ADD, TJ_OP_SUB, TJ_OP_MUL, TJ_OP_DIV, TJ_OP_FLOORDIV, TJ_OP_MOD, TJ_OP_POW,
    TJ_OP_EQ, TJ_OP_NE, TJ_OP_LT, TJ_OP_LTEQ, TJ_OP_GT, TJ_OP_GTEQ, TJ_OP_IN, TJ_OP_NOTIN,
};

typedef struct tj_nodes {
    tj_node **v;
    size_t n;
} tj_nodes;

/* One struct for every kind; which fields mean what:
 *   CONST value | NAME name | ATTR a.name | ITEM a[b] | SLICE a[b:c:d] (each nullable)
 *   CALL a(args, kwnames=kwvals) | FILTER a|name(args, kw) (a NULL: the block input)
 *   TEST a is name(args, kw) | NEG/POS/NOT a | AND/OR a b | BIN a op b | CONCAT args
 *   COMPARE a then args (OPERAND: op, a) | COND b if a else c (c nullable)
 *   LIST/TUPLE args | DICT args (keys) kwvals (values) | NSREF name.attr (attr in kwnames[0])
 *   DATA value (a string) | OUTPUT a | IF a body orelse | FOR a (target) in b if c, body, orelse
 *   SET a (target: NAME, TUPLE of NAMEs, NSREF) = b | SETBLOCK a = body, filtered by c
 *   MACRO name(args: NAMEs, each default in its own .a) body | FILTERBLOCK c body
 *   WITH args (NAMEs) = kwvals, body | BREAK | CONTINUE | BODY body ({% generation %})
 * builtin: FILTER/TEST: the builtin's id, resolved when parsed. */
struct tj_node {
    uint8_t kind;
    uint8_t op;
    int line, col;
    tj_str name;
    tj_value value;
    tj_node *a, *b, *c, *d;
    tj_nodes args, kwvals;
    tj_str *kwnames;
    tj_nodes body, orelse;
    int builtin;
};

/* ---- tokens (template_lex.c) ---- */
enum tj_tok_type {
    TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP, TK_EOF,
};
enum tj_tok_op {
    O_ADD, O_SUB, O_DIV, O_FLOORDIV, O_MUL, O_MOD, O_POW, O_TILDE, O_LBRACKET, O_RBRACKET,
    O_LPAREN, O_RPAREN, O_LBRACE, O_RBRACE, O_EQ, O_NE, O_GT, O_GTEQ, O_LT, O_LTEQ,
    O_ASSIGN, O_DOT, O_COLON, O_PIPE, O_COMMA, O_SEMICOLON, O_COUNT
};
extern const char *const tj_op_text[O_COUNT]; /* "+", "-", ... */

typedef struct tj_tok {
    uint8_t type, op; /* enum tj_tok_type; TK_OP: enum tj_tok_op */
    int line, col;    /* 1-based; columns in bytes */
    tj_str s;         /* TK_DATA, TK_NAME: the text; TK_STRING: the decoded value */
    int64_t i;        /* TK_INT */
    double f;         /* TK_FLOAT */
} tj_tok;

/* The whole template as tokens, ending with TK_EOF. */
bool tj_lex(tj_ctx *c, const char *src, size_t n, tj_tok **out, size_t *n_out);

/* ---- parsing (template_parse.c) ---- */
/* Parses a whole template into its statement list (a TJ_N_BODY node). */
bool tj_parse(tj_ctx *c, const char *src, size_t n, tj_node **out);

/* ---- rendering (template_eval.c) ---- */
/* Variables: a frame is one scope (the template, a loop iteration, a macro call). */
struct tj_frame {
    tj_frame *parent;
    tj_str *names;
    tj_value *vals;
    size_t n, cap;
    bool captured; /* a macro defined here keeps it (a loop may not reuse it) */
};
tj_frame *tj_frame_new(tj_ctx *c, tj_frame *parent);
bool tj_frame_set(tj_ctx *c, tj_frame *f, tj_str name, tj_value v);
/* Renders root's statements with globals = root frame (messages, ...), appending to out. */
bool tj_render(tj_ctx *c, const tj_node *root, tj_frame *globals, tj_buf *out);

/* Evaluation services the builtins use. */
bool tj_eval_to_bool(tj_value v);
bool tj_py_eq(const tj_value *a, const tj_value *b);
/* Python's a < b; false + error when the types do not compare. */
bool tj_py_lt(tj_ctx *c, const tj_node *at, const tj_value *a, const tj_value *b, bool *out);
/* Python's a OP b for the TJ_OP_ADD..TJ_OP_POW operators. */
bool tj_arith(tj_ctx *c, const tj_node *at, int op, const tj_value *a, const tj_value *b, tj_value *out);
/* markupsafe's escape: & < > " ' as entities. */
bool tj_html_escape(tj_ctx *c, tj_str s, tj_buf *b);
/* Python's a in b. */
bool tj_py_in(tj_ctx *c, const tj_node *at, const tj_value *a, const tj_value *b, bool *out);
/* jinja2's environment.getattr / getitem (sandboxed). */
bool tj_getattr(tj_ctx *c, const tj_node *at, const tj_value *obj, tj_str name, tj_value *out);
bool tj_getitem(tj_ctx *c, const tj_node *at, const tj_value *obj, const tj_value *key, tj_value *out);
/* The items an iteration of v sees (a fresh list; consumes a generator). */
bool tj_iterate(tj_ctx *c, const tj_node *at, const tj_value *v, tj_list **out);
/* Calls a function value with evaluated arguments. */
bool tj_call_value(tj_ctx *c, const tj_node *at, const tj_value *fn, const tj_value *args,
                   size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
                   tj_value *out);
/* The error a use of an undefined value raises (jinja2's UndefinedError). */
bool tj_fail_undefined(tj_ctx *c, const tj_node *at, const tj_value *v);
/* "int", "str", "list", ... (Python's type names, for messages). */
const char *tj_type_name(const tj_value *v);

/* ---- builtins (template_builtins.c) ---- */
/* Ids for names, or -1 when the name is not one lean supports; *known (nullable) says
 * whether jinja2 has it (so the error can say "not supported" rather than "no filter"). */
int tj_filter_id(tj_str name, bool *known);
int tj_test_id(tj_str name, bool *known);
int tj_global_id(tj_str name);
bool tj_call_filter(tj_ctx *c, const tj_node *at, int id, const tj_value *v, const tj_value *args,
                    size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
                    tj_value *out);
bool tj_call_test(tj_ctx *c, const tj_node *at, int id, const tj_value *v, const tj_value *args,
                  size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
                  bool *out);
bool tj_call_global(tj_ctx *c, const tj_node *at, int id, const tj_value *args, size_t n_args,
                    const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out);
/* The method name of obj's type, as a bound function, or false (not a method). */
bool tj_method_lookup(tj_ctx *c, const tj_value *obj, tj_str name, tj_value *out);
bool tj_call_method(tj_ctx *c, const tj_node *at, const tj_func *fn, const tj_value *args,
                    size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
                    tj_value *out);
/* Python's str(v) and repr(v), appended to b. */
bool tj_py_str(tj_ctx *c, const tj_node *at, const tj_value *v, tj_buf *b);
bool tj_py_repr(tj_ctx *c, const tj_node *at, const tj_value *v, tj_buf *b, int depth);
/* str(v) as a value: v itself when it is a string. */
bool tj_to_str(tj_ctx *c, const tj_node *at, const tj_value *v, tj_str *out);
/* Python's repr(float). */
void tj_float_repr(double f, char out[32]);
/* Python's printf-style formatting: fmt % args (args: a tuple, or one value). */
bool tj_py_percent(tj_ctx *c, const tj_node *at, tj_str fmt, const tj_value *args, tj_value *out);

/* ---- the whole render (template.c) ---- */
/* lean_chat_render_ex with the arena's chunk size (0 = TJ_CHUNK_BYTES); tests make it tiny
 * so that the out-of-memory loop fails many more allocations. */
lean_status tj_chat_render(const char *template_source, const lean_chat_message *messages, size_t n,
                           const lean_chat_params *p, size_t chunk_bytes, char **out, size_t *out_len,
                           lean_error *err);

/* ---- shared by the builtins (template_text.c) ---- */
/* tj_fail at a node's position (at nullable: no position). */
bool tj_fail_at(tj_ctx *c, const tj_node *at, lean_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Binds positional and keyword arguments to parameter names: slots[i] is the argument for
 * params[i] or NULL. The names end at n_params or at the first NULL (a builtin without
 * parameters declares {NULL}), so no NULL name is ever compared; too many, unknown or
 * repeated arguments fail naming fname and the argument. */
bool tj_bind(tj_ctx *c, const tj_node *at, tj_str fname, const char *const *params, int n_params,
             const tj_value *args, size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
             const tj_value **slots);
/* Fails naming fname and the first keyword argument, when there is one (builtins that take
 * positional arguments only). */
bool tj_no_kwargs(tj_ctx *c, const tj_node *at, tj_str fname, const tj_str *kwnames, size_t n_kw);
/* Declares a_[] bound to the parameter names, from the caller's args/kwnames/kwvals; name is
 * a tj_str, the builtin's name as errors say it. */
#define BIND(name, ...)                                                                              \
    static const char *const params_[] = {__VA_ARGS__};                                             \
    const tj_value *a_[sizeof params_ / sizeof params_[0]];                                         \
    if (!tj_bind(c, at, name, params_, (int)(sizeof params_ / sizeof params_[0]), args, n_args,     \
                 kwnames, kwvals, n_kw, a_))                                                        \
        return false
bool tj_want_int(tj_ctx *c, const tj_node *at, const tj_value *v, const char *what, int64_t *out);
bool tj_want_str(tj_ctx *c, const tj_node *at, const tj_value *v, const char *what, tj_str *out);
typedef enum { TJ_CASE_UPPER, TJ_CASE_LOWER, TJ_CASE_SWAP, TJ_CASE_CAPITALIZE, TJ_CASE_TITLE_PY, TJ_CASE_TITLE_JINJA } tj_casemode;
bool tj_map_case(tj_ctx *c, tj_str s, tj_casemode mode, tj_str *out);
/* str.strip(chars): chars NULL = Python's whitespace. */
tj_str tj_strip(tj_str s, const tj_str *chars, bool left, bool right);
/* The byte offset of the first (last) needle in hay, or -1. */
int64_t tj_find(tj_str hay, tj_str needle, bool last);
bool tj_str_replace(tj_ctx *c, tj_str s, tj_str old, tj_str new_, int64_t count, tj_str *out);
/* str.center (where 0) / ljust (-1) / rjust (1) with a one-character fill. */
bool tj_pad(tj_ctx *c, tj_str s, int64_t width, tj_str fill, int where, tj_str *out);
bool tj_splitlines(tj_ctx *c, tj_str s, bool keepends, tj_list **out);
/* Python's sorted(): a stable sort of idx[0..n) by keys[idx[i]]. */
bool tj_sort_values(tj_ctx *c, const tj_node *at, tj_value *keys, size_t *idx, size_t n, bool reverse);
/* str.islower() / isupper() (ASCII letters). */
bool tj_cased_test(tj_str s, bool want_lower);
/* int(v, base) and float(str) as jinja2's int/float filters try them; *ok false = failed. */
bool tj_to_int(tj_ctx *c, const tj_node *at, const tj_value *v, int64_t base, bool *ok, int64_t *out);
bool tj_parse_float(tj_str s, double *out);
typedef struct tj_jsonopts {
    bool ensure_ascii, sort_keys, pretty;
    tj_str indent, item_sep, key_sep;
} tj_jsonopts;
bool tj_json_dump(tj_ctx *c, const tj_node *at, const tj_value *v, const tj_jsonopts *o, int level, tj_buf *b);

static inline tj_str tj_cstr(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return (tj_str){s, n};
}
/* memcpy that allows n == 0 with NULL pointers (empty lists have no storage). */
static inline void tj_copy(void *dst, const void *src, size_t n) {
    if (n) __builtin_memcpy(dst, src, n);
}
static inline bool tj_str_eq(tj_str a, const char *b) {
    size_t i = 0;
    for (; i < a.n; i++)
        if (b[i] == 0 || a.p[i] != b[i]) return false;
    return b[i] == 0;
}
static inline bool tj_str_same(tj_str a, tj_str b) {
    if (a.n != b.n) return false;
    for (size_t i = 0; i < a.n; i++)
        if (a.p[i] != b.p[i]) return false;
    return true;
}

#endif
