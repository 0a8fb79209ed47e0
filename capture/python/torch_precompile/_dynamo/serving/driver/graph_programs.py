# --- graph_programs: each compiled graph a program exposing call(flat_inputs) ---

def _pc_program_graphs():
    """The compiled graphs from their programs (_GRAPHS)."""
    return {backend_id: _pc_program(backend_id, text) for backend_id, text in _GRAPHS.items()}
