"""The fixed seeds of the arrays the commands share.

Every path is checked by the gate and timed with the weights of
``WEIGHTS_SEED`` (``zoo.weights``), so a verdict vouches for exactly the
arrays that are timed; ``harness floors`` times the batches of ``DATA_SEED``
(``zoo.data``), while ``run`` and ``explain`` take the profile's own seed.
"""

from __future__ import annotations

WEIGHTS_SEED = 0
DATA_SEED = 1  # the floors benchmark's; runs take the profile's seed
