"""Compiler subprocesses started from Python, when the shim is not loaded.

With ``libprecompile.so`` preloaded every exec is gated natively, in this
process and its children, and nothing here is installed. Without it, this is
the gate: each way Python starts a program (``subprocess.Popen`` — hence run,
call, check_output, os.popen, asyncio — ``os.posix_spawn[p]``, ``os.system``,
``os.exec*``, ``os.spawn*``) asks the same ``policy`` rules through ``_native``:
classify the execution (other / version probe / compile), decide it under this
thread's lock, journal compile and probe decisions when PRECOMPILE_JOURNAL is
set, and raise PrecompileError naming the command when it is refused. A shell
command line (``sh -c``, ``os.system``) is also split into its simple commands,
best effort, because without the shim nothing else sees what the shell runs.

Like the shim, it hands the lockdown down: while locked (or journaling) a
child's environment gets TORCH_PRECOMPILE_NO_COMPILATION=1, the journal and
rule variables, and ``LD_PRELOAD`` of the shim when the library is found, so
the child gates its own execs natively. Unlocked and not journaling, every
hook is one lockdown check and then the original call.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import posix
import shlex
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .. import _bundle, _lockdown, _native, _settings
from .._errors import refused
from .patch import replace

log = logging.getLogger("torch_precompile.gates")

REMEDY = (
    "Run the build ahead of time (a capture freezes what its compilers produced into "
    "the cache), or run it outside the lockdown."
)
SHELLS = frozenset({b"sh", b"bash", b"dash", b"zsh", b"ksh", b"ash"})
_HANDED_DOWN = (_settings.JOURNAL, _settings.STRICT, _settings.COMPILERS, _settings.ALLOW)

# Set while an os.spawn* call that was already decided runs: its forked child
# execs through the gated os.exec*, which must not decide (and journal) again.
_tls = threading.local()


def install() -> None:
    if _lockdown.shim_loaded():
        log.debug("the shim is loaded: it gates execs natively")
        return
    replace(subprocess.Popen, "_execute_child", _gate_popen)
    for name, make in (
        ("execv", _gate_execv),
        ("execve", _gate_execve),
        ("posix_spawn", _gate_posix_spawn),
        ("posix_spawnp", _gate_posix_spawn),
        ("system", _gate_system),
        ("spawnv", _gate_spawn),
        ("spawnve", _gate_spawn),
        ("spawnvp", _gate_spawn),
        ("spawnvpe", _gate_spawn),
    ):
        if name in vars(os):
            replace(os, name, make)


# --- the decision ---------------------------------------------------------


def _quiet() -> bool:
    """Nothing to decide or record: not locked and no journal."""
    return _lockdown.current() is None and not _settings.get(_settings.JOURNAL)


def decide(exe: Any, argv: list[Any], cwd: Any = None, env: Mapping | None = None) -> None:
    """Classify and decide one execution (and the commands of a shell line)
    under this thread's lock; journal it; raise PrecompileError if refused."""
    lock = _lockdown.current()
    journal = _settings.get(_settings.JOURNAL)
    if lock is None and not journal:
        return
    strict = _settings.is_on(_settings.STRICT)
    compilers, allow = _settings.get(_settings.COMPILERS), _settings.get(_settings.ALLOW)
    for exe_b, argv_b in _commands(os.fsencode(exe), [os.fsencode(a) for a in argv]):
        located = _locate(exe_b, cwd, env)
        resolved = os.path.realpath(located) if located else None
        kind = _native.classify(exe_b, argv_b, resolved, compilers, allow)
        if kind == "other":
            continue
        allowed, reason, explanation = _native.decide(kind, lock, strict)
        if journal:
            _journal(journal, located or exe_b, argv_b, cwd, kind, allowed, reason)
        if not allowed:
            command = shlex.join(os.fsdecode(a) for a in argv_b)
            log.debug("lockdown refuses %s: %s", kind, command)
            raise refused(f"running the {kind} command `{command}`", explanation, REMEDY)


def _commands(exe: bytes, argv: list[bytes]) -> Iterator[tuple[bytes, list[bytes]]]:
    yield exe, argv
    line = _shell_line(exe, argv)
    if line is not None:
        for words in shell_commands(os.fsdecode(line)):
            encoded = [os.fsencode(w) for w in words]
            yield encoded[0], encoded


def _shell_line(exe: bytes, argv: list[bytes]) -> bytes | None:
    """The command string of ``sh -c STRING``, else None."""
    if os.path.basename(exe) not in SHELLS:
        return None
    for i, arg in enumerate(argv[1:], start=1):
        if not arg.startswith(b"-") or arg.startswith(b"--"):
            return None
        if b"c" in arg[1:]:
            return argv[i + 1] if i + 1 < len(argv) else None
    return None


_OPERATORS = frozenset("();<>|&")


def shell_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line, each as its words, without leading
    ``NAME=value`` assignments. Best effort: unparseable lines give []."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = []
    words: list[str] = []
    for token in [*tokens, ";"]:
        if token and set(token) <= _OPERATORS:
            while words and "=" in words[0] and not words[0].startswith("="):
                words.pop(0)
            if words:
                commands.append(words)
            words = []
        else:
            words.append(token)
    return commands


def _locate(exe: bytes, cwd: Any, env: Mapping | None) -> bytes | None:
    """The path an exec of ``exe`` runs (PATH searched for a bare name), or None."""
    if b"/" in exe:
        path = os.path.join(os.fsencode(cwd) if cwd else os.getcwdb(), exe)
        return path if os.path.exists(path) else None
    search = _env_get(env, "PATH") if env is not None else os.environ.get("PATH")
    found = shutil.which(os.fsdecode(exe), path=os.fsdecode(search) if search else None)
    return os.fsencode(found) if found else None


