"""The ctypes declarations of lazytensor._lib against the C headers
(include/lazytensor*.h), so that a header change cannot leave the binding stale.

For every function the binding declares (_lib._SIGS, the op rows it adds from
the library's tables, anything else given argtypes on the loaded library):
the headers declare it as an exported function (not a static inline), with as
many parameters, and each argtype and the restype fits the C type: integers by
size and signedness (int64_t is c_int64, size_t c_size_t), enums as 4-byte
integers, double/float/bool as themselves, pointers as c_void_p (any),
c_char_p (char) or POINTER(x) with x fitting the pointee, structs by value or
by pointer as a Structure whose layout is the C struct's: the same fields in
the same order (names equal, a trailing _ aside: `in_` for C's `in`), each
field's type fitting, the same offsets and the same size. Every Structure class
of _lib must have such a C struct. And every `lib.lt_*` the package calls is
declared.

The headers go through the C preprocessor ($CC, else cc, gcc or clang; -E -P
with LT_API empty) so that the declarations made by macros (the op rows of
lazytensor_ops.h) and the sizes made by constants (LT_MAX_DIMS) are read as
the compiler reads them. The headers: $LAZYTENSOR_INCLUDE, else this source
tree's include/ (the tests' own tree, also when the package under test is an
installed copy of it).
"""
import ctypes
import glob
import os
import re
import shutil
import subprocess

import pytest

from lazytensor import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.environ.get("LAZYTENSOR_INCLUDE") or os.path.join(HERE, "..", "..", "include")
SOURCE_PYTHON = os.path.join(HERE, "..", "..", "python")

BUILTIN = {"void", "char", "short", "int", "long", "signed", "unsigned", "float", "double",
           "_Bool", "__int128"}
QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "extern",
              "register", "__extension__", "__inline", "__inline__", "inline"}
INT_CODES, UINT_CODES, FLOAT_CODES = set("bhilq"), set("BHILQ"), set("fdg")


# ---- reading the headers --------------------------------------------------------


def _compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc.split()[0]):
            return cc.split()
    return None


def _preprocessed(headers):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler (CC, cc, gcc, clang) to preprocess the headers")
    src = "".join('#include "%s"\n' % os.path.basename(h) for h in headers)
    out = subprocess.run(cc + ["-E", "-P", "-std=c11", "-DLT_API=", "-I", INCLUDE, "-x", "c", "-"],
                         input=src, capture_output=True, text=True)
    assert out.returncode == 0, "%s -E failed:\n%s" % (cc[0], out.stderr)
    return out.stdout


def _strip_attributes(text):
    """Drops every __attribute__((...)) and __asm__(...) (balanced parentheses)."""
    out, i = [], 0
    pat = re.compile(r"\b(__attribute__|__asm__|__asm)\s*\(")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        i = j


def _statements(text):
    """Top-level declarations: (text, is_definition). A function body ends its
    statement (a static inline definition); struct/enum bodies stay inside."""
    stmts, cur, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c == ";":
            stmts.append(("".join(cur).strip(), False))
            cur = []
        elif c == "{":
            depth, j = 1, i + 1
            while depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if "".join(cur).rstrip().endswith(")"):  # a function's body
                stmts.append(("".join(cur).strip(), True))
                cur = []
            else:
                cur.append(text[i:j])
            i = j
            continue
        else:
            cur.append(c)
        i += 1
    return [(" ".join(s.split()), d) for s, d in stmts if s]


def _split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


