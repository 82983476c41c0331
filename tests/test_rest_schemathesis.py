"""Property-based run of schemathesis over the REST app's OpenAPI document (bounded examples).

Checks: no 5xx, every status documented, every response body valid against its schema, the
documented content type and headers. Positive-data acceptance is left out: a well-formed request
can legitimately answer 404 (a fact that does not exist) or 422 (an empty query after trimming).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Every operation is an item of the same test id, and pytest-xdist reports one result per id:
    # a failing operation showed as a pass. `make test` runs this file in a pytest of its own.
    pytest.skip(
        "schemathesis's items share one test id, which pytest-xdist reports once: "
        "run this file without -n (make test does)",
        allow_module_level=True,
    )

_HOME = Path(tempfile.mkdtemp(prefix="coffer-schemathesis-"))
# The home is made at import (schemathesis builds its cases from the app then); a run that collects
# this file and deselects its tests never runs the fixture below, so the interpreter's exit removes it.
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
_SERVICE = MemoryService(_HOME)
_SERVICE.remember("deploys go through the release branch", store="global")
_SERVICE.append_rule("run the tests before pushing", store="global")
app = create_app(_SERVICE)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> object:
    yield
    app.state.operations.close()
    _SERVICE.close()
    shutil.rmtree(_HOME, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    # A POST with no body (organize, reindex...) must still say JSON: without it the request guard
    # answers 415 before the route, and the route would never be exercised.
    headers = {"Content-Type": "application/json"} if case.method.upper() == "POST" else None
    case.call_and_validate(checks=CHECKS, headers=headers)
