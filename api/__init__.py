"""The REST service over the planner. Empty until the API issue lands."""
