"""User profiles: every method of `client.beta.user_profiles` (legacy shape, the
`user-profiles-2026-08-18` selector the SDK's beta client sends) and of `client.user_profiles`
(the GA client, no selector: `external_user_details`), the validation and update rules of
docs/api/user-profiles.md, list order and pages, deletion as a tombstone, and the consent
page the enrollment and action URLs open (granted and withdrawn per purpose, an expired or
altered link refused with nothing changed).

Wire facts: managed-agents-wire.md §2.14 (routes), §2B.11 (bodies), §3.12 (shapes), §1.4
(the selector changes the shape). Strict response validation is on.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import anthropic
import httpx
import pytest

from harness import Deployment, collect, error_body, unique

MISSING = "uprof_" + "0" * 26
LEGACY_0324 = {"anthropic-beta": "user-profiles-2026-03-24"}
PURPOSES = ("conversation_content", "activity_record")


def refused(call_: Callable[[], Any], status: int, *fragments: str) -> dict[str, Any]:
    with pytest.raises(anthropic.APIStatusError) as caught:
        call_()
    body = error_body(caught.value)
    assert caught.value.status_code == status, (caught.value.status_code, body)
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body)
    return body


def raw(agentd: Deployment, profile_id: str, **headers: str) -> dict[str, Any]:
    """The profile as served to a request with exactly these headers (besides the key)."""
    with agentd.http() as http:
        response = http.get(f"/v1/user_profiles/{profile_id}", headers=agentd.headers(beta=False) | headers)
    assert response.status_code == 200, response.text
    return response.json()


def consent(agentd: Deployment, profile_id: str) -> dict[str, Any]:
    return raw(agentd, profile_id)["consent"]


def at(seconds_ago: int) -> datetime:
    """A whole-second UTC instant (the wire keeps microseconds; agentd keeps milliseconds)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    return now - timedelta(seconds=seconds_ago)


def browser() -> httpx.Client:
    """What an end user's browser is to the consent page: no API key, no beta header."""
    return httpx.Client(trust_env=False, timeout=30.0, follow_redirects=False)


def test_the_beta_and_ga_clients_see_their_own_shapes(agentd: Deployment, client: anthropic.Anthropic) -> None:
    onboarded = at(86_400)
    created = client.beta.user_profiles.create(
        name=unique("Ada"),
        external_id="ref-1",
        external_user_onboarded_at=onboarded,
        metadata={"team": "a"},
    )
    assert created.id.startswith("uprof_") and created.type == "user_profile"
    assert created.access_type == "application", "the default"
    assert created.external_id == "ref-1" and created.external_user_onboarded_at == onboarded
    assert created.external_user_details is None and created.trust_grants == {}
    assert created.metadata == {"team": "a"} and created.created_at == created.updated_at
    assert client.beta.user_profiles.retrieve(created.id) == created

    # The GA client (no selector) reads the same profile through external_user_details.
    ga = client.user_profiles.retrieve(created.id)
    assert ga.external_user_details.reference_id == "ref-1"
    assert ga.external_user_details.onboarded_at == onboarded
    assert ga.external_user_details.country is None and ga.external_user_details.entity_type is None
    assert ga.access_type == "application" and ga.enforcement_status == "unrestricted"
    assert ga.enforcement_actions == [] and ga.programs.cyber is None and ga.programs.efs is None
    body = raw(agentd, created.id)
    assert "external_id" not in body and "external_user_onboarded_at" not in body and "trust_grants" not in body
    legacy = raw(agentd, created.id, **{"anthropic-beta": "user-profiles-2026-08-18"})
    assert "external_user_details" not in legacy and "programs" not in legacy and legacy["trust_grants"] == {}
    # The oldest selector: no access_type, no external_user_onboarded_at.
    oldest = raw(agentd, created.id, **LEGACY_0324)
    assert oldest["external_id"] == "ref-1"
    assert "access_type" not in oldest and "external_user_onboarded_at" not in oldest
    assert "external_user_details" not in oldest
    for shape in (body, legacy, oldest):
        assert shape["consent"] == {"conversation_content": None, "activity_record": None}

    # GA creates with external_user_details; the beta client reads them as legacy fields.
    details = client.user_profiles.create(
        name="Acme Corp",
        access_type="passthrough",
        external_user_details={
            "reference_id": "acct-9",
            "onboarded_at": onboarded,
            "account_status": "active",
            "country": "US",
            "email_hash": "e" * 64,
            "entity_type": "business",
            "name_hash": "n" * 64,
        },
    )
    d = details.external_user_details
    assert (d.reference_id, d.onboarded_at, d.account_status, d.country) == ("acct-9", onboarded, "active", "US")
    assert (d.email_hash, d.entity_type, d.name_hash) == ("e" * 64, "business", "n" * 64)
    assert details.access_type == "passthrough"
    again = client.beta.user_profiles.retrieve(details.id)
    assert (again.external_id, again.external_user_onboarded_at) == ("acct-9", onboarded)
    assert again.access_type == "passthrough"

    # Each selector takes only its own fields.
    refused(
        lambda: client.beta.user_profiles.create(external_user_details={"reference_id": "x"}),
        400,
        "external_user_details",
    )
    refused(lambda: client.user_profiles.create(extra_body={"external_id": "x"}), 400, "external_id")
    refused(
        lambda: client.beta.user_profiles.create(
            external_user_onboarded_at=onboarded, extra_headers=LEGACY_0324
        ),
        400,
        "external_user_onboarded_at",
    )
    created_0324 = client.beta.user_profiles.create(external_id="old", extra_headers=LEGACY_0324)
    assert created_0324.external_id == "old" and created_0324.access_type is None
    refused(lambda: client.beta.user_profiles.create(extra_body={"surname": "x"}), 400, "surname")


