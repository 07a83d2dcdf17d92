"""Every call is authenticated; tenants never see each other's users or sessions."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from server_helpers import KEYS, Running, write_keys

from contextwright.client import Client
from contextwright.errors import AccessDenied, InvalidInputError
from contextwright.server.tenants import KeysFile, hash_key, parse_keys, scoped_user


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer wrong-key",
                                           f"Basic {KEYS['acme']}",
                                           f"Bearer {KEYS['acme']}x"])
def test_a_missing_or_wrong_key_is_401_and_reads_nothing(
        authorization: str | None, tmp_path: Path,
        serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}")
    with Client(running.url, api_key=KEYS["acme"]) as owner:
        owner.prepare("u", "s", "private words")
    headers = {"Authorization": authorization} if authorization is not None else {}
    with httpx.Client(base_url=running.url, headers=headers) as http:
        for method, path in [("GET", "/v1/sessions/u/s"), ("DELETE", "/v1/sessions/u/s"),
                             ("DELETE", "/v1/users/u"), ("POST", "/v1/sessions/u/s/prepare"),
                             ("POST", "/v1/sessions/u/s/record"), ("POST", "/v1/build")]:
            answer = http.request(method, path, json={"text": "x"})
            assert answer.status_code == 401, (method, path)
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.headers["content-type"] == "application/problem+json"
            assert "private" not in answer.text
    with Client(running.url, api_key=KEYS["acme"]) as owner:
        view = owner.session("u", "s")
        assert view is not None and view.message_count == 1


def test_the_client_raises_access_denied_for_a_bad_key(tmp_path: Path,
                                                       serve_app: Callable[..., Running]) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}")
    with Client(running.url, api_key="nope") as client, pytest.raises(AccessDenied):
        client.prepare("u", "s", "hi")


def test_tenants_and_ids_that_are_prefixes_of_each_other_stay_apart(
        store_url: str, serve_app: Callable[..., Running]) -> None:
    running = serve_app(store_url)
    acme = Client(running.url, api_key=KEYS["acme"])
    ac = Client(running.url, api_key=KEYS["ac"])
    try:
        acme.prepare("u", "s", "acme u s")
        acme.prepare("u1", "s", "acme u1 s")
        acme.prepare("u", "s1", "acme u s1")
        # "ac" + "me/u" would collide with "acme" + "u" under plain concatenation.
        with pytest.raises(InvalidInputError):
            ac.prepare("me/u", "s", "forged")
        for user, session in [("u", "s"), ("u1", "s"), ("u", "s1"), ("u", "s1x")]:
            assert ac.session(user, session) is None  # 404: another tenant's, never its data
        assert ac.erase_session("u", "s") is False
        assert ac.erase_user("u") == 0
        ac.prepare("u", "s", "ac u s")
        view = acme.session("u", "s")
        assert view is not None
        assert [e.message["content"] for e in view.messages] == ["acme u s"]
        assert acme.erase_user("u") == 2  # u/s and u/s1, not u1
        assert acme.session("u1", "s") is not None
        other = ac.session("u", "s")
        assert other is not None and other.messages[0].message["content"] == "ac u s"
    finally:
        acme.close()
        ac.close()


def test_another_tenants_session_is_404_without_its_data(tmp_path: Path,
                                                         serve_app: Callable[..., Running]
                                                         ) -> None:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}")
    with Client(running.url, api_key=KEYS["acme"]) as acme:
        acme.prepare("u", "s", "the secret plan")
    with httpx.Client(base_url=running.url,
                      headers={"Authorization": f"Bearer {KEYS['ac']}"}) as http:
        answer = http.get("/v1/sessions/u/s")
        assert answer.status_code == 404
        assert answer.json()["type"] == "urn:contextwright:problem:session-not-found"
        assert "secret" not in answer.text
        assert http.delete("/v1/sessions/u/s").status_code == 404


def test_keys_rotate_without_downtime(tmp_path: Path, serve_app: Callable[..., Running]) -> None:
    keys = write_keys(tmp_path / "rotating.toml", {"acme": ["old-key"]})
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}", keys=keys)
    old = Client(running.url, api_key="old-key", retries=0)
    new = Client(running.url, api_key="new-key", retries=0)
    try:
        old.prepare("u", "s", "before the rotation")
        with pytest.raises(AccessDenied):
            new.state("u", "s")
        _rewrite(keys, {"acme": ["old-key", "new-key"]})
        assert old.state("u", "s").mode is not None
        assert new.state("u", "s").mode is not None  # same tenant: same sessions
        _rewrite(keys, {"acme": ["new-key"]})
        with pytest.raises(AccessDenied):
            old.state("u", "s")
        view = new.session("u", "s")
        assert view is not None and view.message_count == 1
    finally:
        old.close()
        new.close()


def test_a_broken_keys_file_keeps_the_loaded_keys(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    keys = write_keys(tmp_path / "keys.toml", {"acme": ["k1"]})
    loaded = KeysFile(keys, check_every=0.0)
    _rewrite_text(keys, "[tenants.acme\nkeys = [")
    with caplog.at_level("ERROR", logger="contextwright.server"):
        tenant = loaded.tenant_for("k1")
    assert tenant is not None and tenant.name == "acme"
    assert "not reloaded" in caplog.text


@pytest.mark.parametrize(("text", "names"), [
    ("[tenants.Acme]\nkeys = []", "tenant names"),
    ("[tenants.acme]\nkeys = [\"plain-key\"]", "keys[0]"),
    ("[tenants.acme]\nkeys = []\nrate = 3", "unknown fields"),
    ("[tenants.acme]\nkeys = []\nrequests_per_minute = -1", "requests_per_minute"),
    ("[other]\nx = 1", "unknown top-level"),
    ("", "at least one"),
    (f"[tenants.a]\nkeys = [\"{hash_key('k')}\"]\n[tenants.b]\nkeys = [\"{hash_key('k')}\"]",
     "also listed"),
])
def test_a_bad_keys_file_is_refused_naming_the_field(text: str, names: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(names)):
        parse_keys(text)


def test_scoped_ids_cannot_collide() -> None:
    pairs = [("ac", "me/u"), ("acme", "u"), ("acm", "e/u"), ("a", "cme/u")]
    assert len({scoped_user(tenant, user) for tenant, user in pairs}) == len(pairs)
    # The tenant part never contains '/', so the first '/' splits the pair back unambiguously.
    for tenant, user in pairs:
        assert scoped_user(tenant, user).split("/", 1) == [tenant, user]


def _rewrite(path: Path, tenants: dict[str, list[str]]) -> None:
    write_keys(path, tenants)
    _touch_later(path)


def _rewrite_text(path: Path, text: str) -> None:
    path.write_text(text, "utf-8")
    _touch_later(path)


def _touch_later(path: Path) -> None:
    # A rewrite within the same mtime tick with the same size would look unchanged.
    stat = path.stat()
    later = stat.st_mtime_ns + 1_000_000_000 + int(time.time() % 1 * 1000)
    import os

    os.utime(path, ns=(later, later))
