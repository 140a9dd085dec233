"""Capability descriptors: each advertises its operations; an absent one or an unsupported operation fails closed."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from providers_app.capabilities import (
    OPERATIONS,
    CapabilityDescriptor,
    CapabilityName,
    available_capabilities,
    capability,
    register_capability_operation,
    unregister_capability_operation,
)
from providers_app.contract import CapabilityUnsupported
from providers_app.registry import reset_instances
from tests.conftest import require_or_skip


def test_the_three_plugin_capabilities_advertise_their_operations():
    assert capability(CapabilityName.FLEET_DIAGNOSTICS).supported == {
        "provider_health",
        "queue_depth",
        "session_counts",
    }
    assert capability(CapabilityName.DURABLE_INBOX_STATE).supported == {
        "enqueue",
        "claim",
        "checkpoint",
        "checkpoint_write",
        "depth",
    }
    assert OPERATIONS[CapabilityName.RUNTIME_BOOTSTRAP] == {"start": False}


def test_fleet_diagnostics_is_read_only_and_the_inbox_hooks_are_not():
    assert capability(CapabilityName.FLEET_DIAGNOSTICS).read_only is True
    assert capability(CapabilityName.DURABLE_INBOX_STATE).read_only is False


def test_an_absent_capability_fails_closed_with_a_typed_501(settings):
    settings.TESS_GITOPS_REPOS = {}
    with pytest.raises(CapabilityUnsupported) as raised:
        capability(CapabilityName.GITOPS)
    assert raised.value.status_code == 501 and raised.value.code == "capability_unsupported"
    assert raised.value.details["capability"] == "gitops"


def test_a_configured_repository_makes_gitops_present(settings, tmp_path):
    settings.TESS_GITOPS_REPOS = {"app": {"path": str(tmp_path), "tenants": None}}
    assert "create_branch" in capability(CapabilityName.GITOPS).supported


def test_an_unknown_capability_name_fails_closed():
    with pytest.raises(CapabilityUnsupported):
        capability("teleport")


def test_an_operation_the_capability_does_not_advertise_fails_closed():
    diagnostics = capability(CapabilityName.FLEET_DIAGNOSTICS)
    with pytest.raises(CapabilityUnsupported) as raised:
        diagnostics.operation("restart_everything")
    assert raised.value.details["operation"] == "restart_everything"


def test_a_withdrawn_operation_is_absent_not_emulated():
    original = capability(CapabilityName.FLEET_DIAGNOSTICS).operation("session_counts")
    unregister_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "session_counts")
    try:
        assert not capability(CapabilityName.FLEET_DIAGNOSTICS).supports("session_counts")
        with pytest.raises(CapabilityUnsupported):
            capability(CapabilityName.FLEET_DIAGNOSTICS).operation("session_counts")
    finally:
        register_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "session_counts", original)


def test_descriptors_refuse_operations_their_capability_does_not_define():
    with pytest.raises(ValueError):
        CapabilityDescriptor(name=CapabilityName.FLEET_DIAGNOSTICS, operations={"delete_fleet": print})
    with pytest.raises(ValueError):
        register_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "delete_fleet", print)


@pytest.fixture
def two_kinds(settings):
    if shutil.which("tmux") is None:
        require_or_skip("TMUX IS NOT INSTALLED")
    root = Path(tempfile.mkdtemp(prefix="tess-cap-", dir="/tmp"))
    settings.TESS_RUNTIME_PROVIDERS = {
        "box": {"kind": "tmux", "socket": str(root / "tmux.sock"), "log_dir": str(root / "logs")},
        "replay": {"kind": "pi", "sessions_dir": str(root / "pi")},
    }
    reset_instances()
    yield
    reset_instances()
    shutil.rmtree(root, ignore_errors=True)


def test_runtime_bootstrap_is_per_instance_present_on_tmux_and_absent_on_pi(two_kinds):
    tmux = capability(CapabilityName.RUNTIME_BOOTSTRAP, instance="box")
    assert tmux.instance == "box" and tmux.supported == {"start"} and tmux.read_only is False
    with pytest.raises(CapabilityUnsupported) as raised:
        capability(CapabilityName.RUNTIME_BOOTSTRAP, instance="replay")
    assert raised.value.details == {"capability": "runtime_bootstrap", "instance": "replay"}
    with pytest.raises(CapabilityUnsupported):
        capability(CapabilityName.RUNTIME_BOOTSTRAP, instance="nowhere")


def test_the_inventory_lists_tess_wide_and_per_instance_capabilities(two_kinds):
    found = {(d.name, d.instance) for d in available_capabilities(instances=["box", "replay"])}
    assert (CapabilityName.RUNTIME_BOOTSTRAP, "box") in found
    assert (CapabilityName.RUNTIME_BOOTSTRAP, "replay") not in found
    assert (CapabilityName.FLEET_DIAGNOSTICS, "") in found
