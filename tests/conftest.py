import os

from hypothesis import HealthCheck, settings

# The same examples on every run, so a red CI can be reproduced exactly.
settings.register_profile(
    "repeatable",
    derandomize=True,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
