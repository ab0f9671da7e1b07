#!/usr/bin/env python3
"""Lists every command-line flag of Megatron-LM's `megatron/training/arguments.py` with the number of values it takes,
as a C++ table for cli/megatron_arg_names.inc (`gpuplan train --megatron-args`, issue #22).

Usage: scripts/megatron_arg_names.py MEGATRON_GIT_DIR [COMMIT] > cli/megatron_arg_names.inc

Reads the sources with `git show COMMIT:PATH` (default HEAD) and walks their syntax trees; nothing of Megatron-LM is
imported (that needs torch). Two kinds of flags exist there:
- `add_argument('--name', ...)` calls in arguments.py: the option strings, `action` and `nargs` as written;
- `ArgumentGroupFactory(ConfigClass, exclude=[...])` groups (megatron/training/argument_utils.py): one flag per
  dataclass field (base classes included, `init=False` and excluded fields left out), `--field-name`; a bool field
  whose default is not False becomes `--no-field-name` and `--disable-field-name` (store_false), as the factory does
  (`attribute.default == False`); list types take one or more values; `metadata={"argparse_meta": {...}}` overrides
  the names, action and nargs.
Arity in the output: 0 = a switch, 1 = one value, 2 = one or more (nargs '+' / '*'), 3 = optional (nargs '?').
"""
import ast
import subprocess
import sys

REPO = sys.argv[1]
COMMIT = sys.argv[2] if len(sys.argv) > 2 else "HEAD"


def git(*args):
    return subprocess.run(["git", "--git-dir", REPO, *args], check=True, capture_output=True, text=True).stdout


def show(path):
    return git("show", f"{COMMIT}:{path}")


SWITCH, ONE, MANY, OPTIONAL = 0, 1, 2, 3


def arity_of(action, nargs):
    if action in ("store_true", "store_false", "store_const", "count", "help", "version"):
        return SWITCH
    if nargs in ("+", "*"):
        return MANY
    if nargs == "?":
        return OPTIONAL
    if isinstance(nargs, int) and nargs > 1:
        return MANY
    return ONE


def const(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


flags = {}  # name -> (arity, group: the arguments.py function or the config class that defines it)


def add(name, arity, where):
    if name in flags and flags[name][0] != arity:
        # The same spelling defined twice with different arities would be a Megatron bug; keep the first and say so.
        print(f"warning: {name} defined again in {where} with another arity", file=sys.stderr)
        return
    flags.setdefault(name, (arity, where))


# Every class definition of the megatron/ tree, by name (the config dataclasses and their bases).
classes = {}
for path in git("ls-tree", "-r", "--name-only", COMMIT, "megatron/").split():
    if not path.endswith(".py"):
        continue
    try:
        tree = ast.parse(show(path))
    except SyntaxError:
        continue
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.setdefault(node.name, node)


def dataclass_fields(name, seen=None):
    """The init fields of a dataclass in definition order, bases first (as dataclasses.fields gives them)."""
    cls = classes[name]
    out = {}
    for base in cls.bases:
        bname = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        if bname in classes:
            out.update(dataclass_fields(bname))
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = ast.unparse(stmt.annotation)
        if ann.startswith("ClassVar") or ann.startswith("InitVar"):
            continue
        default, init, meta = None, True, None
        has_default = stmt.value is not None
        if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in ("field", "dataclasses.field"):
            has_default = False
            for kw in stmt.value.keywords:
                if kw.arg == "default":
                    default, has_default = const(kw.value), True
                elif kw.arg == "init":
                    init = const(kw.value)
                elif kw.arg == "metadata" and isinstance(kw.value, ast.Dict):
                    for k, v in zip(kw.value.keys, kw.value.values):
                        if const(k) == "argparse_meta" and isinstance(v, ast.Dict):
                            meta = {const(mk): mv for mk, mv in zip(v.keys, v.values)}
        elif has_default:
            default = const(stmt.value)
        out[stmt.target.id] = dict(ann=ann, default=default, init=init, meta=meta)
    return out


def factory_flags(class_name, exclude, where):
    for fname, f in dataclass_fields(class_name).items():
        if fname in exclude or f["init"] is False:
            continue
        ann = f["ann"].replace(" ", "")
        core = ann
        for wrap in ("Optional[", "typing.Optional["):
            if core.startswith(wrap):
                core = core[len(wrap):-1]
        if core.endswith("|None"):
            core = core[: -len("|None")]
        names = ["--" + fname.replace("_", "-")]
        action, nargs = None, None
        if core == "bool":
            action = "store_true" if f["default"] is False else "store_false"
            if action == "store_false":
                names = ["--no-" + fname.replace("_", "-"), "--disable-" + fname.replace("_", "-")]
        elif core.startswith("list[") or core.startswith("List["):
            nargs = "+"
        meta = f["meta"]
        if meta:
            if "arg_names" in meta:
                names = const(meta["arg_names"]) or names
            if "action" in meta:
                action = const(meta["action"])
            if "nargs" in meta:
                nargs = const(meta["nargs"])
        for n in names:
            add(n, arity_of(action, nargs), where)


source = show("megatron/training/arguments.py")
tree = ast.parse(source)
for fn in ast.walk(tree):
    if not isinstance(fn, ast.FunctionDef):
        continue
    lists = {}  # local NAME = [..] assignments (the exclude lists)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = const(node.value)
            if isinstance(v, list):
                lists[node.targets[0].id] = v
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            names = [const(a) for a in node.args]
            names = [n for n in names if isinstance(n, str) and n.startswith("-")]
            kws = {kw.arg: const(kw.value) for kw in node.keywords if kw.arg}
            for n in names:
                add(n, arity_of(kws.get("action"), kws.get("nargs")), fn.name)
        elif isinstance(func, ast.Name) and func.id == "ArgumentGroupFactory":
            cls = node.args[0].id
            exclude = []
            for kw in node.keywords:
                if kw.arg == "exclude":
                    exclude = lists.get(kw.value.id, []) if isinstance(kw.value, ast.Name) else const(kw.value)
            factory_flags(cls, set(exclude or []), cls)

commit = git("rev-parse", COMMIT).strip()
date = git("show", "-s", "--format=%cd", "--date=short", COMMIT).strip()
print("// Generated by scripts/megatron_arg_names.py from NVIDIA/Megatron-LM megatron/training/arguments.py")
print("// (and the config dataclasses its ArgumentGroupFactory groups read),")
print(f"// commit {commit} ({date}):")
print(f"// https://github.com/NVIDIA/Megatron-LM/blob/{commit[:12]}/megatron/training/arguments.py")
print("// Every flag Megatron-LM's pretraining parser accepts, with the values it takes:")
print("// 0 a switch, 1 one value, 2 one or more, 3 an optional value; and the arguments.py function or config class")
print("// that defines it. Do not edit by hand.")
print(f'inline constexpr const char* kMegatronCommit = "{commit[:12]} ({date})";')
print("inline constexpr MegatronFlagName kMegatronFlagNames[] = {")
for name in sorted(flags):
    print(f'    {{"{name}", {flags[name][0]}, "{flags[name][1]}"}},')
print("};")
