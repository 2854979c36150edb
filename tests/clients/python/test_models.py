"""Models: `client.beta.models` and `client.models` (same routes, no `anthropic-beta`).

Wire facts: managed-agents-wire.md §1.8 (`SyncPage`: after_id/before_id/has_more/
first_id/last_id), §2.17 (routes), §3.15 (`model` object).
"""

from __future__ import annotations

import anthropic
import pytest

from harness import assert_error_envelope, collect

UNKNOWN_MODEL = "claude-pytest-does-not-exist"


def test_beta_and_plain_list_paginate_over_the_whole_catalog(client: anthropic.Anthropic) -> None:
    beta = collect(client.beta.models.list(limit=1))
    plain = collect(client.models.list(limit=1))
    ids = [m.id for m in beta]
    assert len(ids) >= 2, f"the catalog should hold at least two models, got {ids}"
    assert len(set(ids)) == len(ids), f"duplicates across pages: {ids}"
    assert [m.id for m in plain] == ids, "client.models and client.beta.models list the same catalog"

    for model in beta:
        assert model.type == "model"
        assert model.display_name
        assert model.created_at is not None
        # The default listing is active + deprecated, never retired.
        assert model.lifecycle in ("active", "deprecated"), model

    whole = client.beta.models.list(limit=1000)
    assert [m.id for m in whole.data] == ids
    assert whole.has_more is False
    assert whole.first_id == ids[0] and whole.last_id == ids[-1]


def test_page_fields(client: anthropic.Anthropic) -> None:
    first = client.beta.models.list(limit=1)
    assert len(first.data) == 1
    assert first.has_more is True
    assert first.first_id == first.data[0].id == first.last_id

    pages = list(first.iter_pages())
    assert all(len(p.data) == 1 for p in pages)
    assert pages[-1].has_more is False
    assert all(p.has_more is True for p in pages[:-1])


def test_after_id_and_before_id(client: anthropic.Anthropic) -> None:
    ids = [m.id for m in collect(client.beta.models.list(limit=1000))]
    assert len(ids) >= 2

    after_first = client.beta.models.list(after_id=ids[0], limit=1000)
    assert [m.id for m in after_first.data] == ids[1:]

    # With before_id the SDK walks backwards, one page before the other's first_id.
    backwards = [m.id for m in collect(client.beta.models.list(before_id=ids[-1], limit=1))]
    assert backwards == list(reversed(ids[:-1]))

    before_last = client.models.list(before_id=ids[-1], limit=1000)
    assert [m.id for m in before_last.data] == ids[:-1]


def test_lifecycle_filter(client: anthropic.Anthropic) -> None:
    everything = {m.id for m in collect(client.beta.models.list(lifecycle=["active", "deprecated", "retired"]))}
    active = collect(client.beta.models.list(lifecycle=["active"]))
    assert active, "the catalog should have an active model"
    assert all(m.lifecycle == "active" for m in active)
    assert {m.id for m in active} <= everything


def test_retrieve_every_listed_model(client: anthropic.Anthropic) -> None:
    listed = collect(client.beta.models.list(limit=1000))
    for model in listed:
        beta = client.beta.models.retrieve(model.id)
        assert beta.model_dump() == model.model_dump()
        plain = client.models.retrieve(model.id)
        assert (plain.id, plain.type, plain.display_name) == (model.id, "model", model.display_name)


def test_retrieve_unknown_model_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.models.retrieve(UNKNOWN_MODEL)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve(UNKNOWN_MODEL)


def test_limit_out_of_range_is_rejected(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.models.list(limit=1001)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "limit" in body["error"]["message"].lower()
