"""Seed: create the accounts a plan signs in with (through the product's own sign-up form)."""

import json
import os
import sys
import urllib.parse
import urllib.request

base = sys.argv[1]
accounts = json.load(open(os.path.join(os.environ["SEED_DIR"], "seeds", "accounts.json"), encoding="utf-8"))
opener = urllib.request.build_opener(urllib.request.HTTPRedirectHandler())
for name, password in accounts.items():
    body = urllib.parse.urlencode({"username": name, "password": password}).encode()
    with opener.open(urllib.request.Request(base + "/signup", data=body, method="POST"), timeout=10) as response:
        if response.status >= 400:
            sys.exit(f"sign-up of {name} answered {response.status}")
print(f"created {len(accounts)} accounts")
