"""Schemathesis hooks and checks for gateway/test/fuzz.test.ts, loaded through SCHEMATHESIS_HOOKS=hooks.

FUZZ_WORKSPACE_ID is the workspace the run acts in (the `workspace_id` header).
"""

import os
import time
import uuid

import requests
import schemathesis

WORKSPACE = os.environ.get("FUZZ_WORKSPACE_ID", "").lower()
UNKNOWN_WORKSPACE = "00000000-0000-4000-8000-000000000000"
# A "busy, retry later" answer is sent again this often, as a client would, before it counts as a server error.
BUSY_RETRIES = 3
BUSY_WAIT_MAX_S = 10.0
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


def _retry_after(response):
    """The seconds a 503 asks the client to wait before it comes back (a dependency was slow or away, which the API
    documents), else None. Schemathesis's own responses list each header's values under its lower-case name."""
    if response.status_code != 503:
        return None
    value = response.headers.get("retry-after") or response.headers.get("Retry-After")
    return float(value[0] if isinstance(value, list) else value) if value else None


@schemathesis.check
def no_server_error_after_retries(ctx, response, case):
    """Every 5xx fails, except a 503 with Retry-After that is gone when the same request is sent again after the
    wait it names (at most BUSY_RETRIES times): on a starved host a service or Kafka may miss its deadline, which
    is not a fault of the input; a 503 that persists, or any other 5xx, is one."""
    retries = 0
    while (wait := _retry_after(response)) is not None and retries < BUSY_RETRIES:
        retries += 1
        time.sleep(min(wait, BUSY_WAIT_MAX_S))
        with requests.Session() as session:
            response = session.send(response.request, timeout=30)
    if response.status_code >= 500:
        after = f" after {retries} retries as its Retry-After said" if retries else ""
        raise AssertionError(f"Server error: {response.status_code}{after}: {response.text[:300]}")
