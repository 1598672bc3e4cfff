"""memplan's planning core: model and GPU catalogs, analytic memory and speed models, search.

Nothing in this package imports torch; probes, the trainer and the API build on it.
"""

__version__ = "0.1.0"
