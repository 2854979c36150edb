"""The machine-readable contract (ADR 0021): `GET /v1/openapi.json` is docs/openapi.json,
a valid OpenAPI 3.1 document, and schemathesis's generated requests against `agentd dev`
get no server error (5xx) from any operation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

from harness import Deployment

COMMITTED = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"

# Operations schemathesis must not call: the operations listener's (another address; a
# drain would stop the shared deployment).
NOT_FUZZED = ["ops.drain", "ops.metrics_text"]


def test_the_served_document_is_the_committed_one_and_valid(agentd: Deployment) -> None:
    http = agentd.http()
    answer = http.get("/v1/openapi.json", headers={"x-api-key": agentd.bootstrap_key})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    served = answer.json()
    assert served == json.loads(COMMITTED.read_text()), "regenerate: AGENTD_BLESS_OPENAPI=1 cargo nextest run -p agentd-gateway openapi"
    validate(served, cls=OpenAPIV31SpecValidator)
    assert served["openapi"] == "3.1.0"
    ids = {op["operationId"] for item in served["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
    for expected in ("sessions.create", "config.agents.publish", "app_tokens.create", "durable.cancel", "a2a.jsonrpc.workspace", "mcp.post", "ops.drain", "openapi.serve"):
        assert expected in ids, expected


def test_the_document_takes_an_api_key(agentd: Deployment) -> None:
    answer = agentd.http().get("/v1/openapi.json")
    assert answer.status_code == 401, answer.text
    assert answer.json()["type"] == "error"


@pytest.mark.parametrize("agentd", ["dev"], indirect=True)
def test_generated_requests_get_no_server_error(agentd: Deployment, tmp_path: Path) -> None:
    schemathesis = Path(sys.executable).with_name("schemathesis")
    command = [
        str(schemathesis), "run", str(COMMITTED),
        "--url", agentd.url,
        "--header", f"x-api-key: {agentd.bootstrap_key}",
        "--checks", "not_a_server_error",
        "--phases", "examples,fuzzing",
        "--max-examples", "3",
        "--seed", "21",
        "--workers", "2",
        "--request-timeout", "10",
        "--max-time", "100",
        "--no-color",
        "--report", "junit",
        "--report-dir", str(tmp_path),
    ]
    for operation in NOT_FUZZED:
        command += ["--exclude-operation-id", operation]
    # In the test's directory: schemathesis leaves its example database where it runs.
    run = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"schemathesis found server errors (or could not run):\n{output[-20000:]}"
    generated = re.search(r"(\d+) generated, (\d+) passed", output)
    assert generated and int(generated[1]) > 0 and generated[1] == generated[2], output[-5000:]
