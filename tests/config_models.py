"""A step that reads a constant of another module (dyn_config.SCALE): Dynamo
guards it by value through that module, which a serving process imports anew."""

from __future__ import annotations

import dyn_config


def config_scaled(x):
    return x * dyn_config.SCALE
