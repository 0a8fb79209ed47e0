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
