"""Generated requests to every route of the service's OpenAPI document (schemathesis, over the
in-memory manager): valid and invalid bodies, path parameters and headers (positive and negative
generation), with a valid administrator's token. No answer may be a 500 or carry a traceback.
Derandomized, a bounded number of cases per route and mode (about 20 s on two loaded cores).

The operations are driven through hypothesis here rather than schemathesis's pytest plugin, whose
fixture loader does not run on pytest 9."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for
from skylease.service.leases_api import create_app

from .api_fake import FakeManager

EXAMPLES = 40  # per route and mode
QOS_EXAMPLES = 25  # (the SpeQuloS and runs routes: more of them, on a real database)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    engine = engine_for(None, tmp_path_factory.mktemp("serve"))
    create_schema(engine)
    token = add_user(engine, "root", admin=True)
    from skylease.runtime.qos.service import QoSService

    app = create_app(FakeManager(nodes=4), engine, QoSService(engine))
    yield schemathesis.openapi.from_asgi("/openapi.json", app), token
    engine.dispose()


OPERATIONS = ["GET /health", "GET /me", "POST /leases", "GET /leases", "GET /leases/{lease_id}",
              "DELETE /leases/{lease_id}", "GET /queue", "GET /hosts",
              "POST /qos/bots", "GET /qos/bots", "GET /qos/bots/{bot}", "POST /qos/bots/{bot}/reports",
              "POST /qos/bots/{bot}/orders", "GET /qos/bots/{bot}/prediction", "GET /qos/bots/{bot}/series",
              "GET /qos/history/{infrastructure}", "GET /qos/account", "GET /qos/accounts/{name}",
              "POST /qos/accounts/{name}/deposits",
              "POST /runs", "GET /runs", "GET /runs/{run}", "POST /runs/{run}/tasks",
              "POST /runs/{run}/finish", "GET /runs/{run}/tasks"]
# /health takes nothing that could be wrong: no negative case exists
CASES = [(label, mode) for label in OPERATIONS for mode in GenerationMode
         if (label, mode) != ("GET /health", GenerationMode.NEGATIVE)]


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label} {mode.value}" for label, mode in CASES])
def test_no_generated_request_gets_a_500_or_a_traceback(service, label, mode):
    schema, token = service
    found = {op.ok().label: op.ok() for op in schema.get_all_operations()}
    assert set(found) == set(OPERATIONS), "a new route: add it to OPERATIONS"
    seen = []
    examples = EXAMPLES if "/qos/" not in label and "/runs" not in label else QOS_EXAMPLES

    @given(case=found[label].as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}
        response = case.call()
        seen.append(response.status_code)
        assert "Traceback" not in response.text and 'File "' not in response.text, response.text[:500]
        case.validate_response(response, checks=[not_a_server_error])

    check()
    assert seen