def test_fields_are_validated(client: anthropic.Anthropic) -> None:
    profiles = client.user_profiles
    refused(lambda: profiles.create(name="x" * 256), 400, "name")
    assert profiles.create(name="x" * 255).name == "x" * 255
    refused(lambda: profiles.create(metadata={f"k{i}": "v" for i in range(17)}), 400, "metadata")
    refused(lambda: profiles.create(metadata={"k" * 65: "v"}), 400, "metadata")
    refused(lambda: profiles.create(metadata={"k": "v" * 513}), 400, "metadata.k")
    refused(lambda: profiles.create(metadata={"k": ""}), 400, "non-empty")
    refused(lambda: profiles.create(access_type="reseller"), 400, "access_type")  # type: ignore[arg-type]
    for field, value in [
        ("country", "us"),
        ("country", "USA"),
        ("entity_type", "person"),
        ("account_status", "gone"),
        ("email_hash", ""),
        ("name_hash", "h" * 256),
        ("reference_id", "r" * 256),
    ]:
        refused(
            lambda: profiles.create(external_user_details={field: value}),  # type: ignore[misc]
            400,
            f"external_user_details.{field}",
        )
    # Timestamps: complete RFC 3339, at most a minute ahead.
    soon = datetime.now(timezone.utc) + timedelta(seconds=20)
    assert profiles.create(external_user_details={"onboarded_at": soon}).external_user_details.onboarded_at
    later = datetime.now(timezone.utc) + timedelta(minutes=5)
    refused(lambda: profiles.create(external_user_details={"onboarded_at": later}), 400, "1 minute in the future")
    for partial in ["2024-01-01", "2024-01-01T00:00:00", "yesterday"]:
        refused(lambda: profiles.create(external_user_details={"onboarded_at": partial}), 400, "RFC 3339")
    refused(lambda: client.beta.user_profiles.create(external_user_onboarded_at=later), 400, "future")
    refused(lambda: client.beta.user_profiles.create(external_id=""), 400, "external_id")


