#!/usr/bin/env python3
"""Repairs the C code that thrift 0.17's c_glib generator writes.

Run by idl/regen.sh on every generated .c file; never edit gen-c_glib/ by hand.

1. Struct finalizers do not chain up to the parent class, so GObject's own
   finalize never runs and every struct instance leaks its GObject bookkeeping
   (about 68 bytes each with GLib 2.74; about 200 bytes per GetRank call).
   We append the chain-up call to each generated *_finalize.

2. The hand-rolled *_get_type functions register the type behind an
   unsynchronised `static GType type = 0` check: two threads creating the
   first instance at once can both try to register it, and one fails. We
   wrap the registration in g_once_init_enter/g_once_init_leave.

3. A missing required field is reported as "missing field", naming none.
   We name it, so a client's TApplicationException says what to fix.

4. Container reads leak on a truncated or malformed message: a list<i64>
   element's heap cell, or a map entry's key when its value fails to read.
   Hostile bytes must not leak, so we free them on the error path.
"""
import re
import sys

FINALIZE = re.compile(
    r"^(?P<fn>[a-z0-9_]+)_finalize \(GObject \*object\)\n\{\n(?P<body>.*?)^\}\n",
    re.S | re.M,
)
GET_TYPE = re.compile(
    r"^(?P<fn>[a-z0-9_]+)_get_type \(void\)\n\{\n"
    r"  static GType type = 0;\n\n?"
    r"  if \(type == 0\) ?\n"
    r"  \{\n(?P<body>.*?)^  \}\n",
    re.S | re.M,
)
MISSING = re.compile(
    r'(  if \(!isset_(?P<field>[a-z0-9_]+)\)\n  \{\n'
    r'    g_set_error \(error, THRIFT_PROTOCOL_ERROR,\n'
    r'                 THRIFT_PROTOCOL_ERROR_INVALID_DATA,\n'
    r'                 )"missing field"\);'
)

LIST_ELEM = re.compile(
    r"(?P<indent> +)gint64\* (?P<elem>_elem\d+) = g_new \(gint64, 1\);\n"
    r"(?P=indent)if \(\(ret = thrift_protocol_read_i64 \(protocol, &\*(?P=elem), error\)\) < 0\)\n"
    r"(?P=indent)  return (?P<ret>-1|0);\n"
)
MAP_VALUE = re.compile(
    r"(?P<indent> +)if \(\(ret = thrift_protocol_read_string \(protocol, &(?P<val>val\d+), error\)\) < 0\)\n"
    r"(?P=indent)  return (?P<ret>-1|0);\n"
    r"(?P<rest>(?P=indent)xfer \+= ret;\n"
    r"(?P=indent)if \((?:this_object->[a-z0-9_]+|\*_return) && (?P<key>key\d+)\)\n)"
)


def free_elem(m):
    i, e = m.group("indent"), m.group("elem")
    return (
        f"{i}gint64* {e} = g_new (gint64, 1);\n"
        f"{i}if ((ret = thrift_protocol_read_i64 (protocol, &*{e}, error)) < 0)\n"
        f"{i}{{\n{i}  /* rankd postprocess: do not leak on bad input */\n"
        f"{i}  g_free ({e});\n{i}  return {m.group('ret')};\n{i}}}\n"
    )


def free_key(m):
    i, v, k = m.group("indent"), m.group("val"), m.group("key")
    return (
        f"{i}if ((ret = thrift_protocol_read_string (protocol, &{v}, error)) < 0)\n"
        f"{i}{{\n{i}  /* rankd postprocess: do not leak on bad input */\n"
        f"{i}  g_free ({k});\n{i}  return {m.group('ret')};\n{i}}}\n"
        + m.group("rest")
    )


def name_missing(m):
    return m.group(1) + f'"missing required field \'{m.group("field")}\'");'


def chain_up(m):
    fn = m.group("fn")
    return (
        f"{fn}_finalize (GObject *object)\n{{\n{m.group('body')}"
        "\n  /* rankd postprocess: chain up, or GObject's finalize never runs */\n"
        f"  G_OBJECT_CLASS (g_type_class_peek_parent (g_type_class_peek ({fn}_get_type ())))->finalize (object);\n"
        "}\n"
    )


def once(m):
    fn = m.group("fn")
    body = m.group("body")
    return (
        f"{fn}_get_type (void)\n{{\n"
        "  /* rankd postprocess: register once, even with many threads */\n"
        "  static gsize type_once = 0;\n"
        "  static GType type = 0;\n\n"
        "  if (g_once_init_enter (&type_once))\n"
        f"  {{\n{body}"
        "    g_once_init_leave (&type_once, 1);\n"
        "  }\n"
    )


def main(paths):
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text, n_final = FINALIZE.subn(chain_up, text)
        text, n_type = GET_TYPE.subn(once, text)
        text = MISSING.sub(name_missing, text)
        text, n_elem = LIST_ELEM.subn(free_elem, text)
        text, n_key = MAP_VALUE.subn(free_key, text)
        left = text.count("= g_new (gint64, 1);") - n_elem
        if left or text.count("read_string (protocol, &val") != n_key:
            sys.exit(f"postprocess: {path}: container reads left unpatched; "
                     "has the thrift compiler changed?")
        expected_final = 1 if path.endswith("_types.c") else 0
        if (expected_final and n_final == 0) or n_type == 0:
            sys.exit(f"postprocess: {path}: expected patterns not found "
                     f"(finalize {n_final}, get_type {n_type}); "
                     "has the thrift compiler changed?")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
