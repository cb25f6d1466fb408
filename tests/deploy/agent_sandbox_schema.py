"""Structural schemas of agent-sandbox's v1beta1 resources that deploy/kubernetes/
agent-sandbox uses (group extensions.agents.x-k8s.io): SandboxTemplate,
SandboxWarmPool, SandboxClaim.

Where they come from: the upstream CRD manifests are in no package a registry here
serves, so these are reconstructed from the PyPI package k8s-agent-sandbox 1.0.8 (the
project's own Python client, Apache-2.0): the group and version from its constants.py,
the claim's fields from k8s_helper.create_sandbox_claim and utils
(warmPoolRef, lifecycle.shutdownTime/shutdownPolicy, volumeClaimTemplates, env,
additionalPodMetadata), the template's and the pool's from the example manifests its
sdist ships (python-sandbox-template.yaml, python-sandbox-warmpool.yaml). A field not
named here is an error, as a structural CRD schema prunes or refuses it. The embedded
pod spec and volume claims are checked against Kubernetes' own schemas
(kubernetes-validate) by the test, as the CRDs embed those types.
"""

from __future__ import annotations

from typing import Any

GROUP = "extensions.agents.x-k8s.io"
VERSION = "v1beta1"
SOURCE = "k8s-agent-sandbox 1.0.8 (PyPI): constants.py, k8s_helper.py, example manifests"

_NAME_REF = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}},
    "required": ["name"],
    "additionalProperties": False,
}
_METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
_OBJECTS = {"type": "array", "items": {"type": "object"}}


def _resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"const": f"{GROUP}/{VERSION}"},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "SandboxTemplate": _resource(
        "SandboxTemplate",
        {
            "type": "object",
            "properties": {
                # a PodTemplateSpec: its spec is checked as a Pod's
                "podTemplate": {
                    "type": "object",
                    "properties": {
                        "metadata": {"type": "object"},
                        "spec": {"type": "object"},
                    },
                    "required": ["spec"],
                    "additionalProperties": False,
                },
                "volumeClaimTemplatesPolicy": {"enum": ["Overrides", "Merge"]},
                # PersistentVolumeClaims: each checked as one
                "volumeClaimTemplates": _OBJECTS,
            },
            "required": ["podTemplate"],
            "additionalProperties": False,
        },
    ),
    "SandboxWarmPool": _resource(
        "SandboxWarmPool",
        {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "sandboxTemplateRef": _NAME_REF,
            },
            "required": ["sandboxTemplateRef"],
            "additionalProperties": False,
        },
    ),
    "SandboxClaim": _resource(
        "SandboxClaim",
        {
            "type": "object",
            "properties": {
                "warmPoolRef": _NAME_REF,
                "lifecycle": {
                    "type": "object",
                    "properties": {
                        "shutdownTime": {"type": "string", "format": "date-time"},
                        "shutdownPolicy": {"enum": ["Delete", "Retain"]},
                    },
                    "additionalProperties": False,
                },
                "volumeClaimTemplates": _OBJECTS,
                "env": _OBJECTS,
                "additionalPodMetadata": {
                    "type": "object",
                    "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["warmPoolRef"],
            "additionalProperties": False,
        },
    ),
}
