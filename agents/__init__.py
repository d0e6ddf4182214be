"""Memory systems behind one interface (importable as ``memprobe.agents``).

Each system is declared once, on its class (:func:`memprobe.registry.systems.declare`). The
built-ins are listed in :mod:`memprobe.registry.systems`; third-party systems register through
the ``memprobe.systems`` entry-point group with no change to the core (tests/plugins/tinymem).
"""
