"""Memory systems behind one interface (importable as ``memprobe.agents``).

Each system is declared once, on its class (:func:`memprobe.agents.registry.declare`). The
built-ins are listed in :mod:`memprobe.agents.registry`; third-party systems register through
the ``memprobe.systems`` entry-point group with no change to the core (tests/plugins/tinymem).
"""
