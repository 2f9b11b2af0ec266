"""Support file of the hidden suite for task verrange (not a test module).

Checks once per session that the package under test is the workspace's own
`verrange/` package: the test command runs with the workspace as the working
directory, so `verrange` must be imported from a path inside it, not from
site-packages or from the injected test directory.
"""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def verrange_comes_from_the_workspace():
    import verrange

    workspace = Path(os.getcwd()).resolve()
    origin = Path(verrange.__file__).resolve()
    assert origin.is_relative_to(workspace / "verrange"), (
        f"verrange was imported from {origin}, not from the workspace {workspace}"
    )
