"""Outcome producers: hidden-test acceptance in a sandbox, browser grading of test plans."""
