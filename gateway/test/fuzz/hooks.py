"""Schemathesis hooks for gateway/test/fuzz.test.ts, loaded through SCHEMATHESIS_HOOKS=hooks.

FUZZ_WORKSPACE_ID is the workspace the run acts in (the `workspace_id` header).
"""

import os
import uuid

import schemathesis

WORKSPACE = os.environ.get("FUZZ_WORKSPACE_ID", "").lower()
UNKNOWN_WORKSPACE = "00000000-0000-4000-8000-000000000000"
CAMPAIGN_PATHS = {"/email-campaigns/", "/email-campaigns/{id}"}


def _is_uuid(value):
    try:
        uuid.UUID(str(value))
        return True
    except ValueError:
        return False


@schemathesis.hook
def before_call(context, case, kwargs):
    path = case.operation.path
    method = case.method.upper()
    # The stateful phase feeds ids from responses into later calls: it finds the run's workspace in
    # GET /workspaces/ and would delete it, after which every workspace-scoped operation answers 404
    # and is no longer tested. That one call goes to an unknown workspace instead.
    if method == "DELETE" and path == "/workspaces/{id}":
        parameters = case.path_parameters or {}
        if str(parameters.get("id", "")).lower() == WORKSPACE:
            case.path_parameters = {**parameters, "id": UNKNOWN_WORKSPACE}
    # A campaign's body workspace_id must equal the header (else 422 value_error); a generated
    # random UUID would make nearly every campaign write a 422 and leave the create/update/read/delete
    # paths untested. Values that are not UUIDs stay, so type and format errors are still exercised.
    if method in ("POST", "PUT") and path in CAMPAIGN_PATHS and isinstance(case.body, dict):
        if _is_uuid(case.body.get("workspace_id")):
            case.body = {**case.body, "workspace_id": WORKSPACE}
