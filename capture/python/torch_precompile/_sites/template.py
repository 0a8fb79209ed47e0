"""The entry functions of a torch.compile site that compiles a module.

Never imported under this name for serving: each site loads this file as a module
of its own (``torch_precompile._sites.s_<id>``, see ``__init__``), so every site's
artifact has its own entry code and module scope, and two sites served in one
process never share the names Dynamo minted for them."""


def call(model, *args, **kwargs):
    """``torch.compile(model)(...)``: the module called as usual, hooks included."""
    return model(*args, **kwargs)


def call_impl(model, *args, **kwargs):
    """``model.compile()`` then ``model(...)``: the module's own call, which
    ``Module.__call__`` reaches through ``_compiled_call_impl``."""
    return model._call_impl(*args, **kwargs)


METHOD = "forward"  # set by the site before its first call: the compiled method's name


def call_method(receiver, *args, **kwargs):
    """``torch.compile(obj.method)``: the method's function, found on the receiver's
    class (the instance's own attribute is often the compiled method itself:
    ``model.forward = torch.compile(model.forward)``), called on the receiver."""
    return getattr(type(receiver), METHOD)(receiver, *args, **kwargs)
