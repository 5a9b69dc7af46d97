#!/usr/bin/env python3
"""validate_json_replies.py — checks replies drawn under JSON schemas with an independent
validator (Debian's python3-jsonschema), for tests/test_grammar_replies.c.

Usage: validate_json_replies.py SCHEMAS.jsonl REPLIES.jsonl
SCHEMAS.jsonl: one schema a line. REPLIES.jsonl: one {"schema": INDEX, "reply": TEXT} a line.
Prints one line per failure and last "valid N of M"; exit status 1 if any failed.
"""
import json, sys
import jsonschema

schemas = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
n = ok = 0
for line in open(sys.argv[2], encoding="utf-8"):
    r = json.loads(line)
    n += 1
    try:
        jsonschema.validate(json.loads(r["reply"]), schemas[r["schema"]],
                            format_checker=jsonschema.FormatChecker())
        ok += 1
    except (ValueError, jsonschema.ValidationError) as e:
        print(f"schema {r['schema']}: {r['reply']!r}: {str(e).splitlines()[0]}")
print(f"valid {ok} of {n}")
sys.exit(0 if ok == n else 1)
