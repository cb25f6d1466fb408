"""deploy/kubernetes/agent-sandbox: agentd's SandboxTemplate, its warm pool and a
workspace's claim, rendered (tests/deploy/kustomize.py) and validated: the resources
against agent-sandbox's v1beta1 schemas (tests/deploy/agent_sandbox_schema.py says
where they come from), the pod and volume claims they embed against Kubernetes' own
(strict), and the template's pod against the StatefulSet's, so the two cannot drift."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.deploy import kustomize
from tests.deploy.agent_sandbox_schema import SCHEMAS
from tests.support import data

K8S = data.ROOT / "deploy" / "kubernetes"
K8S_VERSION = "1.33.0"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return kustomize.render(K8S / "agent-sandbox")


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def validate(doc: dict[str, Any]) -> None:
    """One rendered resource against its schema, and what it embeds against Kubernetes'."""
    if doc["kind"] not in SCHEMAS:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return
    jsonschema.validate(doc, SCHEMAS[doc["kind"]])
    spec = doc["spec"]
    meta = {"name": doc["metadata"]["name"], "namespace": doc["metadata"].get("namespace", "")}
    if "podTemplate" in spec:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**spec["podTemplate"].get("metadata", {}), **meta},
            "spec": spec["podTemplate"]["spec"],
        }
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    for claim in spec.get("volumeClaimTemplates", []):
        pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}
        kubernetes_validate.validate(pvc, K8S_VERSION, strict=True)


def test_the_resources_validate(docs: list[dict[str, Any]]) -> None:
    assert {d["kind"] for d in docs} == {
        "Namespace",
        "SandboxTemplate",
        "SandboxWarmPool",
        "SandboxClaim",
    }
    for doc in docs:
        validate(doc)
    namespace = _one(docs, "Namespace")["metadata"]["name"]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {namespace}


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("SandboxWarmPool", ("spec", "replicas"), "two"),
        ("SandboxClaim", ("spec", "warmPoolRef", "nmae"), "agentd"),
        ("SandboxTemplate", ("spec", "podTemplate", "spec", "containers", 0, "imge"), "x"),
        ("SandboxTemplate", ("spec", "volumeClaimTemplates", 0, "spec", "size"), "1Gi"),
    ],
)
def test_the_checks_can_fail(
    docs: list[dict[str, Any]], kind: str, path: tuple[Any, ...], value: Any
) -> None:
    bad = copy.deepcopy(_one(docs, kind))
    at: Any = bad
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(bad)


def test_the_template_runs_the_statefulsets_pod(docs: list[dict[str, Any]]) -> None:
    """One pod spec, two ways to run it: what the StatefulSet's pod needs (and the pod
    tests prove by running it) is what the template's pod has."""
    (sts,) = [d for d in kustomize.render(K8S / "base") if d["kind"] == "StatefulSet"]
    template = _one(docs, "SandboxTemplate")["spec"]
    assert template["podTemplate"] == sts["spec"]["template"]
    claims = {c["metadata"]["name"]: c for c in template["volumeClaimTemplates"]}
    assert claims == {c["metadata"]["name"]: c for c in sts["spec"]["volumeClaimTemplates"]}
    assert set(claims) == {"workspace", "state"}


def test_the_claim_takes_from_the_pool_of_the_template(docs: list[dict[str, Any]]) -> None:
    pool = _one(docs, "SandboxWarmPool")
    assert (
        pool["spec"]["sandboxTemplateRef"]["name"]
        == _one(docs, "SandboxTemplate")["metadata"]["name"]
    )
    assert _one(docs, "SandboxClaim")["spec"]["warmPoolRef"]["name"] == pool["metadata"]["name"]
