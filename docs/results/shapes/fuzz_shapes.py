"""How often `harness fuzz` draws each shape of issue 78: models of two
outputs, of two inputs, and with an output per step or per pixel, among
400 drawn models (Hypothesis derandomized, so the count is the same on
every run and machine).

    python docs/results/shapes/fuzz_shapes.py

prints one line of JSON; docs/user_models.md quotes it.
"""

import json
from collections import Counter

from hypothesis import HealthCheck, given, settings

from harness.fuzz.draw import Drawn, drawn_models
from zoo.user_models import spec_from_document

DRAWS = 400


def main() -> None:
    counts: Counter[str] = Counter()

    @settings(
        max_examples=DRAWS,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(drawn_models())
    def count(drawn: Drawn) -> None:
        spec = spec_from_document("drawn", drawn.document)
        ranks = {len(h.shape) for h in spec.heads}
        counts["models"] += 1
        counts["two outputs"] += spec.several_outputs
        counts["two inputs"] += bool(spec.more_inputs)
        counts["an output per step"] += 2 in ranks
        counts["an output per pixel"] += 3 in ranks

    count()
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
