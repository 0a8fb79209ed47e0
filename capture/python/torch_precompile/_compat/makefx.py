"""make_fx's symbolic trace, which a MakeFx capture with ``mark_unbacked`` dims
runs on fake inputs of unbacked size.

- It takes such inputs in 2.15.0, and refuses them in 2.11.0 (2.12 to 2.14
  unchecked): binding an input's unbacked symbols to its placeholder
  (``_set_unbacked_bindings`` in ``torch.fx.experimental.proxy_tensor``, called
  for the inputs before the traced function runs) asserts that the placeholder
  is one ``Proxy``, and it is handed a list of them ("AssertionError: Expected
  Proxy, got [Proxy(arg0_1)]"), so no function traces, whatever it does.
  2.15.0's routes each binding to the proxy in the list that owns it.
  ``refuses_unbacked_inputs`` tells 2.11.0's failure from any other.

A read of a tensor's storage in the traced function fails alike in both
releases' symbolic traces ("RuntimeError: ... with symbolic sizes/strides", from
c10; read with backed symbolic sizes, which 2.11.0 traces), so that refusal is
no version difference.
"""

from __future__ import annotations

from . import raised_in


def refuses_unbacked_inputs(e: BaseException) -> bool:
    """Whether ``e``, raised by make_fx's symbolic trace, is that trace refusing
    an input of unbacked size: an AssertionError raised by the proxy tracer's
    ``_set_unbacked_bindings`` (2.11.0; 2.15.0's raises none)."""
    if not isinstance(e, AssertionError):
        return False
    frame = raised_in(e)
    return (frame is not None and frame.f_code.co_name == "_set_unbacked_bindings"
            and frame.f_globals.get("__name__") == "torch.fx.experimental.proxy_tensor")
