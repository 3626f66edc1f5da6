"""ClusterView.topic_by_id: what every Produce and Fetch by topic id asks, right however `topics`
was changed in place (as the watcher and the controller change it), from an index kept in step:
an unknown id is a dict lookup, not a pass over every topic."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.zk.model import ClusterView, TopicAssignment


def _topic(name: str) -> TopicAssignment:
    return TopicAssignment(name, uuid.uuid4(), {0: (1,)})


def test_a_topic_is_found_by_its_id_and_an_unknown_id_finds_none():
    view = ClusterView(topics={t.name: t for t in (_topic("a"), _topic("b"))})
    assert view.topic_by_id(view.topics["b"].topic_id) is view.topics["b"]
    assert view.topic_name(view.topics["a"].topic_id) == "a"
    assert view.topic_by_id(uuid.uuid4()) is None
    assert view.topic_name(uuid.uuid4()) is None


def test_changes_in_place_are_seen_after_the_index_was_built():
    view = ClusterView(topics={"a": _topic("a")})
    old_id = view.topics["a"].topic_id
    assert view.topic_name(old_id) == "a"  # the index now knows "a"
    view.topics["a"] = recreated = _topic("a")  # deleted and created again: a new id, the same name
    assert view.topic_by_id(old_id) is None
    assert view.topic_by_id(recreated.topic_id) is recreated
    view.topics["c"] = added = _topic("c")
    assert view.topic_by_id(added.topic_id) is added
    del view.topics["c"]
    assert view.topic_by_id(added.topic_id) is None


def test_a_copy_of_a_view_answers_from_its_own_topics():
    view = ClusterView(topics={"a": _topic("a")})
    topic_id = view.topics["a"].topic_id
    assert view.topic_name(topic_id) == "a"
    copy = ClusterView(topics=dict(view.topics))
    del view.topics["a"]
    assert copy.topic_name(topic_id) == "a"
    assert view.topic_name(topic_id) is None


def test_every_way_of_changing_the_topics_keeps_the_index():
    view = ClusterView(topics={"a": _topic("a"), "b": _topic("b")})
    a, b = view.topics["a"], view.topics["b"]
    assert view.topics.pop("a") is a and view.topic_by_id(a.topic_id) is None
    assert view.topics.pop("a", None) is None
    view.topics.update({"c": (c := _topic("c"))}, d=(d := _topic("d")))
    assert view.topic_by_id(c.topic_id) is c and view.topic_by_id(d.topic_id) is d
    assert view.topics.setdefault("c", _topic("c")) is c
    view.topics["b"] = same = TopicAssignment("b", b.topic_id, {0: (1,), 1: (2,)})  # more partitions, same id
    assert view.topic_by_id(b.topic_id) is same
    name, gone = view.topics.popitem()
    assert view.topic_by_id(gone.topic_id) is None
    view.topics.clear()
    assert view.topic_by_id(same.topic_id) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "del", "pop"]), st.sampled_from("abcd")), max_size=30))
def test_lookups_by_id_agree_with_a_pass_over_the_topics(changes):
    view = ClusterView()
    ever = []
    for change, name in changes:
        if change == "set":
            view.topics[name] = topic = _topic(name)
            ever.append(topic.topic_id)
        elif change == "del" and name in view.topics:
            del view.topics[name]
        else:
            view.topics.pop(name, None)
    for topic_id in ever + [uuid.uuid4()]:
        expected = next((t for t in view.topics.values() if t.topic_id == topic_id), None)
        assert view.topic_by_id(topic_id) is expected