class Header:
    """Functions, typedefs and struct bodies of the preprocessed headers."""

    FUNC_PTR = re.compile(r"^(.+?)\(\s*\*\s*(\w*)\s*\)\s*\((.*)\)$")

    def __init__(self, text):
        self.funcs = {}  # name -> (return type string, [param strings], static inline?)
        self.typedefs = {}  # name -> type descriptor (resolved lazily) or a type string
        self.struct_bodies = {}  # tag or typedef name -> body text
        self.enums = set()
        for stmt, is_def in _statements(_strip_attributes(text)):
            self._statement(stmt, is_def)

    def _statement(self, s, is_def):
        m = re.match(r"^typedef (struct|union|enum)\s*(\w*)\s*(\{.*\})?\s*(\w+)$", s)
        if m:
            kind, tag, body, name = m.groups()
            if kind == "enum":
                self.enums.update(x for x in (tag, name) if x)
                self.typedefs[name] = ("enum", name)
                return
            if body:
                for key in (tag, name):
                    if key:
                        self.struct_bodies[key] = body[1:-1]
            self.typedefs[name] = ("tag", tag or name)
            return
        m = re.match(r"^(struct|union|enum) (\w+)\s*(\{.*\})$", s)
        if m:
            if m.group(1) == "enum":
                self.enums.add(m.group(2))
            else:
                self.struct_bodies[m.group(2)] = m.group(3)[1:-1]
            return
        if s.startswith("typedef "):
            body = s[len("typedef "):]
            fm = self.FUNC_PTR.match(body)
            if fm:
                self.typedefs[fm.group(2)] = ("funcptr_str", fm.group(1), fm.group(3))
            else:
                words = re.findall(r"\w+", body)
                self.typedefs[words[-1]] = body[:body.rindex(words[-1])].strip()
            return
        m = re.match(r"^(.*?)\b(lt_\w+)\s*\((.*)\)$", s)
        if m and not self.FUNC_PTR.match(s):
            ret, name, params = m.groups()
            static = bool(re.search(r"\bstatic\b", ret))
            ret = re.sub(r"\b(static|inline|extern)\b", "", ret).strip()
            plist = _split_top(params)
            if plist == ["void"]:
                plist = []
            self.funcs[name] = (ret, plist, static or is_def)

    # -- types --

    def type_of(self, decl, param=True):
        """The descriptor of a declaration's type (its name dropped): ("void",),
        ("bool",), ("char",), ("int", size, signed), ("float", size), ("enum",
        name), ("ptr", inner), ("struct", name), ("opaque", name),
        ("funcptr", ret, [params]), ("array", inner, n)."""
        decl = decl.strip()
        fm = self.FUNC_PTR.match(decl)
        if fm:
            return ("funcptr", self.type_of(fm.group(1), False),
                    [self.type_of(p) for p in _split_top(fm.group(3)) if p != "void"])
        tokens = re.findall(r"[A-Za-z_]\w*|\*|\[\s*\w*\s*\]", decl)
        words = [t for t in tokens if re.match(r"\w", t) and t not in QUALIFIERS]
        stars = tokens.count("*")
        dims = [t for t in tokens if t.startswith("[")]
        if param and len(words) >= 2 and words[-1] not in BUILTIN and \
                words[-2] not in ("struct", "union", "enum"):
            words = words[:-1]  # the parameter's name
        desc = self._base(words)
        for d in reversed(dims):
            n = d[1:-1].strip()
            desc = ("ptr", desc) if param or not n else ("array", desc, int(n, 0))
        for _ in range(stars):
            desc = ("ptr", desc)
        return desc

    def _base(self, words):
        if words and words[0] in ("struct", "union"):
            return self._tag(words[1])
        if words and words[0] == "enum":
            return ("enum", words[1])
        if len(words) == 1 and words[0] not in BUILTIN:
            name = words[0]
            if name not in self.typedefs:
                raise KeyError("unknown type %s" % name)
            t = self.typedefs[name]
            if isinstance(t, str):
                return self.type_of(t, False)
            if t[0] == "tag":
                return self._tag(t[1], name)
            if t[0] == "funcptr_str":
                return ("funcptr", self.type_of(t[1], False),
                        [self.type_of(p) for p in _split_top(t[2]) if p != "void"])
            return t
        ws = set(words)
        if ws == {"void"}:
            return ("void",)
        if ws == {"_Bool"}:
            return ("bool",)
        if "float" in ws:
            return ("float", 4)
        if "double" in ws:
            return ("float", 16 if "long" in ws else 8)
        if "char" in ws:
            if "signed" in ws or "unsigned" in ws:
                return ("int", 1, "unsigned" not in ws)
            return ("char",)
        size = 2 if "short" in ws else {0: 4, 1: ctypes.sizeof(ctypes.c_long), 2: 8}[
            words.count("long")]
        if "__int128" in ws:
            size = 16
        return ("int", size, "unsigned" not in ws)

    def _tag(self, tag, name=None):
        for key in (tag, name):
            if key and key in self.struct_bodies:
                return ("struct", key)
        return ("opaque", name or tag)

    def fields(self, key):
        """[(name, descriptor)] of a struct's body, in order."""
        out = []
        for decl in _split_top(self.struct_bodies[key], ";"):
            assert ":" not in decl, "bit-field in %s: %s" % (key, decl)
            parts = _split_top(decl)
            first = parts[0]
            name = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*?\]", "", first))[-1]
            star = first.find("*")
            spec = first[:star] if star >= 0 else first[:first.rindex(name)]
            for part in [first[len(spec):]] + parts[1:]:  # "*weight", "in", "dims[8]"
                fname = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*?\]", "", part))[-1]
                at = part.rindex(fname, 0, part.index("[") if "[" in part else len(part))
                rest = part[:at] + part[at + len(fname):]  # the declarator without its name
                out.append((fname, self.type_of(spec + " " + rest, param=False)))
        return out


