"""Configuration: the knob fields declared once (knobfields), the one configuration object with the rules
between knobs (spec.Knobs, Plan), the rules that need the hardware or the model (layout.Layout), the RL workload
(workload), and the request models every face sends (requests)."""
