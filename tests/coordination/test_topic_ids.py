"""ClusterView.topic_by_id: what every Produce and Fetch by topic id asks, right however `topics`
was changed in place (as the watcher and the controller change it)."""

import uuid

from weir.coordination.model import ClusterView, TopicAssignment


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
