"""Frozen kernels: what a capture block compiled, carried in the cache and found
again by content at serve time, so a cold host serves with zero compiler runs.

- ``block``: the capture side: fresh per-block cache directories, the journal armed,
  and a recorder of every C++ kernel library Inductor loads.
- ``freeze``: turn what the block recorded into cache entries (or refuse, naming the
  kernel that cannot be frozen).
- ``restore``: the serve side: unpack into a private directory, check the CPU ISA,
  and let Inductor find the frozen libraries by their source instead of compiling.
- ``isa``: the vector ISA decision, read without compiling anything.
- ``serve_imports`` (capture) and ``runtime`` (serve): a generated MakeFx program
  imports Inductor's names from stand-ins, so serving it never imports Inductor.
"""
