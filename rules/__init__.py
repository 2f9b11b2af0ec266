"""The rule language: declarative templates over a run's event log, and the built-in rule sets."""
