#!/usr/bin/python3
"""check_idl.py OLD NEW: fails (exit 1, one line per violation) if NEW is not
a compatible growth of OLD, the rules of README.md's "Compatibility".

Both files are parsed by the Thrift compiler itself (`thrift --gen json`),
so the comparison sees what every generated client sees: field ids, types,
requiredness, methods, their argument, return type and exceptions, enums,
constants, namespaces.
"""
import json
import os
import subprocess
import sys
import tempfile


def load(path):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["thrift", "--gen", "json", "-out", out, path],
                       check=True, capture_output=True)
        name = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(out, name + ".json"), encoding="utf-8") as f:
            return json.load(f)


def describe(t):
    """A type descriptor of the JSON (typeId, and class or element types) as
    one comparable string."""
    tid = t["typeId"]
    if tid in ("struct", "exception", "union"):
        return "%s %s" % (tid, t.get("class"))
    if tid in ("list", "set"):
        return "%s<%s>" % (tid, describe(t.get("elemType")
                                         or {"typeId": t["elemTypeId"]}))
    if tid == "map":
        return "map<%s,%s>" % (
            describe(t.get("keyType") or {"typeId": t["keyTypeId"]}),
            describe(t.get("valueType") or {"typeId": t["valueTypeId"]}))
    return tid


def type_of(node):
    """A field's, argument's, exception's or constant's type."""
    return describe(node.get("type") or {"typeId": node["typeId"]})


def return_of(function):
    return describe(function.get("returnType")
                    or {"typeId": function["returnTypeId"]})


def required(field):
    return field.get("required") == "required"


def compare_fields(where, old, new, problems):
    by_id = {f["key"]: f for f in new}
    old_ids = {f["key"] for f in old}
    for f in old:
        n = by_id.get(f["key"])
        if n is None:
            problems.append("%s: field %d (%s) removed" % (where, f["key"],
                                                          f["name"]))
            continue
        if n["name"] != f["name"]:
            problems.append("%s: field %d renamed %s -> %s (or renumbered)"
                            % (where, f["key"], f["name"], n["name"]))
        if type_of(n) != type_of(f):
            problems.append("%s.%s: type changed %s -> %s"
                            % (where, f["name"], type_of(f), type_of(n)))
        if required(n) and not required(f):
            problems.append("%s.%s: made required" % (where, f["name"]))
        if required(f) and not required(n):
            problems.append("%s.%s: no longer required (old readers of "
                            "answers rely on it)" % (where, f["name"]))
    for n in new:
        if n["key"] not in old_ids and required(n):
            problems.append("%s.%s: a new required field" % (where, n["name"]))


def check(old, new):
    problems = []
    if old.get("namespaces") != new.get("namespaces"):
        problems.append("namespaces changed: %s -> %s"
                        % (old.get("namespaces"), new.get("namespaces")))
    structs = {s["name"]: s for s in new["structs"]}
    for s in old["structs"]:
        kind = "exception" if s.get("isException") else "struct"
        n = structs.get(s["name"])
        if n is None:
            problems.append("%s %s removed" % (kind, s["name"]))
            continue
        if bool(n.get("isException")) != bool(s.get("isException")):
            problems.append("%s %s changed kind" % (kind, s["name"]))
        compare_fields("%s %s" % (kind, s["name"]), s["fields"], n["fields"],
                       problems)
    enums = {e["name"]: e for e in new["enums"]}
    for e in old["enums"]:
        n = enums.get(e["name"])
        if n is None:
            problems.append("enum %s removed" % e["name"])
            continue
        values = {m["name"]: m["value"] for m in n["members"]}
        for m in e["members"]:
            if m["name"] not in values:
                problems.append("enum %s: value %s removed"
                                % (e["name"], m["name"]))
            elif values[m["name"]] != m["value"]:
                problems.append("enum %s: %s renumbered %d -> %d"
                                % (e["name"], m["name"], m["value"],
                                   values[m["name"]]))
    consts = {c["name"]: c for c in new["constants"]}
    for c in old["constants"]:
        if c["name"] not in consts:
            problems.append("const %s removed" % c["name"])
        elif type_of(consts[c["name"]]) != type_of(c):
            problems.append("const %s: type changed" % c["name"])
    services = {s["name"]: s for s in new["services"]}
    for s in old["services"]:
        n = services.get(s["name"])
        if n is None:
            problems.append("service %s removed or renamed" % s["name"])
            continue
        functions = {f["name"]: f for f in n["functions"]}
        for f in s["functions"]:
            where = "method %s" % f["name"]
            g = functions.get(f["name"])
            if g is None:
                problems.append("%s removed" % where)
                continue
            old_ret, new_ret = return_of(f), return_of(g)
            if old_ret != new_ret:
                problems.append("%s: return type changed %s -> %s"
                                % (where, old_ret, new_ret))
            if bool(f.get("oneway")) != bool(g.get("oneway")):
                problems.append("%s: oneway changed" % where)
            old_args = [(a["key"], a["name"], type_of(a))
                        for a in f["arguments"]]
            new_args = [(a["key"], a["name"], type_of(a))
                        for a in g["arguments"]]
            if old_args != new_args:
                problems.append("%s: arguments changed %s -> %s (methods "
                                "take one request struct: add optional "
                                "fields to it instead)"
                                % (where, old_args, new_args))
            new_x = {(x["key"], x["name"], type_of(x))
                     for x in g["exceptions"]}
            for x in f["exceptions"]:
                if (x["key"], x["name"], type_of(x)) not in new_x:
                    problems.append("%s: exception %d %s (%s) removed or "
                                    "changed" % (where, x["key"], x["name"],
                                                 type_of(x)))
    return problems


def main():
    if len(sys.argv) != 3:
        print("usage: check_idl.py OLD.thrift NEW.thrift", file=sys.stderr)
        return 2
    old, new = load(sys.argv[1]), load(sys.argv[2])
    problems = check(old, new)
    for p in problems:
        print("incompatible: " + p)
    if problems:
        return 1
    added = (len(new["services"][0]["functions"])
             - len(old["services"][0]["functions"]))
    print("compatible: %s grows %s (%d new methods)"
          % (sys.argv[2], sys.argv[1], added))
    return 0


if __name__ == "__main__":
    sys.exit(main())
