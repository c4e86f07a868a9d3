"""The coordinator's registry of the nodes' Session streams (server/sessions.py)."""

from privfed.server.sessions import Sessions


def test_a_nodes_new_session_ends_its_older_one_and_only_the_newest_is_current():
    sessions, ended = Sessions(), []
    first = sessions.open("a", lambda: ended.append("first"))
    second = sessions.open("a", lambda: ended.append("second"))
    assert ended == ["first"] and not sessions.current("a", first) and sessions.current("a", second)
    sessions.close("a", first)  # the older stream's end forgets nothing newer
    assert sessions.current("a", second) and len(sessions) == 1


def test_past_its_capacity_a_new_node_gets_no_session_but_an_open_one_is_renewed():
    sessions, ended = Sessions(capacity=2), []
    a = sessions.open("a", lambda: ended.append("a"))
    assert sessions.open("b", lambda: None) is not None
    assert sessions.open("c", lambda: None) is None and len(sessions) == 2
    assert sessions.open("a", lambda: None) is not None and ended == ["a"]  # a node's own renewal has room
    sessions.close("b", sessions._open["b"][0])
    assert sessions.open("c", lambda: None) is not None
    assert not sessions.current("a", a)
