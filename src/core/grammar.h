/* grammar.h — what the grammar files share: a GBNF grammar as flat rules (grammar_parse.c),
 * matched by grammar.c; template/grammar_schema.c writes GBNF from a JSON Schema.
 *
 * The rules are llama.cpp's (src/llama-grammar.h) in layout and meaning, so its grammars and
 * its tests carry over: every rule is a run of elements, alternatives separated by GE_ALT,
 * ended by GE_END; a character class is GE_CHAR / GE_CHAR_NOT (or GE_CHAR_ANY for '.')
 * followed by GE_CHAR_ALT for each further character and GE_CHAR_RNG_UPPER after a range's
 * lower end; repetitions are rewritten into helper rules when parsed. */
#ifndef LEAN_GRAMMAR_H
#define LEAN_GRAMMAR_H

#include "core/common.h"

typedef enum grammar_etype {
    GE_END = 0,           /* end of a rule */
    GE_ALT = 1,           /* start of another alternative */
    GE_RULE_REF = 2,      /* value: the rule's index */
    GE_CHAR = 3,          /* value: a code point (a class's first) */
    GE_CHAR_NOT = 4,      /* a negated class's first code point */
    GE_CHAR_RNG_UPPER = 5,/* the upper end of the range begun by the element before */
    GE_CHAR_ALT = 6,      /* another code point of the class */
    GE_CHAR_ANY = 7,      /* '.': any code point */
    GE_TOKEN = 8,         /* <[id]>: exactly that token */
    GE_TOKEN_NOT = 9,     /* !<[id]>: any one token but that */
} grammar_etype;

typedef struct grammar_elem {
    uint32_t type;  /* grammar_etype */
    uint32_t value;
} grammar_elem;

/* Parsed rules: rule r's elements start at elems[rule_start[r]]. names[r]: its name ("root",
 * "root-1" for a helper the parser made). */
typedef struct grammar_rules {
    grammar_elem *elems;
    size_t n_elems;
    uint32_t *rule_start;
    char **names;
    uint32_t n_rules;
    uint32_t root;
} grammar_rules;

/* Parses GBNF text (len bytes, NUL not needed) into *out; root names the start rule.
 * tok (nullable) resolves <name> token references. Errors (LEAN_ERR_FORMAT) name the line
 * and column: a syntax error, an undefined rule, a missing root, left recursion, a repetition
 * past the limits. */
lean_status grammar_parse(const char *text, size_t len, const char *root, const lean_tokenizer *tok,
                          grammar_rules *out, lean_error *err);
void grammar_rules_free(grammar_rules *r);

/* The most rules and elements a grammar may grow to (with its repetitions written out): far
 * above any schema's, far below a memory problem. */
#define GRAMMAR_MAX_ELEMS (1u << 20)

#endif