@pytest.fixture(scope="module")
def header():
    headers = sorted(glob.glob(os.path.join(INCLUDE, "lazytensor*.h")))
    assert headers, "no lazytensor*.h in " + INCLUDE
    return Header(_preprocessed(headers))


# ---- ctypes against C ------------------------------------------------------------


def _describe(d):
    return repr(d)


def _to_ctypes(h, d):
    """The ctypes type laid out as C lays out d (for the struct layouts)."""
    k = d[0]
    if k == "int":
        return {(1, True): ctypes.c_int8, (1, False): ctypes.c_uint8, (2, True): ctypes.c_int16,
                (2, False): ctypes.c_uint16, (4, True): ctypes.c_int32,
                (4, False): ctypes.c_uint32, (8, True): ctypes.c_int64,
                (8, False): ctypes.c_uint64}[(d[1], d[2])]
    if k == "float":
        return {4: ctypes.c_float, 8: ctypes.c_double, 16: ctypes.c_longdouble}[d[1]]
    if k == "bool":
        return ctypes.c_bool
    if k == "char":
        return ctypes.c_char
    if k == "enum":
        return ctypes.c_int
    if k in ("ptr", "funcptr"):
        return ctypes.c_void_p
    if k == "array":
        return _to_ctypes(h, d[1]) * d[2]
    if k == "struct":
        fields = h.fields(d[1])
        return type("C_" + d[1], (ctypes.Structure,),
                    {"_fields_": [(n, _to_ctypes(h, t)) for n, t in fields]})
    raise AssertionError("no layout for %r" % (d,))


