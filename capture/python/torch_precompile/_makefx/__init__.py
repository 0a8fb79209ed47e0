"""The MakeFxTracer front-end: one non-strict make_fx trace of exactly one call."""
