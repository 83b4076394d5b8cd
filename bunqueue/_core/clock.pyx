# cython: freethreading_compatible = False
"""The broker's clock, compiled (design in the .pxd): it is read by every command that changes a job."""


def now_ms():
    """Epoch milliseconds as an integral float, as JS ``Date.now()`` goes on the wire (float64)."""
    return <double>wall_ms()
