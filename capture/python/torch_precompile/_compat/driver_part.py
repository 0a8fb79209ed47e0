# --- _compat part: the torch differences the driver's parts meet ---
# Joined into every Dynamo artifact as source before the other parts, since it uses
# nothing of theirs and they use it (the artifact
# is self-contained: this file is a template, not a module anything imports).
# Each function names the releases that differ (2.11.0 through 2.15.0 supported).

def _pc_disown(cleanup_hook, scope, name):
    """Take a binding the artifact seeds in a module out of the hands of Dynamo's
    cleanup hooks, which delete a compile's minted globals when its code is
    collected. torch 2.14 and later: ``CleanupHook.disown(scope, name)``; 2.11 to
    2.13 have no disown and delete by name (the loader claims those names instead,
    ``_compat.dynamo.claim_minted_names``)."""
    disown = getattr(cleanup_hook, "disown", None)
    if disown is not None:
        disown(scope, name)
