"""The Firebase Admin SDK for Python (firebase-admin) against the real server, in emulator mode.

The scenarios are those of firebase-admin-python's own integration suite (integration/test_db.py):
reads, ETags, writes, transactions, streaming listeners, every query form and auth variable
overrides. The data set, the rules and the tests are our own. The SDK speaks the REST API:
GET/PUT/PATCH/POST/DELETE on /<path>.json?ns=fake-project-id with `Authorization: Bearer owner`,
print=silent, shallow, X-Firebase-ETag / if-match / if-none-match, orderBy/startAt/endAt/equalTo/
limitToFirst/limitToLast, auth_variable_override and Server-Sent Events.
"""
import collections
import os
import threading
import time
import uuid

import pytest

firebase_admin = pytest.importorskip("firebase_admin")
from firebase_admin import db, exceptions  # noqa: E402

from conftest import Server  # noqa: E402

NAMESPACE = "fake-project-id"
DATABASE_URL = f"https://{NAMESPACE}.firebaseio.com"
BASE = "sdk_conformance/python"
LISTEN_TIMEOUT = 10

# Ten birds. `wingspan` mixes every type the index orders (missing < false < numbers < strings <
# objects) and has a tie (dunlin/wren at 0.4, broken by key); `ratings/pos` is a nested child that
# one bird lacks.
BIRDS = {
    "albatross": {"wingspan": 3.4, "weight": 8.5, "ratings": {"pos": 6}},
    "bittern": {"wingspan": 1.3, "weight": 1.6, "ratings": {"pos": 3}},
    "condor": {"wingspan": 3.0, "weight": 11.0, "ratings": {"pos": 5}},
    "dunlin": {"wingspan": 0.4, "weight": 0.05, "ratings": {"pos": 1}},
    "eagle": {"wingspan": 2.3, "weight": 6.3, "ratings": {"pos": 4}},
    "hoatzin": {"wingspan": "unmeasured", "weight": 0.8, "ratings": {"pos": 9}},
    "kiwi": {"flightless": True, "weight": 2.4, "ratings": {"pos": 7}},
    "ostrich": {"wingspan": {"min": 1.8, "max": 2.0}, "weight": 104},
    "penguin": {"wingspan": False, "weight": 23.0, "ratings": {"pos": 8}},
    "wren": {"wingspan": 0.4, "weight": 0.01, "ratings": {"pos": 2}},
}
# Sightings per bird: a tie (bittern/condor at 3), both booleans, zero, a float, a string and an
# object, so ordering by value crosses every type.
SIGHTINGS = {
    "albatross": 12, "bittern": 3, "condor": 3, "dunlin": 40, "eagle": 7.5, "hoatzin": True,
    "kiwi": 0, "ostrich": False, "penguin": {"colony": 200}, "wren": "countless",
}
AVIARY = {"birds": BIRDS, "sightings": SIGHTINGS}

BY_KEY = sorted(BIRDS)
BY_WINGSPAN = ["kiwi", "penguin", "dunlin", "wren", "bittern", "eagle", "condor", "albatross", "hoatzin", "ostrich"]
BY_POS = ["ostrich", "dunlin", "wren", "bittern", "eagle", "condor", "albatross", "kiwi", "penguin", "hoatzin"]
BY_SIGHTINGS = ["ostrich", "hoatzin", "kiwi", "bittern", "condor", "eagle", "albatross", "dunlin", "wren", "penguin"]

RULES = {
    "sdk_conformance": {
        "python": {
            "aviary": {
                "birds": {".indexOn": ["wingspan", "ratings/pos"]},
                "sightings": {".indexOn": ".value"},
            },
            "protected": {"$uid": {".read": "auth != null", ".write": "$uid === auth.uid"}},
            "admin": {".read": "false", ".write": "false"},
            "public": {".read": "true"},
        }
    }
}


def new_app(**options):
    options = {"databaseURL": DATABASE_URL, "httpTimeout": 10, **options}
    return firebase_admin.initialize_app(None, options, name=f"admin-sdk-{uuid.uuid4().hex}")


