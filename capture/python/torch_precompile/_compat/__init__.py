"""The torch internals that differ across the supported releases (2.11.0 through
2.15.0), one module per concern. Each function names the versions that differ and
what it does on each; nothing outside this package checks a torch version."""
