"""Who gets into a `searchgym serve` process on 127.0.0.1: the token as a header or first in
the URL's path (the one form Search-R1's client, which knows only a URL, can send), and an
allow-list of client addresses (a client bound to 127.0.0.2 stands for another machine)."""

import json
import os
import subprocess

import httpx
import pytest
from test_serve import CHECKOUT, SEARCHGYM, Server, free_port
from test_serve_search_r1 import SearchR1Client

from searchgym.corpora.http import HTTPRetriever
from searchgym.error import BackendError, ConfigError
from searchgym.serve import check_exposure
from searchgym.serve_access import Access, parse_networks

TOKEN = "tok-3xQ_9"


def from_address(address: str) -> httpx.Client:
    """A client whose requests come from ``address`` (any 127.0.0.0/8 address is local on Linux)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def search(client: httpx.Client, url: str, **kw) -> httpx.Response:
    return client.post(url, json={"queries": ["a city"], "topk": 2, "return_scores": True}, **kw)


def test_the_token_in_the_url_path_lets_search_r1s_client_in_and_a_wrong_one_gets_a_json_401():
    s = Server("--token", TOKEN)
    try:
        assert "token required (header or URL path)" in s.line
        observations = SearchR1Client(f"{s.url}/{TOKEN}/retrieve").execute_predictions(["<search> a city </search>"])
        assert observations[0].startswith("\n\n<information>Doc 1(Title: ")
        with httpx.Client(timeout=30) as client:
            wrong = search(client, f"{s.url}/not-{TOKEN}/retrieve")
            assert wrong.status_code == 401 and wrong.headers["content-type"] == "application/json"
            assert wrong.json() == {"error": "wrong token in the URL's path (POST /TOKEN/retrieve): the first path segment "
                                             "must be the server's --token", "status": 401}
            bare = search(client, f"{s.url}/retrieve")
            assert bare.status_code == 401 and "http://HOST:PORT/TOKEN/retrieve" in bare.json()["error"]
            assert search(client, f"{s.url}/retrieve", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert client.get(f"{s.url}/{TOKEN}/health").json()["status"] == "ok"
            assert client.get(f"{s.url}/{TOKEN}/info").json()["passages"] == 400
            assert client.get(f"{s.url}/x/{TOKEN}/retrieve").status_code in (401, 404)  # never a search
            assert client.get(f"{s.url}/{TOKEN}/elsewhere").status_code in (401, 404)
        # searchgym's own client takes the same URL: /TOKEN/info for the corpus check and limits, /TOKEN/retrieve.
        remote = HTTPRetriever(f"{s.url}/{TOKEN}/retrieve")
        assert len(remote.search(["a city"], 2)[0]) == 2 and remote.server_info()["passages"] == 400
        with pytest.raises(BackendError, match="HTTP 401"):
            HTTPRetriever(f"{s.url}/wrong/retrieve", retries=0).search(["a city"], 2)
    finally:
        s.stop()


def test_an_allow_list_lets_listed_addresses_in_and_answers_others_403():
    s = Server("--allow", "127.0.0.2/32")
    try:
        assert "no token; allow 127.0.0.2/32" in s.line
        with from_address("127.0.0.2") as listed, from_address("127.0.0.1") as other:
            assert search(listed, s.url + "/retrieve").status_code == 200
            refused = search(other, s.url + "/retrieve")
            assert refused.status_code == 403
            assert refused.json() == {"error": "client address 127.0.0.1 is not in the server's --allow list", "status": 403}
            assert other.get(s.url + "/info").status_code == 403  # /info names the corpus: guarded too
    finally:
        s.stop()


def test_with_a_token_and_an_allow_list_unlisted_addresses_need_the_token():
    s = Server("--allow", "127.0.0.2", "--token", TOKEN)
    try:
        with from_address("127.0.0.2") as listed, from_address("127.0.0.1") as other:
            assert search(listed, s.url + "/retrieve").status_code == 200
            assert search(other, s.url + "/retrieve").status_code == 401
            assert search(other, f"{s.url}/{TOKEN}/retrieve").status_code == 200
            assert search(other, s.url + "/retrieve", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        s.stop()


def test_listening_beyond_loopback_needs_a_token_or_an_allow_list():
    with pytest.raises(ConfigError, match=r"refuses to listen on '0.0.0.0' without a token or an allow-list.*--allow 10.0.0.0/8"):
        check_exposure("0.0.0.0", Access())
    check_exposure("0.0.0.0", Access(TOKEN))
    check_exposure("::", Access(allow=parse_networks(["10.0.0.0/8"])))
    check_exposure("127.0.0.1", Access())
    assert parse_networks(["10.1.2.3", "fd00::/8"])[0].num_addresses == 1
    with pytest.raises(ConfigError, match=r"--allow expects an IP address or a CIDR network such as 10.0.0.0/8 .*got '10.0.0.0/33'"):
        parse_networks(["10.0.0.0/33"])
    env = {**{k: v for k, v in os.environ.items() if k != "SEARCHGYM_SERVE_TOKEN"}, **CHECKOUT}
    done = subprocess.run([SEARCHGYM, "serve", "--allow", "ten.0.0.0/8", "--port", str(free_port())], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 2 and "--allow expects an IP address or a CIDR network" in done.stderr


def test_an_ipv4_client_mapped_into_ipv6_is_matched_as_ipv4():
    access = Access(allow=parse_networks(["10.0.0.0/8"]))
    assert access.refusal("", "::ffff:10.1.2.3") is None
    assert access.refusal("", "::ffff:11.1.2.3") == (403, "client address ::ffff:11.1.2.3 is not in the server's --allow list")
    assert access.refusal("", None)[0] == 403  # an unknown peer is not listed
    assert json.dumps(Access(TOKEN).refusal("Bearer nope", "10.0.0.1")).count("nope") == 0  # a wrong token is not echoed


def test_a_token_in_the_url_stays_out_of_the_clients_messages_and_repr():
    from searchgym.corpora.http import shown_url

    assert shown_url("http://127.0.0.1:8000/retrieve") == "http://127.0.0.1:8000/retrieve"
    assert shown_url(f"http://127.0.0.1:8000/{TOKEN}/retrieve") == "http://127.0.0.1:8000/***/retrieve"
    assert shown_url(f"http://user:{TOKEN}@host:1/retrieve") == "http://***@host:1/retrieve"
    url = f"http://127.0.0.1:{free_port()}/{TOKEN}/retrieve"  # nobody listens: the connection is refused
    retriever = HTTPRetriever(url, retries=0, timeout=5)
    try:
        assert TOKEN not in repr(retriever)
        with pytest.raises(BackendError) as refused:
            retriever.search(["a city"], k=2)
        assert "/***/retrieve" in str(refused.value) and TOKEN not in str(refused.value)
    finally:
        retriever.close()