@pytest.fixture(scope="module")
def server():
    # ListenerRegistration.close() only returns once the SSE thread reads again (the SDK cannot
    # interrupt its blocking read): a 1 s keep-alive keeps every close short.
    server = Server("--rules", "open", "--disconnect-grace", "0", "--stream-keep-alive", "1")
    previous = os.environ.get("FIREBASE_DATABASE_EMULATOR_HOST")
    os.environ["FIREBASE_DATABASE_EMULATOR_HOST"] = f"{server.host}:{server.port}"
    yield server
    if previous is None:
        os.environ.pop("FIREBASE_DATABASE_EMULATOR_HOST", None)
    else:
        os.environ["FIREBASE_DATABASE_EMULATOR_HOST"] = previous
    alive = server.alive()
    server.stop()
    assert alive, f"the server died during the tests: {server.stderr}"


@pytest.fixture(scope="module")
def app(server):
    app = new_app()
    yield app
    firebase_admin.delete_app(app)


@pytest.fixture(scope="module")
def update_rules(app):
    """Loads our rules the way the SDK's own suite does: GET format=strict, then PUT."""
    client = db.reference("", app)._client
    rules = client.body("get", "/.settings/rules.json", params="format=strict")
    assert isinstance(rules, dict) and "rules" in rules, rules
    rules["rules"] = RULES
    client.request("put", "/.settings/rules.json", json=rules)
    assert client.body("get", "/.settings/rules.json", params="format=strict") == {"rules": RULES}


@pytest.fixture(scope="module")
def testref(update_rules, app):
    del update_rules
    ref = db.reference(f"{BASE}/aviary", app)
    ref.set(AVIARY)
    return ref


@pytest.fixture(scope="module")
def override_app(update_rules, server):
    del update_rules
    app = new_app(databaseAuthVariableOverride={"uid": "user1"})
    yield app
    firebase_admin.delete_app(app)


@pytest.fixture(scope="module")
def none_override_app(update_rules, server):
    del update_rules
    app = new_app(databaseAuthVariableOverride=None)
    yield app
    firebase_admin.delete_app(app)


def close_bounded(registration):
    """ListenerRegistration.close() joins the SSE thread; never let that hang the suite."""
    closer = threading.Thread(target=registration.close, daemon=True)
    closer.start()
    closer.join(LISTEN_TIMEOUT)
    assert not closer.is_alive(), "closing the listener did not end its SSE thread"


class Recorder:
    def __init__(self):
        self.events = []
        self.changed = threading.Condition()

    def __call__(self, event):
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def wait_for(self, count, timeout=LISTEN_TIMEOUT):
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.events) >= count, timeout):
                pytest.fail(f"timed out waiting for {count} events; got "
                            f"{[(e.event_type, e.path, e.data) for e in self.events]}")
            return list(self.events)


class TestReadOperations:
    def test_get_value(self, testref):
        value = testref.get()
        assert isinstance(value, dict)
        assert value == AVIARY

    def test_get_value_and_etag(self, testref):
        value, etag = testref.get(etag=True)
        assert value == AVIARY
        assert isinstance(etag, str) and etag
        # No write in between: the same ETag again.
        assert testref.get(etag=True) == (AVIARY, etag)

    def test_get_shallow(self, testref):
        value = testref.get(shallow=True)
        assert value == {"birds": True, "sightings": True}

    def test_get_shallow_keeps_primitives(self, testref):
        shallow = testref.child("sightings").get(shallow=True)
        expected = {key: (True if isinstance(value, dict) else value) for key, value in SIGHTINGS.items()}
        assert shallow == expected

    def test_get_if_changed(self, testref):
        changed, data, etag = testref.get_if_changed("wrong_etag")
        assert changed is True
        assert data == AVIARY
        assert isinstance(etag, str)
        assert testref.get_if_changed(etag) == (False, None, None)

    def test_get_child_value(self, testref):
        assert testref.child("birds").get() == BIRDS

    def test_get_grandchild_value(self, testref):
        assert testref.child("birds").child("ostrich").get() == BIRDS["ostrich"]
        assert testref.child("birds/ostrich/wingspan/max").get() == 2.0

    def test_get_nonexisting_child_value(self, testref):
        assert testref.child("no_such_bird").get() is None
        assert testref.child("birds/kiwi/wingspan").get() is None


