"""Issue 31: what `pip install sluice-client[sqs,rabbitmq]` installs is under licences an
Apache-2.0 package may depend on: permissive ones, or MPL-2.0 (file-level copyleft, for
certifi's CA bundle, used unmodified). Read by pip-licenses from the installed packages'
metadata. The development tools (psycopg for the PostgreSQL example's test, docutils under
twine, ...) are not installed with the package and are not checked here."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement

EXTRAS = {"sqs", "rabbitmq"}
# pip-licenses reports the SPDX expression, or the trove classifiers' names.
PERMISSIVE = (
    "MIT",
    "BSD",
    "Apache",
    "ISC",
    "PSF",
    "Python Software Foundation",
    "Mozilla Public License 2.0",
    "MPL-2.0",
    "Unlicense",
)


def runtime_closure() -> set[str]:
    """Every distribution the package needs with its extras, by name, itself excluded."""
    seen: set[str] = set()
    todo = [("sluice-client", EXTRAS)]
    while todo:
        name, extras = todo.pop()
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            marker = requirement.marker
            if marker is not None and not any(marker.evaluate(env) for env in environments):
                continue
            key = requirement.name.lower().replace("_", "-")
            if key not in seen:
                seen.add(key)
                todo.append((requirement.name, set(requirement.extras)))
    return seen


def allowed(licence: str) -> bool:
    # "A; B" lists classifiers (any of them may be chosen); "A OR B" is SPDX's choice.
    choices = [part.strip() for part in licence.replace(" OR ", ";").split(";")]
    return any(any(word in choice for word in PERMISSIVE) for choice in choices)


def test_the_packages_runtime_dependencies_have_compatible_licences() -> None:
    names = runtime_closure()
    assert {"httpx", "boto3", "pika"} <= names, names
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "piplicenses",
            "--from=mixed",
            "--format=json",
            "--packages",
            *names,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found = {
        row["Name"].lower().replace("_", "-"): row["License"] for row in json.loads(out.stdout)
    }
    assert set(found) == names, names ^ set(found)
    refused = {name: licence for name, licence in found.items() if not allowed(licence)}
    assert refused == {}
    assert not allowed("GNU General Public License v3 (GPLv3)")
    assert not allowed("LGPL-3.0-only")
    assert allowed("Apache-2.0 OR BSD-3-Clause")
