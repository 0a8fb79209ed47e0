# --- graph_programs: each compiled graph a program exposing call(flat_inputs) ---

def _pc_program_graphs():
    """The compiled graphs from their programs (_GRAPHS), called as Dynamo's
    transformed bytecode calls a compiled graph: positionally."""
    out = {}
    for backend_id, text in _GRAPHS.items():
        ns = {"__name__": f"{__name__}.{backend_id}"}
        exec(compile(text, f"<precompiled graph {backend_id}>", "exec"), ns)
        if "CALL_POSITIONAL" in ns:  # an fx program: its graph takes the args as they come
            out[backend_id] = _functools.partial(ns["CALL_POSITIONAL"], None)
            continue
        call = ns["call"]

        def compiled(*args, _call=call):
            return _call(list(args))
        compiled.__name__ = backend_id
        out[backend_id] = compiled
    return out
