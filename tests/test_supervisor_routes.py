"""The supervisor's routing JSON is validated against its enum; an invalid answer falls back, recorded."""

import pytest

from labkit.agent.supervisor import ROUTES, parse_route


@pytest.mark.parametrize("route", ROUTES)
def test_each_route_in_json_is_accepted(route):
    decision = parse_route(f'<tools></tools> {{"route": "{route}"}}', "documents")
    assert decision.route == route and not decision.fallback


@pytest.mark.parametrize("raw", ["", "documents", '{"route": "sql"}', '{"route": 3}', "{not json}", "[1, 2]"])
def test_invalid_answer_falls_back_and_is_recorded(raw):
    decision = parse_route(raw, "out_of_scope")
    assert decision.route == "out_of_scope" and decision.fallback and decision.raw == raw


def test_fallback_must_be_a_route():
    with pytest.raises(ValueError, match="not one of"):
        parse_route('{"route": "data"}', "shop")
