"""Walkthrough 10, W10-2: a ``privfed submit`` whose answer was lost on the network (the data user's Wi-Fi dropped
after the service queued the job) printed "no privfed service answers ... is `privfed serve` running there?" and
exited 2, though the job was queued and ran, its owners paying. A user who submitted again ran it twice.

Now ``privfed submit`` sends a token with its submission and sends the same submission again when no answer came;
the service answers a token it has seen with the job it queued the first time. The real service over mTLS in this
process and the real ``privfed submit`` command; the network's loss is injected at the client's end, after the
service has answered (the call goes through, then the client sees the connection lost).
"""

from __future__ import annotations

import grpc
import pytest

from privfed.deploy import service_cli
from privfed.deploy.certs import make_certs
from privfed.deploy.cli import main

USER = "alice"


class _Lost(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "Stream removed (recvmsg:Connection timed out (110))"


@pytest.fixture
def service(tmp_path, monkeypatch):
    from tls_service import mtls_service

    monkeypatch.setattr(service_cli, "CALL_BACKOFF", (0.01, 0.01))
    certs = make_certs(tmp_path / "certs", owners=1, data_users=[USER])
    job = tmp_path / "job.toml"
    job.write_text('task = "ncc"\nepsilon = 1.0\nowners = 3\n')
    with mtls_service(tmp_path, certs / "coordinator") as (svc, port):
        argv = ["submit", str(job), "--coordinator", f"127.0.0.1:{port}", "--certs", str(certs / USER), "--name", USER]
        yield svc, argv


def _answers_lost(monkeypatch, lost: int) -> list[dict]:
    """The client's next ``lost`` job API calls reach the service, which answers, and then the answer is lost;
    returns the requests the client sent."""
    sent: list[dict] = []
    real = grpc.secure_channel

    def channel(*args, **kwargs):
        ch = real(*args, **kwargs)
        unary = ch.unary_unary

        def unary_unary(*a, **k):
            stub = unary(*a, **k)

            def call(request, **kw):
                sent.append(request)
                answer = stub(request, **kw)
                if len(sent) <= lost:
                    raise _Lost()
                return answer

            return call

        ch.unary_unary = unary_unary
        return ch

    monkeypatch.setattr(grpc, "secure_channel", channel)
    return sent


def test_a_submission_whose_answer_was_lost_is_sent_again_and_queued_once(service, monkeypatch, capsys):
    svc, argv = service
    sent = _answers_lost(monkeypatch, lost=1)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "asking again" in err and "submitted job" in out, (out, err)
    assert len(sent) == 2 and sent[0] == sent[1]  # the same submission, token and all
    (job,) = svc.store.all()  # queued once
    assert f"submitted job {job.job_id} (" in out
    monkeypatch.undo()
    assert main(argv) == 0  # the control: the file submitted again is another submission
    assert len(svc.store.all()) == 2


def test_a_submission_with_no_answer_at_all_says_it_may_be_queued(service, monkeypatch, capsys):
    svc, argv = service
    sent = _answers_lost(monkeypatch, lost=3)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the job is queued: `privfed jobs` lists it" in err, err
    assert len(sent) == 3 and len({repr(r) for r in sent}) == 1
    assert len(svc.store.all()) == 1  # three tries, one job


def test_a_token_is_kept_across_a_restart_and_is_the_submitting_users_own(tmp_path):
    from privfed.server.jobstore import JobStore

    store = JobStore(tmp_path / "store")
    first, new = store.submit_once({"task": "ncc"}, "alice", "ab" * 16)
    assert new and store.submit_once({"task": "ncc"}, "alice", "ab" * 16) == (first, False)
    again = JobStore(tmp_path / "store")  # a restart reads the tokens back from the records
    record, new = again.submit_once({"task": "ncc"}, "alice", "ab" * 16)
    assert record.job_id == first.job_id and not new
    assert again.submit_once({"task": "ncc"}, "bob", "ab" * 16)[1]  # another user's token is another submission
