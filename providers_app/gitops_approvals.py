"""GitOps writes behind a human approval: what an approval pins, and the executors that run it once.

``providers_app`` owns GitOps, so it registers these with approvals_app in ``AppConfig.ready()``:

- the binder turns what the requester asked (``{"repo", "branch"|"tag", "from"?}``) into exactly what the
  approver will see and approve — the repository, the full ref and the commit it will point at — and
  refuses a name git would not accept or a ref that already exists;
- the executor consumes the approval (once per approval, ever), checks that it still names exactly that,
  and creates the ref with ``update-ref`` only if it does not exist.
"""

from __future__ import annotations

from typing import Any

from approvals_app.approvals import ApprovalNotUsable, approval_consume
from approvals_app.models import Approval
from tess_site.audit.services import record_audit
from tess_site.errors import InvalidInput
from tess_site.scope import Scope

from . import gitops
from .capabilities import CapabilityName, capability

TARGET_TYPE = "git_repo"
ACTIONS = {"gitops.create_branch": "branch", "gitops.create_tag": "tag"}


def _kind(action: str) -> str:
    return ACTIONS[action]


def bind_parameters(action: str) -> Any:
    kind = _kind(action)

    def bind(scope: Scope, target_type: str, target_id: str, given: dict[str, Any]) -> dict[str, Any]:
        allowed = {"repo", kind, "from"}
        if target_type != TARGET_TYPE or given.get("repo") != target_id or set(given) - allowed:
            raise InvalidInput("The parameters do not name this repository and ref.", details={"field": "parameters"})
        # Fail closed before anyone is asked: the write operation must be on offer here.
        capability(CapabilityName.GITOPS).operation(f"create_{kind}")
        return gitops.write_parameters(
            scope, repo=target_id, kind=kind, name=given.get(kind, ""), start=given.get("from")
        )

    return bind


def executor(action: str) -> Any:
    kind = _kind(action)

    def execute(scope: Scope, approval: Approval) -> dict[str, Any]:
        params = approval.parameters if isinstance(approval.parameters, dict) else {}
        exact = {"repo", kind, "ref", "from", "commit"}
        if (
            approval.action != action
            or approval.target_type != TARGET_TYPE
            or set(params) != exact
            or params.get("repo") != approval.target_id
        ):
            raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
        approval_consume(approval_id=approval.pk, action=action, target_type=TARGET_TYPE, target_id=approval.target_id)
        create = capability(CapabilityName.GITOPS).operation(f"create_{kind}")
        result: dict[str, Any] = create(
            scope,
            repo=params["repo"],
            full_ref=params["ref"],
            commit=params["commit"],
            reason=f"tess approval {approval.pk}",
        )
        record_audit(
            scope,
            action=action,
            target_type=TARGET_TYPE,
            target_id=approval.target_id,
            outcome="executed",
            metadata={"approval_id": str(approval.pk), "commit": params["commit"], "created": result["created"]},
        )
        return result

    return execute
