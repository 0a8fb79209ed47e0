"""The differential harness's cases: every kind of value the identity rule judges,
through every source shape Dynamo reaches it by, as generated modules.

``write(directory, variant)`` writes ``gvcases.py`` and ``gvhelpers.py`` for value
``A`` (what the capture sees) or ``B`` (what a serving process holds instead: another
function, an edited body, a patched torch function, a method rebound on its class).
Both variants define the same names, so an artifact captured from A finds every
module, function and class it names in B; only what the shapes bind differs. Each
case is its own entry function ``e_<kind>_<shape>`` (and its installed and
Dynamo-backed forms), so one capture process captures them all and one serving
process serves them all.

A case's rule (tests/test_guard_rule.py): served from B, it equals eager on B or
raises PrecompileError; served from A, it equals eager on A. Never a third answer.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# value kind -> (definitions for A, definitions for B); each binds V_<kind>
KINDS: dict[str, tuple[str, str]] = {
    "function": ("V_function = fn_a", "V_function = fn_b"),
    "edited": ("def edited(x):\n    return x * 2 + 1\nV_edited = edited",
               "def edited(x):\n    return x * 3 - 1\nV_edited = edited"),
    "lambda": ("V_lambda = lambda x: x * 2 + 1", "V_lambda = lambda x: x * 3 - 1"),
    "builtin": ("V_builtin = torch.sin", "V_builtin = torch.cos"),
    "partial": ("V_partial = functools.partial(scale, 2.0)", "V_partial = functools.partial(shift, 3.0)"),
    "method": ("V_method = Scaler(2.0).apply", "V_method = Shifter(3.0).apply"),
    "module_class": ("V_module_class = Double", "V_module_class = Triple"),
    "pymodule": ("V_pymodule = gvmod_a", "V_pymodule = gvmod_b"),
}

# What both variants define: the values the kinds pick from, and how each is used.
COMMON = '''
import functools
import os

import torch
from torch import nn

import gvhelpers
import gvmod_a
import gvmod_b
import gvmod_w


def fn_a(x):
    return x * 2 + 1


def fn_b(x):
    return x * 3 - 1


def scale(k, x):
    return x * k


def shift(k, x):
    return x + k


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k


class Shifter:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x + self.k


class Double(nn.Module):
    def forward(self, x):
        return x * 2


class Triple(nn.Module):
    def forward(self, x):
        return x * 3


def fn_w(x):
    return x * 5


W_lambda = lambda x: x - 2  # noqa: E731


class Quad(nn.Module):
    def forward(self, x):
        return x * 4


W_function = W_edited = fn_w
W_builtin = torch.tanh
W_partial = functools.partial(scale, 5.0)
W_method = Scaler(5.0).apply
W_module_class = Quad
W_pymodule = gvmod_w


class Holder:
    def __init__(self, v):
        self.v = v


class UsesV(nn.Module):
    def __init__(self, v, use):
        super().__init__()
        self.v = v
        self.use = use

    def forward(self, x):
        return self.use(self.v, x)


def use_call(v, x):
    return v(x)


def use_build(v, x):
    return v()(x)


def use_module(v, x):
    return v.act(x)


def env_tag(x):
    # a read of os.environ: its guard has no Dynamo-free form, so an entry that
    # calls this is served through Dynamo's own guards
    if os.environ.get("GV_TAG", "") == "1":
        return x + 0.0
    return x


'''

# source shape -> template; {k}: kind, {c}: case name, {use}: use_call or use_build.
# Each defines e_{c}(x, ...) and ARGS_{c}(), the (args after x, kwargs) of a call with
# the module's own V_{k} (ARGS_{c}(v) passes v instead, where the shape takes a value).
SHAPES: dict[str, str] = {
    "arg": '''
def e_{c}(x, v):
    return {use}(v, x)
def ARGS_{c}(v=V_{k}):
    return (v,), {{}}
''',
    "kwarg": '''
def e_{c}(x, *, v):
    return {use}(v, x)
def ARGS_{c}(v=V_{k}):
    return (), {{"v": v}}
''',
    "varargs": '''
def e_{c}(x, *vs):
    return {use}(vs[0], x)
def ARGS_{c}(v=V_{k}):
    return (v,), {{}}
''',
    "varkw": '''
def e_{c}(x, **kw):
    return {use}(kw["v"], x)
def ARGS_{c}(v=V_{k}):
    return (), {{"v": v}}
''',
    "default": '''
def e_{c}(x, v=V_{k}):
    return {use}(v, x)
def ARGS_{c}():
    return (), {{}}
''',
    "closure": '''
def make_{c}(v):
    def inner(x):
        return {use}(v, x)
    return inner
H_{c} = make_{c}(V_{k})
def e_{c}(x):
    return H_{c}(x)
def ARGS_{c}():
    return (), {{}}
''',
    "global": '''
G_{c} = V_{k}
def e_{c}(x):
    return {use}(G_{c}, x)
def ARGS_{c}():
    return (), {{}}
''',
    "attr": '''
def e_{c}(x, h):
    return {use}(h.v, x)
def ARGS_{c}(v=V_{k}):
    return (Holder(v),), {{}}
''',
    "module_attr": '''
def e_{c}(x, m):
    return m(x)
def ARGS_{c}(v=V_{k}):
    return (UsesV(v, {use}),), {{}}
''',
    "item": '''
def e_{c}(x, cfg):
    return {use}(cfg["v"], x)
def ARGS_{c}(v=V_{k}):
    return ({{"v": v}},), {{}}
''',
    "class_attr": '''
class C_{c}:
    v = V_{k}
def e_{c}(x):
    return {use}(C_{c}.v, x)
def ARGS_{c}():
    return (), {{}}
''',
    "import_path": '''
def e_{c}(x):
    return {use}(gvhelpers.V_{k}, x)
def ARGS_{c}():
    return (), {{}}
''',
    "registry": '''
REG_{c} = {{"v": V_{k}}}
def e_{c}(x):
    return {use}(REG_{c}["v"], x)
def ARGS_{c}():
    return (), {{}}
''',
}

# The shapes whose value a call passes (ARGS_<case>(v)): the harness also captures
# a call with a second value W_<kind>, the same in both variants, which must serve
# as its own variant.
VALUE_SHAPES = ("arg", "kwarg", "varargs", "varkw", "attr", "module_attr", "item")

# Shapes only some kinds take: a torch function a library patches in the serving
# process, and a method of the model's class rebound (function) or edited.
PATCHED = {"builtin": ("torch.nn.functional.silu", "V_builtin"),
           "function": ("torch.nn.functional.softsign", "V_function"),
           "module_class": ("torch.nn.Hardtanh", "V_module_class")}
METHOD_KINDS = ("function", "edited")

# Modes: how an entry is captured and served. "standalone" serves Dynamo-free;
# "dynamo" reads os.environ first (served through Dynamo's guards); "installed"
# calls the case through a child module's graph break; "installed_dynamo" both.
MODES = ("standalone", "dynamo", "installed", "installed_dynamo")
# the shapes each mode beyond "standalone" runs (every kind through each)
SOME_SHAPES = ("arg", "default", "closure", "global", "attr", "import_path", "patched", "method")


def _use(kind: str) -> str:
    return {"module_class": "use_build", "pymodule": "use_module"}.get(kind, "use_call")


def cases() -> list[tuple[str, str, str]]:
    """(case name, kind, shape) of every standalone case."""
    out = []
    for kind in KINDS:
        for shape in SHAPES:
            out.append((f"{kind}_{shape}", kind, shape))
        if kind in PATCHED:
            out.append((f"{kind}_patched", kind, "patched"))
        if kind in METHOD_KINDS:
            out.append((f"{kind}_method", kind, "method"))
    return out


def entries(modes: tuple[str, ...] = MODES) -> list[tuple[str, str, str, str]]:
    """(entry function name, case, mode, shape) of every entry the harness captures."""
    out = []
    for case, _kind, shape in cases():
        for mode in modes:
            if mode != "standalone" and shape not in SOME_SHAPES:
                continue
            suffix = {"standalone": "", "dynamo": "_d", "installed": "_i", "installed_dynamo": "_id"}[mode]
            out.append((f"e_{case}{suffix}", case, mode, shape))
    return out


def _patched(kind: str, case: str, variant: str) -> str:
    target, value = PATCHED[kind]
    use = _use(kind)
    text = f'''
def e_{case}(x):
    return {use}({target}, x)
def ARGS_{case}():
    return (), {{}}
'''
    # B: a library patches torch in the serving process (A keeps the line, so the
    # cases after it keep their line numbers, which installed artifacts check)
    text += f"{target} = {value}\n" if variant == "B" else "# not patched\n"
    return text


def _method(kind: str, case: str, variant: str) -> str:
    body = "x * 3 - 1" if (kind == "edited" and variant == "B") else "x * 2 + 1"
    text = f'''
class N_{case}(nn.Module):
    def helper(self, x):
        return {body}

    def forward(self, x):
        return self.helper(x)
def e_{case}(x, m):
    return m(x)
def ARGS_{case}():
    return (N_{case}(),), {{}}
'''
    rebound = kind == "function" and variant == "B"  # rebound on its class
    text += f"N_{case}.helper = lambda self, x: fn_b(x)\n" if rebound else "# not rebound\n"
    return text


def _forms(case: str) -> str:
    """The Dynamo-backed, installed and installed Dynamo-backed forms of a case. The
    installed ones call the case through a graph break inside a child module's
    forward (a class of its own per case: an installed artifact loads onto the
    child's code, which no other artifact of the serving process may hold)."""
    return f'''
def e_{case}_d(x, *args, **kwargs):
    return e_{case}(env_tag(x), *args, **kwargs)
class Break_{case}_i(nn.Module):
    def forward(self, x, *args, **kwargs):
        torch._dynamo.graph_break()
        return e_{case}(x, *args, **kwargs)
class Break_{case}_id(Break_{case}_i):
    def forward(self, x, *args, **kwargs):
        torch._dynamo.graph_break()
        return e_{case}(x, *args, **kwargs)
def e_{case}_i(x, *args, **kwargs):
    return Break_{case}_i()(x, *args, **kwargs)
def e_{case}_id(x, *args, **kwargs):
    return Break_{case}_id()(env_tag(x), *args, **kwargs)
'''


def module_source(variant: str) -> str:
    parts = [COMMON]
    for kind, (a, b) in KINDS.items():
        parts.append((a if variant == "A" else b) + "\n")
    for case, kind, shape in cases():
        if shape == "patched":
            parts.append(_patched(kind, case, variant))
        elif shape == "method":
            parts.append(_method(kind, case, variant))
        else:
            parts.append(SHAPES[shape].format(c=case, k=kind, use=_use(kind)))
        if shape in VALUE_SHAPES:
            parts.append(f"W_{case} = W_{kind}\n")
        parts.append(_forms(case))
    return "".join(parts)


def helpers_source(variant: str) -> str:
    """gvhelpers: the values the import_path shape reads by module attribute."""
    lines = ["import functools", "import torch", "from torch import nn", "import gvmod_a", "import gvmod_b", ""]
    lines += ["def fn_a(x):\n    return x * 2 + 1", "def fn_b(x):\n    return x * 3 - 1",
              "def scale(k, x):\n    return x * k", "def shift(k, x):\n    return x + k",
              "class Scaler:\n    def __init__(self, k):\n        self.k = k\n    def apply(self, x):\n        return x * self.k",
              "class Shifter:\n    def __init__(self, k):\n        self.k = k\n    def apply(self, x):\n        return x + self.k",
              "class Double(nn.Module):\n    def forward(self, x):\n        return x * 2",
              "class Triple(nn.Module):\n    def forward(self, x):\n        return x * 3"]
    for kind, (a, b) in KINDS.items():
        lines.append(a if variant == "A" else b)
    return "\n".join(lines) + "\n"


def write(directory: Path, variant: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gvcases.py").write_text(textwrap.dedent(module_source(variant)))
    (directory / "gvhelpers.py").write_text(helpers_source(variant))
    # the modules the "pymodule" kind passes: the same in both variants
    for name, body in (("a", "x * 2 + 1"), ("b", "x * 3 - 1"), ("w", "x * 5")):
        (directory / f"gvmod_{name}.py").write_text(f"def act(x):\n    return {body}\n")
    return directory
