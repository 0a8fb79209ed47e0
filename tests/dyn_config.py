"""The configuration module config_models reads a constant of."""

SCALE = 2