class Checker:
    def __init__(self, h):
        self.h = h
        self.pairs = {}  # Structure class -> C struct name
        self.checked = {}  # (Structure class, C name) -> error or None

    def fit(self, ct, d):
        """None when the ctypes type ct fits the C type d, else why not."""
        k = d[0]
        code = getattr(ct, "_type_", None) if isinstance(ct, type) and \
            issubclass(ct, ctypes._SimpleCData) else None
        if k == "void":
            return None if ct is None else "C void, ctypes %s" % _name(ct)
        if ct is None:
            return "ctypes None (void), C %s" % _describe(d)
        if k == "bool":
            return None if ct is ctypes.c_bool else "C bool, ctypes %s" % _name(ct)
        if k == "char":
            return None if ct is ctypes.c_char else "C char, ctypes %s" % _name(ct)
        if k in ("int", "enum"):
            size, signed = (d[1], d[2]) if k == "int" else (4, None)
            if code is None or code not in INT_CODES | UINT_CODES:
                return "C %s, ctypes %s (not an integer)" % (_describe(d), _name(ct))
            if ctypes.sizeof(ct) != size:
                return "C %s of %d bytes, ctypes %s of %d" % (_describe(d), size, _name(ct),
                                                               ctypes.sizeof(ct))
            if signed is not None and (code in INT_CODES) != signed:
                return "C %s, ctypes %s (signedness)" % (_describe(d), _name(ct))
            return None
        if k == "float":
            if code is None or code not in FLOAT_CODES or ctypes.sizeof(ct) != d[1]:
                return "C %s, ctypes %s" % (_describe(d), _name(ct))
            return None
        if k == "ptr":
            if ct is ctypes.c_void_p:
                return None
            if ct is ctypes.c_char_p:
                return None if d[1] == ("char",) else "c_char_p for C %s" % _describe(d)
            if isinstance(ct, type) and issubclass(ct, ctypes._Pointer):
                if d[1][0] in ("void", "opaque"):
                    return "POINTER(%s) for C %s (use c_void_p)" % (_name(ct._type_),
                                                                     _describe(d))
                why = self.fit(ct._type_, d[1])
                return None if why is None else "pointee: " + why
            return "C %s, ctypes %s (not a pointer type)" % (_describe(d), _name(ct))
        if k == "funcptr":
            if ct is ctypes.c_void_p:
                return None
            if isinstance(ct, type) and issubclass(ct, ctypes._CFuncPtr):
                if len(ct._argtypes_) != len(d[2]):
                    return "callback with %d parameters, C %d" % (len(ct._argtypes_), len(d[2]))
                for i, (a, p) in enumerate(zip(ct._argtypes_, d[2])):
                    why = self.fit(a, p)
                    if why:
                        return "callback parameter %d: %s" % (i + 1, why)
                why = self.fit(ct._restype_, d[1])
                return None if why is None else "callback result: " + why
            return "C function pointer, ctypes %s" % _name(ct)
        if k == "array":
            if not (isinstance(ct, type) and issubclass(ct, ctypes.Array)):
                return "C array %s, ctypes %s" % (_describe(d), _name(ct))
            if ct._length_ != d[2]:
                return "C array of %d, ctypes of %d" % (d[2], ct._length_)
            return self.fit(ct._type_, d[1])
        if k == "struct":
            if not (isinstance(ct, type) and issubclass(ct, ctypes.Structure)):
                return "C struct %s, ctypes %s" % (d[1], _name(ct))
            return self.layout(ct, d[1])
        if k == "opaque":
            return "C %s is opaque: only a pointer to it can pass" % d[1]
        raise AssertionError(d)

    def layout(self, ct, cname):
        """None when the Structure ct has the C struct's fields, offsets and size."""
        if self.pairs.setdefault(ct, cname) != cname:
            return "%s stands for both C %s and %s" % (ct.__name__, self.pairs[ct], cname)
        key = (ct, cname)
        if key in self.checked:
            return self.checked[key]
        self.checked[key] = None  # (a struct that contains itself by pointer)
        cfields = self.h.fields(cname)
        pyfields = ct._fields_
        errs = []
        if [n.rstrip("_") for n, *_ in pyfields] != [n for n, _ in cfields]:
            errs.append("fields %s, C %s has %s" % ([n for n, *_ in pyfields], cname,
                                                    [n for n, _ in cfields]))
        else:
            ref = _to_ctypes(self.h, ("struct", cname))
            for (pn, pt, *_), (cn, cd) in zip(pyfields, cfields):
                why = self.fit(pt, cd)
                if why:
                    errs.append("field %s: %s" % (pn, why))
                elif getattr(ct, pn).offset != getattr(ref, cn).offset:
                    errs.append("field %s at offset %d, C at %d" % (
                        pn, getattr(ct, pn).offset, getattr(ref, cn).offset))
            if not errs and ctypes.sizeof(ct) != ctypes.sizeof(ref):
                errs.append("%d bytes, C %s %d" % (ctypes.sizeof(ct), cname, ctypes.sizeof(ref)))
        why = None if not errs else "%s vs C %s: %s" % (ct.__name__, cname, "; ".join(errs))
        self.checked[key] = why
        return why


def _name(ct):
    if ct is None:
        return "None"
    if isinstance(ct, type) and issubclass(ct, ctypes._Pointer):
        return "POINTER(%s)" % _name(ct._type_)
    return getattr(ct, "__name__", repr(ct))


def _declared():
    """name -> ctypes function of everything the binding gave argtypes."""
    out = {n: getattr(_lib.lib, n) for n in _lib._SIGS}
    for n, f in vars(_lib.lib).items():
        if n.startswith("lt_") and getattr(f, "argtypes", None) is not None:
            out[n] = f
    return out


def check_function(checker, name, f):
    """The mismatches of one declared function, as strings."""
    h = checker.h
    if name not in h.funcs:
        return ["%s: no such function in %s/lazytensor*.h" % (name, INCLUDE)]
    ret, params, static = h.funcs[name]
    if static:
        return ["%s: a static inline in the header (the library exports no such symbol)" % name]
    if f.argtypes is None:
        return ["%s: no argtypes" % name]
    if len(f.argtypes) != len(params):
        return ["%s: %d argtypes, the header has %d parameters (%s)" % (
            name, len(f.argtypes), len(params), ", ".join(params))]
    errs = []
    for i, (a, p) in enumerate(zip(f.argtypes, params)):
        why = checker.fit(a, h.type_of(p))
        if why:
            errs.append("%s: parameter %d (%s): %s" % (name, i + 1, p, why))
    why = checker.fit(f.restype, h.type_of(ret, param=False))
    if why:
        errs.append("%s: result (%s): %s" % (name, ret, why))
    return errs


