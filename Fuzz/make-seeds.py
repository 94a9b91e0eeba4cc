#!/usr/bin/env python3
"""Writes the seed corpora in Fuzz/corpus/<target>/ from the conformance data (rules vectors and
JS SDK frame captures, copied into Tests/*/Fixtures) and from inputs the tests use. Re-run after
adding fixtures; libFuzzer grows its working corpus elsewhere (.build-fuzz/corpus), so only these
seeds are kept in git. Usage: python3 Fuzz/make-seeds.py"""
import base64
import hashlib
import hmac
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE_FIXTURES = ROOT / "Tests/PresenceCoreTests/Fixtures"
WIRE_FIXTURES = ROOT / "Tests/PresenceWireTests/Fixtures"
OUT = ROOT / "Fuzz/corpus"
SECRET = b"fuzzing-secret-that-is-at-least-32-bytes"  # TokenFuzzing.secret
NOW = 1_700_000_000  # FuzzWorld.now, in seconds


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims):
    return b64(compact({"alg": "none", "typ": "JWT"}).encode()) + "." + b64(compact(claims).encode()) + "."


def hs256(claims):
    signing = b64(compact({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(compact(claims).encode())
    return signing + "." + b64(hmac.new(SECRET, signing.encode(), hashlib.sha256).digest())


def frames():
    """(capture name, connection, [client frames]) for every capture."""
    for path in sorted(WIRE_FIXTURES.glob("*.jsonl")):
        by_conn = {}
        for event in jsonl(path):
            if event.get("dir") == "in" and "frame" in event:
                by_conn.setdefault(event["conn"], []).append(event["frame"])
        for conn, sent in sorted(by_conn.items()):
            yield path.stem, conn, sent


def main():
    seeds = {name: {} for name in ["json", "wire", "rules", "token", "path", "rest", "query"]}

    def add(target, content):
        data = content.encode() if isinstance(content, str) else content
        seeds[target][hashlib.sha1(data).hexdigest()[:16]] = data

    vectors = jsonl(CORE_FIXTURES / "rules-vectors.jsonl")
    parse_vectors = jsonl(CORE_FIXTURES / "rules-parse-vectors.jsonl")
    alice = {"sub": "alice", "firebase": {"sign_in_provider": "custom"}}

    # json: whole vectors, their parts, and every captured frame.
    for vector in vectors + parse_vectors:
        add("json", compact(vector))
        for key in ("root", "data", "auth"):
            if vector.get(key) is not None:
                add("json", compact(vector[key]))
    for _, _, sent in frames():
        for frame in sent:
            add("json", frame)
    for text in ['{"a":1e308,"b":-0.0,"c":5e-324}', '"\\ud83d\\ude00\\u0000"', '[[[[[[]]]]]]', '{".value":1,".priority":"p"}',
                 '{".sv":{"increment":1}}', '[1,null,{"x":true}]', '1e400']:
        add("json", text)

    # wire: each captured connection's frames, then hand-written requests for every action and field.
    token = unsigned(alice)
    for _, _, sent in frames():
        add("wire", "\n".join(sent))
    presence = '{"online":true,"lastSeen":{".sv":"timestamp"}}'
    requests = [
        '{"t":"d","d":{"r":1,"a":"auth","b":{"cred":"%s"}}}' % token,
        '{"t":"d","d":{"r":2,"a":"q","b":{"p":"/users/alice/presence","h":""}}}',
        '{"t":"d","d":{"r":3,"a":"p","b":{"p":"/users/alice/presence","d":%s}}}' % presence,
        '{"t":"d","d":{"r":4,"a":"o","b":{"p":"/users/alice/presence","d":{"online":false,"lastSeen":{".sv":"timestamp"}}}}}',
        '{"t":"d","d":{"r":5,"a":"m","b":{"p":"/open","d":{"a/b":1,"c":{".sv":{"increment":2}}}}}}',
        '{"t":"d","d":{"r":6,"a":"q","b":{"p":"/open","q":{"i":"n","sp":1,"l":2,"vf":"l"},"t":1,"h":""}}}',
        '{"t":"d","d":{"r":7,"a":"p","b":{"p":"/open/x","d":3,"h":"abc"}}}',
        '{"t":"d","d":{"r":8,"a":"g","b":{"p":"/open","q":{"i":".value","ep":5}}}}',
        '{"t":"d","d":{"r":9,"a":"om","b":{"p":"/open","d":{"gone":true}}}}',
        '{"t":"d","d":{"r":10,"a":"oc","b":{"p":"/open"}}}',
        '{"t":"d","d":{"r":11,"a":"n","b":{"p":"/open","q":{"i":"n","sp":1,"l":2,"vf":"l"},"t":1}}}',
        '{"t":"d","d":{"r":12,"a":"s","b":{"c":{"sdk.js.8-10-1":1}}}}',
        '{"t":"d","d":{"r":13,"a":"unauth","b":{}}}',
        '{"t":"c","d":{"t":"p","d":{}}}',
        '0',
    ]
    add("wire", "\n".join(requests))
    add("wire", '2\n{"t":"d","d":{"r":1,"a":"p","b":{"p":"/open/a",\n"d":{"x":[1,2,3]}}}}')
    for hostile in ['{"t":"d","d":{"r":1,"a":"q","b":{"p":"/x","h":"","t":1e300}}}',
                    '{"t":"d","d":{"r":1e300,"a":"p","b":{"p":"/open/x","d":1}}}',
                    '{"t":"d","d":{"r":1,"a":"p","b":{"p":"/open/x","d":-1.7e308}}}\n'
                    '{"t":"d","d":{"r":2,"a":"p","b":{"p":"/open/x","d":{".sv":{"increment":-1.7e308}}}}}',
                    '{"t":"d","d":{"r":1,"a":"g","b":{"p":"/open","q":{"l":9.3e18,"sp":1e400}}}}']:
        add("wire", hostile)

    # rules: rules NUL root NUL auth NUL path NUL newData, from every runtime vector; documents alone.
    for vector in vectors:
        parts = [compact(vector["rules"]), compact(vector.get("root")), compact(vector.get("auth")),
                 vector.get("path", "/"), compact(vector.get("data"))]
        add("rules", "\0".join(parts))
    for vector in parse_vectors:
        add("rules", compact(vector["rules"]))
    add("rules", (ROOT / "rules/presence.rules.json").read_text())
    for condition in ["auth.token.subscription == 'pro'", "root.child('a').val().length > 3 && now > 0",
                      "'x' + 1e21 == auth.uid", "auth.uid.matches(/^a[b-z]{2,}$/i)"]:
        add("rules", condition)

    # token: emulator (unsigned) and HS256 tokens the target's secret signs, and claims for minting.
    for claims in [alice, {"sub": "bob", "exp": NOW + 3600, "iat": NOW},
                   {"sub": "carol", "exp": NOW + 60, "iat": NOW - 10, "nbf": NOW, "admin": True, "roles": ["a", "b"]},
                   {"sub": "dan", "exp": NOW - 1}, {"d": {"uid": "legacy"}}, {"sub": "x" * 129, "exp": NOW + 9}]:
        add("token", unsigned(claims))
        add("token", hs256(claims))
        add("token", compact(claims))
    add("token", "owner")
    add("token", b64(b'{"alg":"RS256","kid":"k1"}') + "." + b64(compact({"sub": "a", "aud": "fuzz-project"}).encode()) + ".c2ln")

    # path: paths and keys the tests and captures use.
    for path in ["/users/alice/presence", "users/alice/presence/lastSeen", "/", "", "//a///b/", "/a/.priority",
                 "/.priority/a", "/über/ключ/🙂", "/a.b", "/a$b#c[d]e", "/a\x7f", "/-0/007/2147483648/-2147483649",
                 "/" + "/".join("k" * 33), "/" + "x" * 769]:
        add("path", path)
    for _, _, sent in frames():
        for frame in sent:
            message = json.loads(frame)
            body = message.get("d", {}).get("b", {}) if isinstance(message, dict) else None
            if isinstance(body, dict) and isinstance(body.get("p"), str):
                add("path", body["p"])

    # rest: one request per line format (see RESTFuzzing).
    auth = "auth=" + token
    for request in [
        'GET /users/alice/presence.json?ns=fuzz&' + auth,
        'GET /open.json?orderBy="n"&limitToFirst=2&startAt=1\nX-Firebase-ETag: true\n',
        'GET /open.json?orderBy="$key"&startAt="a","b"&endBefore="z"&print=pretty',
        'GET /open.json?shallow=true&format=export&timeout=3s',
        'PUT /open/x.json?print=silent\ncontent-type: application/json\n\n{"a":[1,2],"b":{".sv":"timestamp"}}',
        'PUT /open/x.json\nif-match: null_etag\n\n5',
        'PATCH /open.json\n\n{"a/b":1,"c":null}',
        'POST /open/list.json\n\n{"n":1}',
        'POST /open/x.json\nx-http-method-override: DELETE\n\n',
        'DELETE /open/x.json?' + auth,
        'GET /.settings/rules.json\nauthorization: Bearer owner\n',
        'PUT /.settings/rules.json\nauthorization: Bearer owner\n\n{"rules":{".read":true}}',
        'PUT /users/bob/presence.json?' + auth + '\n\n{"online":true,"lastSeen":1}',
        'GET /open.json?auth=owner&auth_variable_override={"uid":"zed"}',
        'GET /open.json\naccept: text/event-stream\n',
        'GET /open.json?orderBy="n"&limitToFirst=1e300&timeout=1e300min',
    ]:
        add("rest", request)

    # query: wire q NUL REST parameters.
    wire_queries = ['{"i":"score","l":2,"vf":"r"}', '{"i":"score","sp":3,"ep":5}', '{"sp":0.6,"sn":"[MAX_NAME]","sin":false,'
                    '"ep":4,"en":"[MIN_NAME]","ein":false,"i":"height"}', '{"i":".key","sp":"a","l":1}', '{"i":".value","ep":5}',
                    '{"i":".priority","sp":null,"ep":"p"}', '{"i":"n/deep","l":9007199254740991}', '{}', '{"l":1e300}']
    rest_queries = ['orderBy="score"&limitToFirst=2', 'orderBy="$key"&startAt="b"&endAt="c"', 'orderBy="score"&equalTo=9',
                    'orderBy="score"&startAfter=5', 'orderBy="$value"&limitToLast=2', 'orderBy="$priority"&endBefore="p",'
                    '"k"', 'shallow=true&orderBy="$key"', 'limitToFirst=2']
    for index, wire in enumerate(wire_queries):
        add("query", wire + "\0" + rest_queries[index % len(rest_queries)])

    for target, files in seeds.items():
        directory = OUT / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for name, data in sorted(files.items()):
            (directory / name).write_bytes(data)
        print(f"{target}: {len(files)} seeds")


if __name__ == "__main__":
    main()