def test_update_merges_metadata_and_refuses_to_clear_what_was_set(
    agentd: Deployment, client: anthropic.Anthropic
) -> None:
    onboarded = at(3_600)
    created = client.beta.user_profiles.create(
        name="Grace",
        external_id="ref-g",
        external_user_onboarded_at=onboarded,
        metadata={"a": "1", "b": "2"},
    )
    updated = client.beta.user_profiles.update(created.id, metadata={"a": "", "c": "3"}, name=None)
    assert updated.metadata == {"b": "2", "c": "3"}, "'' removes a key; others merge"
    assert updated.name is None, "a name can be cleared"
    assert updated.external_id == "ref-g" and updated.external_user_onboarded_at == onboarded, "kept when omitted"
    assert updated.updated_at > created.updated_at
    same = client.beta.user_profiles.update(created.id)
    assert same == updated, "an empty update changes nothing"

    # Once set, external details cannot be cleared: null is refused, nothing changes.
    refused(
        lambda: client.beta.user_profiles.update(created.id, external_id=None), 400, "external_id", "cannot be cleared"
    )
    refused(
        lambda: client.beta.user_profiles.update(created.id, external_user_onboarded_at=None),  # type: ignore[arg-type]
        400,
        "external_user_onboarded_at",
    )
    refused(lambda: client.user_profiles.update(created.id, access_type=None), 400, "access_type")
    refused(
        lambda: client.user_profiles.update(created.id, external_user_details={"reference_id": None}),
        400,
        "external_user_details.reference_id",
    )
    refused(lambda: client.user_profiles.update(created.id, extra_body={"external_user_details": None}), 400)
    # A detail never set may be sent as null (nothing to clear); a set one is replaced.
    ga = client.user_profiles.update(
        created.id, external_user_details={"country": None, "reference_id": "ref-h", "entity_type": "individual"}
    )
    assert ga.external_user_details.country is None and ga.external_user_details.reference_id == "ref-h"
    refused(
        lambda: client.user_profiles.update(created.id, external_user_details={"entity_type": None}),
        400,
        "external_user_details.entity_type",
    )
    later = datetime.now(timezone.utc) + timedelta(minutes=2)
    refused(lambda: client.beta.user_profiles.update(created.id, external_user_onboarded_at=later), 400, "future")

    # At most 16 keys after the merge; a removal makes room.
    full = client.user_profiles.update(created.id, metadata={f"k{i}": "v" for i in range(14)})
    assert len(full.metadata) == 16
    refused(lambda: client.user_profiles.update(created.id, metadata={"one": "more"}), 400, "16")
    assert len(client.user_profiles.update(created.id, metadata={"k0": "", "one": "more"}).metadata) == 16
    after = raw(agentd, created.id)
    assert after["external_user_details"]["reference_id"] == "ref-h"
    assert after["external_user_details"]["entity_type"] == "individual"