# ---- the tests -------------------------------------------------------------------


def test_the_parser_reads_the_headers(header):
    # a parser that found nothing would pass every check below
    exported = [n for n, (_, _, s) in header.funcs.items() if not s]
    assert len(exported) > 200, len(exported)
    assert header.funcs["lt_add"][1] == ["lt_tensor *a", "lt_tensor *b"]  # from the op rows
    assert header.funcs["lt_sum"][0] == "lt_tensor *"
    assert header.funcs["lt_requires_grad"][2]  # a deprecated static inline
    h = header
    assert h.type_of("const int64_t *shape") == ("ptr", ("int", 8, True))
    assert h.type_of("size_t n") == ("int", 8, False)
    assert h.type_of("lt_tensor *const *ts") == ("ptr", ("ptr", ("opaque", "lt_tensor")))
    assert h.type_of("lt_dtype dt") == ("enum", "lt_dtype")
    assert h.type_of("lt_device dev") == ("struct", "lt_device")
    assert h.type_of("_Bool on") == ("bool",)
    assert h.type_of("unsigned int") == ("int", 4, False)
    assert h.type_of("lt_alloc_fn fn")[0] == "funcptr"
    assert h.fields("lt_nn_layernorm") == [
        ("weight", ("ptr", ("opaque", "lt_tensor"))), ("bias", ("ptr", ("opaque", "lt_tensor"))),
        ("normalized_shape", ("array", ("int", 8, True), 8)), ("nnorm", ("int", 4, True)),
        ("eps", ("float", 8))]


def test_declared_functions_match_the_header(header):
    checker = Checker(header)
    declared = _declared()
    assert len(declared) >= len(_lib._SIGS) > 100
    errs = [e for n in sorted(declared) for e in check_function(checker, n, declared[n])]
    assert not errs, "stale ctypes declarations in lazytensor/_lib.py:\n  " + "\n  ".join(errs)


def test_structures_match_the_c_structs(header):
    """Every Structure class of _lib has a C struct: the one a declared function
    passes it as, else lt_<snake>, lt_nn_<snake>, lt_<lower> or lt_nn_<lower> of
    its name; each has that struct's layout."""
    checker = Checker(header)
    declared = _declared()
    for n in sorted(declared):
        check_function(checker, n, declared[n])  # pairs the classes the functions use
    classes = [c for c in vars(_lib).values()
               if isinstance(c, type) and issubclass(c, ctypes.Structure) and
               c.__module__ == _lib.__name__]
    assert len(classes) >= 5
    errs = []
    for c in classes:
        cname = checker.pairs.get(c)
        if cname is None:
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", c.__name__).lower()
            names = ["lt_" + snake, "lt_nn_" + snake, "lt_" + c.__name__.lower(),
                     "lt_nn_" + c.__name__.lower()]
            cname = next((x for x in names if x in header.struct_bodies), None)
            if cname is None:
                errs.append("%s: no C struct (looked for %s)" % (c.__name__, ", ".join(names)))
                continue
        why = checker.layout(c, cname)
        if why:
            errs.append(why)
    assert not errs, "stale Structure classes in lazytensor/_lib.py:\n  " + "\n  ".join(errs)


def test_the_package_calls_only_declared_functions():
    """A `lib.lt_x(...)` without argtypes would pass Python ints as C ints and
    read a pointer result as a C int: each one the package calls is declared."""
    pkg = os.path.dirname(os.path.abspath(_lib.__file__))
    used = set()
    for path in glob.glob(os.path.join(pkg, "*.py")):
        with open(path) as f:
            used |= set(re.findall(r"\blib\.(lt_\w+)", f.read()))
    assert len(used) > 50, used
    declared = _declared()
    assert sorted(used - set(declared)) == []


def test_the_package_version_is_the_library_version():
    pyproject = os.path.join(SOURCE_PYTHON, "pyproject.toml")
    if not os.path.exists(pyproject):
        pytest.skip("no python/pyproject.toml beside these tests")
    with open(os.path.join(INCLUDE, "lazytensor.h")) as f:
        c_version = re.search(r'#define LT_VERSION_STRING "([^"]+)"', f.read()).group(1)
    with open(pyproject) as f:
        py_version = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert py_version == c_version