class TestWriteOperations:
    def test_push(self, testref):
        ref = testref.parent.child("users").push()
        assert ref.path == f"/{BASE}/users/{ref.key}"
        assert ref.get() == ""

    def test_push_ids_are_unique_and_increasing(self, testref):
        users = testref.parent.child("users")
        keys = [users.push(index).key for index in range(5)]
        assert len(set(keys)) == 5
        assert keys == sorted(keys)
        assert all(len(key) == 20 for key in keys)

    def test_push_with_value(self, testref):
        value = {"name": "John James Audubon", "since": 1785}
        ref = testref.parent.child("users").push(value)
        assert ref.path == f"/{BASE}/users/{ref.key}"
        assert ref.get() == value

    def test_set_primitive_value(self, testref):
        ref = testref.parent.child("users").push()
        for value in ("value", 17, 2.5, True, False):
            ref.set(value)
            assert ref.get() == value

    def test_set_complex_value(self, testref):
        value = {"name": "Rachel Carson", "since": 1907, "tags": {"ornithology": True, "books": 4}}
        ref = testref.parent.child("users").push()
        ref.set(value)
        assert ref.get() == value

    def test_set_replaces_children(self, testref):
        ref = testref.parent.child("users").push({"name": "Roger Tory Peterson", "guides": 1})
        ref.set({"name": "Roger Tory Peterson"})
        assert ref.get() == {"name": "Roger Tory Peterson"}

    def test_update_children(self, testref):
        value = {"name": "Alexander Wilson", "since": 1766}
        ref = testref.parent.child("users").push()
        ref.update(value)
        assert ref.get() == value

    def test_update_children_with_existing_values(self, testref):
        value = {"name": "Margaret Morse Nice", "since": 1883, "temp": True}
        ref = testref.parent.child("users").push(value)
        ref.update({"since": 1890})
        value["since"] = 1890
        assert ref.get() == value
        ref.update({"temp": None})
        del value["temp"]
        assert ref.get() == value

    def test_update_nested_children(self, testref):
        users = testref.parent.child("users")
        ernst = users.push({"name": "Ernst Mayr", "since": 1904})
        florence = users.push({"name": "Florence Merriam", "since": 1863})
        users.update({f"{ernst.key}/since": 1905, f"{florence.key}/since": 1864})
        assert ernst.get() == {"name": "Ernst Mayr", "since": 1905}
        assert florence.get() == {"name": "Florence Merriam", "since": 1864}

    def test_set_if_unchanged(self, testref):
        push_data = {"name": "Ernst Mayr", "since": 1904}
        ref = testref.parent.child("users").push(push_data)

        update_data = {"name": "Florence Merriam", "since": 1863}
        success, data, etag = ref.set_if_unchanged("invalid-etag", update_data)
        assert success is False
        assert data == push_data
        assert isinstance(etag, str)
        assert ref.get() == push_data

        success, data, new_etag = ref.set_if_unchanged(etag, update_data)
        assert success is True
        assert data == update_data
        assert isinstance(new_etag, str) and new_etag != etag
        assert ref.get(etag=True) == (update_data, new_etag)

        # The old ETag is now stale.
        success, data, current = ref.set_if_unchanged(etag, push_data)
        assert (success, data, current) == (False, update_data, new_etag)

    def test_transaction(self, testref):
        def transaction_update(snapshot):
            snapshot["name"] += " Bonaparte"
            snapshot["since"] = 1803
            return snapshot

        ref = testref.parent.child("users").push({"name": "Charles Lucien"})
        new_value = ref.transaction(transaction_update)
        expected = {"name": "Charles Lucien Bonaparte", "since": 1803}
        assert new_value == expected
        assert ref.get() == expected

    def test_transaction_scalar(self, testref):
        ref = testref.parent.child("users/count")
        ref.set(42)
        new_value = ref.transaction(lambda x: x + 1 if x else 1)
        assert new_value == 43
        assert ref.get() == 43

    def test_transaction_on_missing_node(self, testref):
        ref = testref.parent.child(f"counters/{uuid.uuid4().hex}")
        seen = []

        def increment(current):
            seen.append(current)
            return (current or 0) + 1

        assert ref.transaction(increment) == 1
        assert seen == [None]
        assert ref.get() == 1

    def test_transaction_under_contention(self, testref):
        path = f"{BASE}/counters/contended"
        testref.parent.child("counters/contended").set(0)
        threads, increments = 8, 10
        apps = [new_app() for _ in range(threads)]
        failures, aborted = [], []
        start = threading.Barrier(threads)

        def work(app):
            ref = db.reference(path, app)
            try:
                start.wait(LISTEN_TIMEOUT)
                done = 0
                while done < increments:
                    try:
                        ref.transaction(lambda current: (current or 0) + 1)
                        done += 1
                    except db.TransactionAbortedError:  # 25 lost races; nothing was written
                        aborted.append(app.name)
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(repr(error))

        try:
            workers = [threading.Thread(target=work, args=(app,), daemon=True) for app in apps]
            for worker in workers:
                worker.start()
            deadline = time.time() + 60
            for worker in workers:
                worker.join(max(0.0, deadline - time.time()))
            assert not any(worker.is_alive() for worker in workers), "transactions did not finish within 60 s"
            assert failures == []
            assert testref.parent.child("counters/contended").get() == threads * increments
        finally:
            for app in apps:
                firebase_admin.delete_app(app)

    def test_delete(self, testref):
        ref = testref.parent.child("users").push("foo")
        assert ref.get() == "foo"
        ref.delete()
        assert ref.get() is None

    def test_delete_subtree(self, testref):
        parent = testref.parent.child(f"scratch/{uuid.uuid4().hex}")
        parent.set({"a": {"b": 1}, "c": 2})
        parent.child("a").delete()
        assert parent.get() == {"c": 2}
        parent.child("c").delete()
        assert parent.get() is None


