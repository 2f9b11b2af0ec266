"""Outcome and calibration analysis over builds: pure functions over plain data, no store access."""
