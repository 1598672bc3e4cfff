"""The REST service over the planner (FastAPI): routes per resource, the probe job queue (jobs), settings,
metrics and the bundled web page (web/)."""