# After close() the SDK's listener thread dies reading the closed response (AttributeError in
# http.client); that is the SDK's own shutdown path, not a failure of the server.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
class TestListenOperations:
    def test_listen(self, testref):
        python = testref.parent
        recorder = Recorder()
        before = python.get()
        registration = python.listen(recorder)
        try:
            first = recorder.wait_for(1)[0]
            assert first.event_type == "put"
            assert first.path == "/"
            assert first.data == before

            ref = python.child("users").push()
            assert ref.path == f"/{BASE}/users/{ref.key}"
            assert ref.get() == ""

            events = recorder.wait_for(2)
            assert len(events) == 2
            assert events[1].event_type == "put"
            assert events[1].path == f"/users/{ref.key}"
            assert events[1].data == ""
        finally:
            close_bounded(registration)

    def test_listen_sees_set_update_and_delete(self, testref):
        node = testref.parent.child(f"listened/{uuid.uuid4().hex}")
        node.set({"a": 1})
        recorder = Recorder()
        registration = node.listen(recorder)
        try:
            first = recorder.wait_for(1)[0]
            assert (first.event_type, first.path, first.data) == ("put", "/", {"a": 1})

            node.child("b").set({"c": 2})
            put = recorder.wait_for(2)[1]
            assert (put.event_type, put.path, put.data) == ("put", "/b", {"c": 2})

            node.update({"a": 3, "d": 4})
            patch = recorder.wait_for(3)[2]
            assert (patch.event_type, patch.path, patch.data) == ("patch", "/", {"a": 3, "d": 4})

            node.child("b").delete()
            gone = recorder.wait_for(4)[3]
            assert (gone.event_type, gone.path, gone.data) == ("put", "/b", None)
            assert node.get() == {"a": 3, "d": 4}
        finally:
            close_bounded(registration)

    def test_closed_registration_gets_no_more_events(self, testref):
        node = testref.parent.child(f"listened/{uuid.uuid4().hex}")
        recorder = Recorder()
        registration = node.listen(recorder)
        try:
            first = recorder.wait_for(1)[0]
            assert (first.event_type, first.path, first.data) == ("put", "/", None)
        finally:
            close_bounded(registration)
        node.set("after close")
        time.sleep(0.5)
        assert len(recorder.events) == 1


