"""What a request names, resolved: a model's config.json validated and counted (modelspec, shapes with the
family traits, moespec), the GPUs (hardware), and the bundled catalog of models, GPUs and calibration priors."""
