"""Memory systems behind one interface (importable as ``memprobe.agents``).

Built-in systems are listed in :mod:`memprobe.agents.registry`; third-party systems register
through the ``memprobe.systems`` entry-point group with no change to the core.
"""