class TestAdvancedQueries:
    def birds(self, testref):
        return testref.child("birds")

    def test_order_by_key(self, testref):
        value = self.birds(testref).order_by_key().get()
        assert isinstance(value, collections.OrderedDict)
        assert list(value.keys()) == BY_KEY
        assert dict(value) == BIRDS

    def test_order_by_value(self, testref):
        value = testref.child("sightings").order_by_value().get()
        assert isinstance(value, collections.OrderedDict)
        assert list(value.keys()) == BY_SIGHTINGS

    def test_order_by_child(self, testref):
        value = self.birds(testref).order_by_child("wingspan").get()
        assert list(value.keys()) == BY_WINGSPAN
        assert dict(value) == BIRDS

    def test_order_by_nested_child(self, testref):
        value = self.birds(testref).order_by_child("ratings/pos").start_at(7).get()
        assert list(value.keys()) == ["kiwi", "penguin", "hoatzin"]
        value = self.birds(testref).order_by_child("ratings/pos").get()
        assert list(value.keys()) == BY_POS

    def test_order_by_nested_child_end_at_includes_missing(self, testref):
        value = self.birds(testref).order_by_child("ratings/pos").end_at(2).get()
        assert list(value.keys()) == ["ostrich", "dunlin", "wren"]

    def test_limit_first(self, testref):
        value = self.birds(testref).order_by_child("wingspan").limit_to_first(3).get()
        assert list(value.keys()) == BY_WINGSPAN[:3]
        # The tie at 0.4 is broken by key: dunlin is in, wren is out.
        value = self.birds(testref).order_by_child("wingspan").limit_to_first(4).get()
        assert list(value.keys()) == BY_WINGSPAN[:4]

    def test_limit_first_all(self, testref):
        value = self.birds(testref).order_by_child("wingspan").limit_to_first(25).get()
        assert list(value.keys()) == BY_WINGSPAN

    def test_limit_last(self, testref):
        value = self.birds(testref).order_by_child("wingspan").limit_to_last(3).get()
        assert list(value.keys()) == BY_WINGSPAN[-3:]
        # wren wins the tie at the bottom of the window.
        value = self.birds(testref).order_by_child("wingspan").limit_to_last(7).get()
        assert list(value.keys()) == BY_WINGSPAN[-7:]

    def test_limit_last_all(self, testref):
        value = self.birds(testref).order_by_child("wingspan").limit_to_last(25).get()
        assert list(value.keys()) == BY_WINGSPAN

    def test_start_at(self, testref):
        # Strings and objects sort after every number, so they are in range.
        value = self.birds(testref).order_by_child("wingspan").start_at(3.0).get()
        assert list(value.keys()) == ["condor", "albatross", "hoatzin", "ostrich"]

    def test_end_at(self, testref):
        # A missing child and false sort before every number, so they are in range.
        value = self.birds(testref).order_by_child("wingspan").end_at(1.3).get()
        assert list(value.keys()) == ["kiwi", "penguin", "dunlin", "wren", "bittern"]

    def test_start_and_end_at(self, testref):
        value = self.birds(testref).order_by_child("wingspan").start_at(0.4).end_at(2.3).get()
        assert list(value.keys()) == ["dunlin", "wren", "bittern", "eagle"]

    def test_start_and_end_at_with_limit(self, testref):
        query = self.birds(testref).order_by_child("wingspan").start_at(0.4).end_at(3.4)
        assert list(query.limit_to_first(3).get().keys()) == ["dunlin", "wren", "bittern"]
        query = self.birds(testref).order_by_child("wingspan").start_at(0.4).end_at(3.4)
        assert list(query.limit_to_last(2).get().keys()) == ["condor", "albatross"]

    def test_string_range(self, testref):
        value = self.birds(testref).order_by_child("wingspan").start_at("a").end_at("z").get()
        assert list(value.keys()) == ["hoatzin"]

    def test_equal_to(self, testref):
        value = self.birds(testref).order_by_child("wingspan").equal_to(0.4).get()
        assert list(value.keys()) == ["dunlin", "wren"]
        assert self.birds(testref).order_by_child("wingspan").equal_to(False).get() == {"penguin": BIRDS["penguin"]}
        assert self.birds(testref).order_by_child("wingspan").equal_to("unmeasured").get() == {
            "hoatzin": BIRDS["hoatzin"]}
        assert self.birds(testref).order_by_child("wingspan").equal_to(99).get() in (None, {})

    def test_filter_by_key(self, testref):
        value = self.birds(testref).order_by_key().limit_to_first(2).get()
        assert list(value.keys()) == ["albatross", "bittern"]
        value = self.birds(testref).order_by_key().limit_to_last(2).get()
        assert list(value.keys()) == ["penguin", "wren"]
        value = self.birds(testref).order_by_key().start_at("h").end_at("p").get()
        assert list(value.keys()) == ["hoatzin", "kiwi", "ostrich"]
        assert self.birds(testref).order_by_key().equal_to("kiwi").get() == {"kiwi": BIRDS["kiwi"]}

    def test_filter_by_value(self, testref):
        value = testref.child("sightings").order_by_value().limit_to_last(2).get()
        assert list(value.keys()) == ["wren", "penguin"]
        value = testref.child("sightings").order_by_value().limit_to_first(3).get()
        assert list(value.keys()) == ["ostrich", "hoatzin", "kiwi"]
        value = testref.child("sightings").order_by_value().start_at(3).end_at(12).get()
        assert list(value.keys()) == ["bittern", "condor", "eagle", "albatross"]
        value = testref.child("sightings").order_by_value().equal_to(3).get()
        assert list(value.keys()) == ["bittern", "condor"]

    def test_order_by_key_puts_integer_keys_first_numerically(self, testref):
        rings = testref.parent.child(f"rings/{uuid.uuid4().hex}")
        rings.set({"2": "two", "10": "ten", "a1": "letter"})
        assert rings.order_by_key().limit_to_first(1).get() == {"2": "two"}
        assert rings.order_by_key().limit_to_last(2).get() == {"10": "ten", "a1": "letter"}
        assert rings.order_by_key().start_at("10").get() == {"10": "ten", "a1": "letter"}

    def test_query_on_missing_node(self, testref):
        assert testref.child("no_such_flock").order_by_child("wingspan").limit_to_first(2).get() is None


