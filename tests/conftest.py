"""Settings for every tier.

Hypothesis's per-example deadline (200 ms by default) measures the machine, not the code: on
CI's two busy cores a property test that takes 5 ms on a quiet laptop sometimes takes 300 ms and
fails with ``DeadlineExceeded`` although every example holds (seen on the murmur2 test while
brokers and Spark ran beside it). Properties are about correctness; speed has its benchmarks in
``bench/``. So the deadline is off everywhere, and the example counts stay as each test sets them.
"""

from hypothesis import settings

settings.register_profile("pylog", deadline=None)
settings.load_profile("pylog")