def test_list_orders_and_pages(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    names = ["bob", None, "Alice", "carol", None, "alice", "_x"]
    created = [client.user_profiles.create(name=name) if name else client.user_profiles.create() for name in names]
    gone = client.user_profiles.create(name="aaa")
    client.user_profiles.delete(gone.id)
    ids = [p.id for p in created]

    assert [p.id for p in collect(client.user_profiles.list())] == ids[::-1], "newest first by default"
    assert [p.id for p in collect(client.user_profiles.list(order="asc", limit=2))] == ids
    assert [p.id for p in collect(client.beta.user_profiles.list(order="desc", limit=3))] == ids[::-1]
    page = client.user_profiles.list(limit=3)
    assert len(page.data) == 3 and page.next_page

    by_name = [p.id for p in collect(client.user_profiles.list(order_by="name", order="asc", limit=2))]
    # Case-insensitive ASCII ("_" sorts before letters), equal names by creation, nameless last.
    expected = [ids[6], ids[2], ids[5], ids[0], ids[3], ids[1], ids[4]]
    assert by_name == expected, [p.name for p in client.user_profiles.list(order_by="name", order="asc")]
    descending = [p.id for p in collect(client.beta.user_profiles.list(order_by="name", limit=1))]
    assert descending == [ids[3], ids[0], ids[5], ids[2], ids[6], ids[4], ids[1]], "desc by default; nameless last"

    refused(lambda: client.user_profiles.list(limit=0), 400, "limit")
    refused(lambda: client.user_profiles.list(limit=101), 400, "limit")
    refused(lambda: client.user_profiles.list(order_by="email"), 400, "order_by")  # type: ignore[arg-type]
    refused(lambda: client.user_profiles.list(order="up"), 400, "order")  # type: ignore[arg-type]
    cursor = client.user_profiles.list(limit=1).next_page
    refused(lambda: client.user_profiles.list(page=cursor, order_by="name"), 400, "page")
    refused(lambda: client.user_profiles.list(page="page_garbage"), 400, "page")
    # Every profile is unrestricted: the GA client's enforcement filter says so.
    assert len(collect(client.user_profiles.list(enforcement_status=["unrestricted"]))) == len(ids)
    assert collect(client.user_profiles.list(enforcement_status=["banned", "restricted"])) == []
    bad_status: Any = ["gone"]
    refused(lambda: client.user_profiles.list(enforcement_status=bad_status), 400, "enforcement_status")


def test_a_deleted_profile_is_gone_everywhere(
    client: anthropic.Anthropic, workspace_client: Callable[[], anthropic.Anthropic]
) -> None:
    profile = client.user_profiles.create(name=unique("leaving"))
    other = workspace_client()
    refused(lambda: other.user_profiles.retrieve(profile.id), 404)
    refused(lambda: other.user_profiles.delete(profile.id), 404)
    deleted = client.beta.user_profiles.delete(profile.id)
    assert (deleted.id, deleted.type) == (profile.id, "user_profile_deleted")
    refused(lambda: client.user_profiles.retrieve(profile.id), 404, profile.id)
    refused(lambda: client.beta.user_profiles.update(profile.id, name="back"), 404)
    refused(lambda: client.user_profiles.delete(profile.id), 404)
    refused(lambda: client.beta.user_profiles.create_enrollment_url(profile.id), 404)
    refused(
        lambda: client.user_profiles.action_urls.create(profile.id, action={"type": "enroll_end_user"}), 404
    )
    assert profile.id not in [p.id for p in collect(client.user_profiles.list(limit=100))]
    refused(lambda: client.user_profiles.retrieve(MISSING), 404)
    refused(lambda: client.user_profiles.retrieve("uprof_nope"), 404)


def grant_form(purpose: str, choice: str) -> dict[str, str]:
    return {"purpose": purpose, "choice": choice}


def statuses(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-purpose="([a-z_]+)" data-status="([a-z]+)"', html))


def test_enrollment_urls_open_the_consent_page_where_consent_is_granted_and_withdrawn(
    agentd: Deployment, client: anthropic.Anthropic
) -> None:
    profile = client.beta.user_profiles.create(name=unique("end-user"))
    before = datetime.now(timezone.utc)
    enrollment = client.beta.user_profiles.create_enrollment_url(profile.id)
    assert enrollment.type == "enrollment_url"
    assert timedelta(minutes=14) < enrollment.expires_at - before <= timedelta(minutes=15, seconds=5)
    action = client.user_profiles.action_urls.create(profile.id, action={"type": "enroll_end_user"})
    assert action.type == "user_profile_action_url" and action.url != enrollment.url
    beta_action = client.beta.user_profiles.action_urls.create(profile.id, action={"type": "enroll_end_user"})
    assert beta_action.type == "user_profile_action_url"
    other_action: Any = {"type": "delete_me"}
    refused(lambda: client.user_profiles.action_urls.create(profile.id, action=other_action), 400, "action.type")
    refused(lambda: client.beta.user_profiles.create_enrollment_url(MISSING), 404)

    with browser() as http:
        page = http.get(enrollment.url)
        assert page.status_code == 200, page.text
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
        assert statuses(page.text) == {p: "unanswered" for p in PURPOSES}
        assert "<script" not in page.text

        granted = http.post(enrollment.url, data=grant_form("conversation_content", "grant"))
        assert granted.status_code == 200, granted.text
        assert statuses(granted.text)["conversation_content"] == "granted"
        answer = consent(agentd, profile.id)
        assert answer["conversation_content"]["status"] == "granted" and answer["activity_record"] is None
        granted_at = datetime.fromisoformat(answer["conversation_content"]["updated_at"].replace("Z", "+00:00"))
        assert abs(granted_at - datetime.now(timezone.utc)) < timedelta(minutes=1)
        beta_view = client.beta.user_profiles.retrieve(profile.id)
        assert (beta_view.model_extra or {})["consent"]["conversation_content"]["status"] == "granted"

        # The action URL opens the same page; withdrawing is recorded per purpose.
        withdrawn = http.post(action.url, data=grant_form("activity_record", "withdraw"))
        assert withdrawn.status_code == 200, withdrawn.text
        both = statuses(http.get(action.url).text)
        assert both == {"conversation_content": "granted", "activity_record": "withdrawn"}
        changed = http.post(enrollment.url, data=grant_form("conversation_content", "withdraw"))
        assert statuses(changed.text)["conversation_content"] == "withdrawn"
        answer = consent(agentd, profile.id)
        assert answer["conversation_content"]["status"] == answer["activity_record"]["status"] == "withdrawn"

        # A form that names nothing changes nothing.
        for bad in [grant_form("telemetry", "grant"), grant_form("activity_record", "maybe"), {}]:
            refused_form = http.post(enrollment.url, data=bad)
            assert refused_form.status_code == 400, refused_form.text
        assert consent(agentd, profile.id) == answer

        # An altered token (any character of it) refuses, reading and writing, and changes nothing.
        token = enrollment.url.rsplit("/", 1)[1]
        base = enrollment.url[: -len(token)]
        flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
        for altered in [base + flipped, base + token[:-1], base + "v1.e30.AAAA", base + token.replace("v1.", "v2.", 1)]:
            read = http.get(altered)
            assert read.status_code == 400 and "not valid" in read.text, (altered, read.status_code)
            write = http.post(altered, data=grant_form("activity_record", "grant"))
            assert write.status_code == 400, write.status_code
        assert consent(agentd, profile.id) == answer

    # Another workspace's key never reaches the profile, and a deleted profile's link is dead.
    client.user_profiles.delete(profile.id)
    with browser() as http:
        dead = http.get(enrollment.url)
        assert dead.status_code == 404 and "no longer" in dead.text
        assert http.post(enrollment.url, data=grant_form("activity_record", "grant")).status_code == 404


def test_an_expired_link_refuses_and_changes_nothing(
    agentd: Deployment, launch: Callable[..., Deployment]
) -> None:
    # Tests only: links live one second here (production: 15 minutes).
    short = launch(agentd.mode, extra_env={"AGENTD_TEST_CONSENT_LINK_TTL_MS": "1000"})
    client = short.client()
    profile = client.user_profiles.create(name=unique("late"))
    link = client.user_profiles.action_urls.create(profile.id, action={"type": "enroll_end_user"})
    assert link.expires_at - datetime.now(timezone.utc) <= timedelta(seconds=2)
    with browser() as http:
        assert http.get(link.url).status_code == 200, "valid while fresh"
        time.sleep(1.5)
        expired = http.get(link.url)
        assert expired.status_code == 410 and "expired" in expired.text
        write = http.post(link.url, data=grant_form("conversation_content", "grant"))
        assert write.status_code == 410 and "expired" in write.text
    assert consent(short, profile.id) == {"conversation_content": None, "activity_record": None}
    # A fresh link works again.
    fresh = client.user_profiles.action_urls.create(profile.id, action={"type": "enroll_end_user"})
    with browser() as http:
        assert http.post(fresh.url, data=grant_form("conversation_content", "grant")).status_code == 200
    assert consent(short, profile.id)["conversation_content"]["status"] == "granted"