def _journal(path: str, exe: bytes, argv: list[bytes], cwd: Any, kind: str, allowed: bool, reason: str) -> None:
    try:
        _native.journal_append(path, exe, argv, os.fsencode(cwd) if cwd else os.getcwdb(), kind, allowed, reason)
    except OSError:
        log.warning("could not append to the journal %s", path, exc_info=True)


# --- what children inherit ------------------------------------------------


@functools.cache
def library() -> str | None:
    """libprecompile.so's path, when it is built where the contracts say:
    PRECOMPILE_LIB, the copy the wheel bundles in this package, cargo's."""
    repo = Path(__file__).resolve().parents[4]
    candidates = [
        _settings.get(_settings.LIB),
        _bundle.LIBRARY,
        str(repo / "target" / "release" / "libprecompile.so"),
    ]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


def _env_get(env: Mapping, key: str) -> Any:
    """``env[key]`` for a str- or bytes-keyed environment (os.environ rejects bytes)."""
    for k in (key, os.fsencode(key)):
        try:
            value = env.get(k)
        except TypeError:
            continue
        if value is not None:
            return value
    return None


def child_env(env: Mapping | None) -> Mapping | None:
    """``env`` (None: this process's) plus what a child must inherit while
    locked or journaling; ``env`` itself when nothing is missing."""
    locked = _lockdown.current() is not None
    if not locked and not _settings.get(_settings.JOURNAL):
        return env
    base: Mapping = os.environ if env is None else env
    wanted: dict[str, str] = {}
    if locked:
        wanted[_settings.NO_COMPILATION.env] = "1"
    for setting in _HANDED_DOWN:
        value = _settings.get(setting)
        if value and not _env_get(base, setting.env):
            wanted[setting.env] = value
    lib = library()
    preload = _env_get(base, "LD_PRELOAD") or ""
    preload = os.fsdecode(preload)
    if lib and lib not in preload.split(":"):
        wanted["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    missing = {k: v for k, v in wanted.items() if os.fsdecode(_env_get(base, k) or "") != v}
    if not missing:
        return env
    if any(isinstance(k, bytes) for k in base):
        return {**base, **{os.fsencode(k): os.fsencode(v) for k, v in missing.items()}}
    return {**base, **missing}


# --- the hooks ------------------------------------------------------------


def _gate_popen(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def _execute_child(*args: Any, **kwargs: Any) -> Any:
        if _quiet():
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        a = bound.arguments
        exe, argv = _popen_command(a["args"], a["executable"], a["shell"])
        decide(exe, argv, a.get("cwd"), a.get("env"))
        a["env"] = child_env(a.get("env"))
        return original(*bound.args, **bound.kwargs)

    return _execute_child


def _popen_command(args: Any, executable: Any, shell: bool) -> tuple[Any, list[Any]]:
    """What Popen's POSIX _execute_child will exec (same rules as CPython's)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    else:
        args = list(args)
    if shell:
        args = ["/bin/sh", "-c", *args]
        if executable:
            args[0] = executable
    return (executable if executable is not None else args[0]), args


def _already_decided() -> bool:
    return getattr(_tls, "decided", False)


def _gate_execv(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def execv(path: Any, argv: Any) -> Any:
        if _already_decided() or _quiet():
            return original(path, argv)
        argv = list(argv)
        if _exists(path):
            decide(path, argv)
        env = child_env(None)
        if env is None:
            return original(path, argv)
        return posix.execve(path, argv, env)

    return execv


def _gate_execve(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def execve(path: Any, argv: Any, env: Mapping) -> Any:
        if _already_decided() or _quiet():
            return original(path, argv, env)
        argv = list(argv)
        if isinstance(path, int):  # fexecve
            decide(argv[0], argv, env=env)
        elif _exists(path):
            decide(path, argv, env=env)
        return original(path, argv, child_env(env))

    return execve


def _exists(path: Any) -> bool:
    # os.execvp tries each PATH candidate through os.execv[e]: only the ones
    # that exist can run, so only those are decided (and journaled).
    return not isinstance(path, int) and os.path.exists(path)


def _gate_posix_spawn(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def posix_spawn(path: Any, argv: Any, env: Mapping, *args: Any, **kwargs: Any) -> Any:
        if _quiet():
            return original(path, argv, env, *args, **kwargs)
        argv = list(argv)
        decide(path, argv, env=env)
        return original(path, argv, child_env(env), *args, **kwargs)

    return posix_spawn


def _gate_system(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def system(command: Any) -> Any:
        if not _quiet():
            decide(b"/bin/sh", [b"sh", b"-c", os.fsencode(command)])
        return original(command)

    return system


def _gate_spawn(original: Callable[..., Any]) -> Callable[..., Any]:
    with_env = original.__name__.endswith("e")

    @functools.wraps(original)
    def spawn(mode: int, file: Any, args: Any, *rest: Any) -> Any:
        if _quiet():
            return original(mode, file, args, *rest)
        args = list(args)
        env = rest[0] if with_env and rest else None
        decide(file, args, env=env)
        if with_env:
            rest = (child_env(env), *rest[1:])
        _tls.decided = True
        try:
            return original(mode, file, args, *rest)
        finally:
            _tls.decided = False

    return spawn
