"""Issue 16 against the real server: one unauthenticated message with a huge number used to stop
the process (a trap converting a Double to an Int). Every numeric field is now answered with
invalid_data on the same connection, and the server keeps serving everyone."""
import json

import pytest
import requests

HOSTILE = ["1e300", "-1e300", "9.3e18", "9007199254740992", "1.5", "-1"]


def raw(client, text):
    client.ws.send(text)


@pytest.mark.parametrize("number", HOSTILE)
@pytest.mark.parametrize("action", ["q", "n"])
def test_huge_tag_right_after_the_hello_is_an_error_reply(open_server, action, number):
    bystander = open_server.client()
    attacker = open_server.client()
    raw(attacker, '{"t":"d","d":{"r":1,"a":"%s","b":{"p":"/x","h":"","t":%s}}}' % (action, number))
    reply = attacker.reply(1)
    assert reply["s"] == "invalid_data" and "tag t must be an integer from 1 to 9007199254740991" in reply["d"]
    # Same connection, same server: both still answer.
    assert attacker.call("p", {"p": "/after", "d": 1})["s"] == "ok"
    assert bystander.call("g", {"p": "/after", "q": {}}) == {"s": "ok", "d": 1}
    assert open_server.alive()


def messages(field):
    if field == "r":
        return ['{"t":"d","d":{"r":%s,"a":"p","b":{"p":"/x","d":1}}}' % n for n in HOSTILE + ["1e400"]]
    if field == "l":
        return ['{"t":"d","d":{"r":2,"a":"g","b":{"p":"/x","q":{"l":%s}}}}' % n for n in HOSTILE + ["1e400"]]
    if field == "d":
        return ['{"t":"d","d":{"r":3,"a":"p","b":{"p":"/x","d":{"v":%s}}}}' % n for n in ["1e400", "-1e400", "1E+99999"]]
    return ['{"t":"d","d":{"r":4,"a":"p","b":{"p":"/x","d":{".sv":{"increment":-1.7e308}}}}}']


@pytest.mark.parametrize("field", ["r", "l", "d", "increment"])
def test_every_numeric_field_is_refused_without_stopping_anyone(open_server, field):
    bystander = open_server.client()
    attacker = open_server.client()
    if field == "increment":
        assert attacker.call("p", {"p": "/x", "d": -1.7e308})["s"] == "ok"
    for message in messages(field):
        raw(attacker, message)
    # The connection stays open and answers; the server keeps serving the bystander.
    assert attacker.call("s", {})["s"] == "ok"
    assert bystander.call("p", {"p": "/still", "d": field})["s"] == "ok"
    got = requests.get(f"http://{open_server.host}:{open_server.port}/x.json", params={"ns": "demo"},
                       headers={"Authorization": "Bearer owner"}, timeout=5).json()
    assert got == (-1.7e308 if field == "increment" else None)  # never Infinity, which reads back as null
    assert open_server.alive()


def test_rest_numeric_parameters_are_400(open_server):
    base = f"http://{open_server.host}:{open_server.port}/scores.json"
    for params in [{"orderBy": '"$key"', "limitToFirst": "1e300"}, {"orderBy": '"$key"', "limitToLast": "-9.3e18"},
                   {"timeout": "1e300min"}]:
        r = requests.get(base, params={"ns": "demo", **params}, timeout=5)
        assert r.status_code == 400 and "must be" in r.json()["error"], (params, r.text)
    huge_path = "a" * (100 << 10) + ".b"
    r = requests.put(f"http://{open_server.host}:{open_server.port}/.json", params={"ns": "demo"},
                     data=json.dumps({huge_path: 1}), headers={"Authorization": "Bearer owner"}, timeout=10)
    assert r.status_code == 400 and len(r.text) < 1000, r.text[:200]
    assert open_server.alive()
