"""A framework folder's tests (tests/planner/frameworks/<name>/, mirroring planner/frameworks/<name>/): its reader
reads with no Hugging Face or ModelScope cache of this machine in the way, as planner/intake's tests do."""

from tests.planner.intake.conftest import _empty_caches  # noqa: F401 (pytest's autouse fixture, shared)
