"""An HTTP exchange as stored, and back: recorded responses are data from elsewhere, checked before playing."""

from __future__ import annotations

import gzip

import pytest

from graphtape.recorder.http_errors import error_name, rebuilt, refused
from graphtape.recorder.http_exchange import asked, call_name, request_record, response_record, url_without_password, vcr_response


def test_a_request_is_named_by_method_and_url_without_query_or_user():
    assert call_name("post", "https://bob:pw@api.example.com:8443/v1/charge?x=1") == "POST https://api.example.com:8443/v1/charge"
    assert url_without_password("https://bob:pw@api.example.com/x?y=2") == "https://bob:REDACTED@api.example.com/x?y=2"


def test_what_a_request_asked_is_its_query_and_body_as_data():
    a = asked(request_record("POST", "http://h/p?b=2&a=1", {"X-Date": "1"}, b'{"x": 1, "y": [2]}'))
    b = asked(request_record("POST", "http://h/p?a=1&b=2", {"X-Date": "2"}, b'{"y":[2],"x":1}'))
    assert a == b == {"query": [["a", "1"], ["b", "2"]], "body": {"x": 1, "y": [2]}}
    assert asked(request_record("GET", "http://h/p", {}, None)) == {}


def test_a_compressed_response_is_stored_decompressed_and_played_with_its_length():
    stored = response_record({"status": {"code": 200, "message": "OK"}, "headers": {"Content-Encoding": ["gzip"], "Content-Length": ["99"]}, "body": {"string": gzip.compress(b'{"ok": true}')}})
    assert stored["body"] == '{"ok": true}' and "Content-Encoding" not in stored["headers"]
    played = vcr_response(stored)
    assert played["body"]["string"] == b'{"ok": true}' and played["headers"]["Content-Length"] == ["12"]


def test_a_hostile_recorded_response_is_refused_or_defused():
    with pytest.raises(ValueError, match="not an HTTP status code"):
        vcr_response({"status": 1000, "headers": {}, "body": ""})
    with pytest.raises(ValueError, match="not an HTTP status code"):
        vcr_response({"status": "200", "headers": {}, "body": ""})
    with pytest.raises(ValueError, match="too large to keep"):
        vcr_response({"status": 200, "headers": {}, "body": None, "body_omitted": 10_000_000})
    played = vcr_response({"status": 200, "headers": {"X-A": "1\r\nSet-Cookie: evil=1", "Bad\nName": "v"}, "body": "x"})
    assert played["headers"]["X-A"] == ["1  Set-Cookie: evil=1"]
    assert set(played["headers"]) == {"X-A", "Content-Length"}  # no header name with a line break in it


def test_recorded_errors_come_back_only_as_allow_listed_client_types():
    import httpx

    assert isinstance(rebuilt("httpx", "httpx.ReadTimeout", "slow"), httpx.ReadTimeout)
    assert isinstance(rebuilt("http.client", "TimeoutError", "slow"), TimeoutError)
    # A name outside the allow-list is never looked up: the client's plain connection error, naming it.
    odd = rebuilt("httpx", "os.system", "rm -rf")
    assert type(odd) is httpx.ConnectError and "os.system" in str(odd)
    assert type(rebuilt("http.client", "subprocess.Popen", "x")) is ConnectionRefusedError
    assert error_name(httpx.ConnectError("x")) == "httpx.ConnectError" and error_name(ConnectionResetError()) == "ConnectionResetError"
    assert type(refused("aiohttp", "no")).__name__ == "ClientConnectionError"
