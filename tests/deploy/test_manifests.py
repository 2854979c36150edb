"""The Kubernetes side, checked without a cluster or Helm (neither can be installed from
the registries this suite may reach): the KEDA ScaledObject against KEDA's CRD schema
(@kubernetes-models/keda, generated from KEDA's CRDs; tests/deploy/manifests), the
chart's values against its values.schema.json (the schema Helm itself enforces on
install, upgrade, lint and template), and the runner's privileges in the chart against
the compose file's, so the two cannot drift. The KEDA trigger's names are checked
against a running stack by test_stack.py."""

from __future__ import annotations

import copy
import json
import subprocess

import jsonschema
import pytest
import yaml

from conftest import ROOT

CHART = ROOT / "deploy" / "helm" / "agentd"


def keda_validate(*files) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["node", str(ROOT / "tests" / "deploy" / "manifests" / "validate.mjs"), *map(str, files)],
        capture_output=True, text=True, timeout=60,
    )


def test_the_keda_manifest_satisfies_kedas_crd_schema():
    result = keda_validate(*sorted((ROOT / "deploy" / "keda").glob("*.yaml")))
    assert result.returncode == 0, result.stderr
    assert "ScaledObject/agentd-worker: valid" in result.stdout


def test_the_keda_check_refuses_a_broken_scaled_object(tmp_path):
    manifest = yaml.safe_load((ROOT / "deploy" / "keda" / "scaledobject.yaml").read_text())
    manifest["spec"]["minReplicaCount"] = "one"
    del manifest["spec"]["triggers"][0]["type"]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(manifest))
    result = keda_validate(broken)
    assert result.returncode == 1
    assert "minReplicaCount must be integer" in result.stderr and "required property type" in result.stderr


def values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def schema() -> dict:
    return json.loads((CHART / "values.schema.json").read_text())


def test_the_charts_defaults_satisfy_its_schema():
    jsonschema.validate(values(), schema())


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda v: v["gateway"].update(replica=3), "a misspelt key"),
        (lambda v: v["ports"].update(http=70000), "a port out of range"),
        (lambda v: v["image"].update(pullPolicy="Sometimes"), "an unknown pull policy"),
        (lambda v: v.update(logFormat="xml"), "an unknown log format"),
        (lambda v: v["runner"].update(enabled="yes"), "a string for a boolean"),
    ],
    ids=["misspelt", "port", "pull-policy", "log-format", "boolean"],
)
def test_the_schema_refuses_what_the_chart_would_misread(change, why):
    bad = copy.deepcopy(values())
    change(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema())


def test_the_runner_gets_the_same_least_privilege_in_the_chart_and_in_compose():
    """ADR 0030: root, SYS_ADMIN and NET_ADMIN, the runtime's default seccomp profile."""
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())["services"]["runner"]
    runner = values()["runner"]
    assert sorted(runner["securityContext"]["capabilities"]["add"]) == sorted(compose["cap_add"])
    assert runner["podSecurityContext"]["runAsUser"] == 0 and compose["user"].split(":")[0] == "0"
    assert runner["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert "security_opt" not in compose, "compose keeps the engine's default seccomp profile too"
    # Kubernetes refuses SYS_ADMIN with allowPrivilegeEscalation false.
    assert runner["securityContext"]["allowPrivilegeEscalation"] is True
    # Nothing else gets them.
    assert values()["securityContext"]["capabilities"] == {"drop": ["ALL"]}
