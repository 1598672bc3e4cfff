"""Probes that turn estimates into measurements (fake-tensor simulation, CPU and CUDA steps).

Empty until the probes issue lands; the planner core never imports this package.
"""
