"""C++ builds from Python under lockdown: Inductor's kernel builds and
``torch.utils.cpp_extension``.

The shim refuses the compiler's exec too; these gates give the clean error
first, naming what was being built, before any file or lock is touched.

- Inductor: ``torch._inductor.cpp_builder.CppBuilder.build``. CppCodeCache,
  CppPythonBindingsCodeCache and CppWrapperCodeCache build only when the
  library is not on disk (``_worker_compile_cpp`` checks), AOTInductor and
  precompiled headers build through it as well: gating the build, not the
  load, keeps kernels already in the cache directory loadable under lockdown.
- cpp_extension: ``load``, ``load_inline`` and the ``_jit_compile`` behind them.
  There torch does not separate build from load: in a fresh process every load
  runs ninja. Gating at the entry (rather than at the ninja step) also leaves
  the extension versioner untouched, so the same load works after the lockdown.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .on_import import when_imported
from .patch import gate

KERNEL_REMEDY = (
    "Capture it ahead of time with torch.compiler.precompile.capture() so the cache "
    "carries the built kernel, or run it outside the lockdown."
)
EXTENSION_REMEDY = "Build and load the extension before the lockdown, or run it outside the lockdown."


def install() -> None:
    when_imported("torch._inductor.cpp_builder", _arm_cpp_builder)
    when_imported("torch.utils.cpp_extension", _arm_cpp_extension)


def _target(builder: Any) -> str:
    try:
        return builder.get_target_file_path()
    except Exception:  # noqa: BLE001
        return repr(getattr(builder, "_name", "?"))


def _arm_cpp_builder(cpp_builder: ModuleType) -> None:
    gate(
        cpp_builder.CppBuilder,
        "build",
        lambda self: f"Inductor C++ build of {_target(self)} (no built library in the cache)",
        KERNEL_REMEDY,
    )


def _arm_cpp_extension(cpp_extension: ModuleType) -> None:
    for name in ("load", "load_inline", "_jit_compile"):
        entry = "load" if name == "_jit_compile" else name
        gate(
            cpp_extension,
            name,
            lambda ext=None, *a, _entry=entry, **k: (
                f"C++ extension build of {k.get('name', ext)!r} (torch.utils.cpp_extension.{_entry})"
            ),
            EXTENSION_REMEDY,
        )