class TestAuthVariableOverride:
    def init_ref(self, path, app):
        admin_ref = db.reference(path, app)
        admin_ref.set("test")
        assert admin_ref.get() == "test"

    def test_no_access(self, app, override_app):
        path = f"{BASE}/admin"
        self.init_ref(path, app)
        user_ref = db.reference(path, override_app)
        with pytest.raises(exceptions.UnauthenticatedError) as excinfo:
            assert user_ref.get()
        assert str(excinfo.value) == "Permission denied"

        with pytest.raises(exceptions.UnauthenticatedError) as excinfo:
            user_ref.set("test2")
        assert str(excinfo.value) == "Permission denied"
        assert db.reference(path, app).get() == "test"

    def test_read(self, app, override_app):
        path = f"{BASE}/protected/user2"
        self.init_ref(path, app)
        user_ref = db.reference(path, override_app)
        assert user_ref.get() == "test"
        with pytest.raises(exceptions.UnauthenticatedError) as excinfo:
            user_ref.set("test2")
        assert str(excinfo.value) == "Permission denied"
        assert db.reference(path, app).get() == "test"

    def test_read_write(self, app, override_app):
        path = f"{BASE}/protected/user1"
        self.init_ref(path, app)
        user_ref = db.reference(path, override_app)
        assert user_ref.get() == "test"
        user_ref.set("test2")
        assert user_ref.get() == "test2"

    def test_query(self, override_app):
        user_ref = db.reference(f"{BASE}/protected", override_app)
        with pytest.raises(exceptions.UnauthenticatedError) as excinfo:
            user_ref.order_by_key().limit_to_first(2).get()
        assert str(excinfo.value) == "Permission denied"

    def test_none_auth_override(self, app, none_override_app):
        path = f"{BASE}/public"
        self.init_ref(path, app)
        public_ref = db.reference(path, none_override_app)
        assert public_ref.get() == "test"

        ref = db.reference(BASE, none_override_app)
        for child in ("protected/user1", "protected/user2", "admin"):
            with pytest.raises(exceptions.UnauthenticatedError) as excinfo:
                assert ref.child(child).get()
            assert str(excinfo.value) == "Permission denied"
