"""verrange, control "hollow-banned": a hollow shell around banned packages.

It delegates to a ready-made version library (`semver`, banned by
source/denylist.json `import_ban`) and to the toolchain's `packaging`
(also banned), and implements nothing itself. The post-submission denylist
scan must reject this workspace before any hidden test runs.
"""

import semver  # banned: import_ban "semver"

from .shim import (  # noqa: F401
    InvalidRange,
    InvalidVersion,
    Range,
    Version,
    compare,
    max_satisfying,
    min_satisfying,
    satisfies,
    sort_versions,
)
