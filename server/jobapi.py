"""The job API of a coordinator service: what ``privfed submit``, ``privfed jobs`` and ``privfed job
show|logs|cancel|model`` call (issue 26, item 1).

A gRPC service of its own (:data:`~privfed.proto.jobwire.JOB_SERVICE`) on the service's port,
whose requests and answers are JSON objects. Only a caller whose verified certificate carries the
data-user role (:mod:`privfed.common.roles`) is served: an owner node's certificate, or the
coordinator's, is refused with PERMISSION_DENIED before anything is read. A data user lists, reads
and cancels their own jobs only: another's job answers as one that does not exist (an owner's policy
names the data users its data serves, and a job's report and model are made of that data). The
service's operator sees every job on the status page and in the store.

A job file (:func:`job_settings`) takes the keys of ``privfed simulate --config`` that describe a
job (``task``, ``epsilon``: one value, ``owners``, ``rounds``, ``C``, ...); the federation (its data
set or schema, where results go, the address) is the service's.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from privfed.common.errors import ConfigError, PrivfedError, reason
from privfed.common.roles import DATA_USER
from privfed.proto.jobwire import JOB_METHODS, JOB_SERVICE, decode_json, encode_json
from privfed.server.config import FLAGS, KEYS, JobConfig, field_faults
from privfed.server.joblog import outside_jobs
from privfed.server.jobstore import no_job
from privfed.server.parameter_tables import COMMON
from privfed.server.report import spending_limit
from privfed.server.revocation import revoked_message
from privfed.server.servicer import certificate_der, peer_certificate, peer_identity, peer_role

if TYPE_CHECKING:
    from privfed.common.schema import FederationSchema
    from privfed.server.jobstore import JobRecord
    from privfed.server.service import CoordinatorService

log = logging.getLogger("privfed.coordinator")

#: Settings that belong to the service, not to a job: where it listens, where results go, serving, and the
#: federation's data (its set, size, seed and test split: a job's own would score it on rows the owners trained on).
SERVICE_OWNED = frozenset(
    {
        "listen",
        "out",
        "serve",
        "load_model",
        "journal",
        "resume",
        "schema",
        "dataset",
        "n_samples",
        "seed",
        "test_fraction",
    }
)
#: The service's settings that name the operator's files and addresses: left out of what a data user reads of a
#: job's report (``privfed job show``), as the job's log leaves out the addresses and the store's path.
OPERATOR_SETTINGS = frozenset({"listen", "out", "journal", "schema", "load_model"})
#: The job API calls the operator (the service's own certificate) may make, on any data user's job.
OPERATOR_METHODS = frozenset({"List", "Cancel"})
#: Who a job the operator cancelled was cancelled by, in its report and record.
OPERATOR = "the operator"
#: The key of every job setting (:data:`~privfed.server.config.KEYS`, the parameter tables') -> its JobConfig field.
JOB_KEYS = {key: field for key, field in KEYS.items() if field not in SERVICE_OWNED}
#: The flag of every job setting -> its key in a job file as the known keys list it, the flag's name without the
#: dashes and with underscores (``--labels`` -> ``labels``, ``--share-groups`` -> ``share_groups``; a job file may
#: write either): the checks a job file goes through are the flags' (one table).
JOB_FILE_KEYS = {
    FLAGS[field]: FLAGS[field].removeprefix("--").replace("-", "_") for field in JOB_KEYS.values() if field in FLAGS
}
_FLAG = re.compile(r"--[A-Za-z][A-Za-z0-9-]*")
#: What :func:`in_job_file_terms` leaves as it is: a span in backticks, and a ``privfed`` command line outside them
#: (``privfed SUBCOMMAND`` and the flags after it, each with at most one value): a command is pasted as it reads
#: (walkthrough 9, W9-6: ``privfed simulate --owners 36`` was shown as ``privfed simulate owners 36``).
_VERBATIM = re.compile(r"`[^`]*`|\bprivfed [a-z][a-z-]*(?: --[A-Za-z][A-Za-z0-9-]*(?:=[^\s`;,]+| (?!--)[^\s`;,]+)?)*")
#: The most bytes of a job's log one ``privfed job logs`` answer carries (its end).
LOG_TAIL = 60_000
#: A submission's token (``privfed submit`` makes one, 32 hex digits): see :meth:`CoordinatorService.submit`.
_TOKEN = re.compile(r"[0-9a-f]{16,64}")
#: A peer's network address in a log line (gRPC's ``ipv4:HOST:PORT``, ``ipv6:[…]:PORT``, ``unix:PATH``).
_PEER_ADDRESS = re.compile(r"\b(?:ipv4|ipv6|unix):[^\s,;)'\"]+")


def _store_paths(root: Path) -> re.Pattern[str]:
    """Where the store's path ``root`` stands in a text as a path: its absolute form (resolved, and as given) where
    it is not the start of a longer name, and a relative one (``--store jobs``, as the README runs the service) only
    where a path under it starts (``jobs/<id>/journal.sqlite``). The bare relative word is not a path: ``jobs`` is
    also the listing's own key and the command ``privfed jobs`` (walkthrough 12, W12-1: a plain replace turned the
    key into ``STORE`` and every data user's ``privfed jobs`` stopped with a traceback)."""
    forms = sorted({str(root.resolve())} | ({str(root)} if root.is_absolute() else set()), key=len, reverse=True)
    parts = [rf"(?:{'|'.join(re.escape(f) for f in forms)})(?![\w\-]|\.[\w\-])"]  # a full stop may end it
    if not root.is_absolute():
        parts.append(rf"(?<![\w.\-/]){re.escape(str(root))}(?=/)")
    return re.compile("|".join(parts))


def job_settings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A job file's settings as :class:`JobConfig` fields: keys as ``privfed simulate --config`` takes
    them (``n-samples`` or ``n_samples``, ``rounds``, ``C``), ``epsilon`` one number. ConfigError
    names every fault a key or value shows alone, together: an unknown key (or one that is the service's), a value
    outside its constraint, a parameter of another task, a missing ``task``, ``epsilon`` or ``owners``."""
    out: dict[str, Any] = {}
    faults = []
    for key, value in doc.items():
        k = str(key).replace("-", "_")
        if KEYS.get(k) in SERVICE_OWNED:
            faults.append(f"job file key {key!r} is the service's own setting (privfed serve), not a job's")
        elif k not in JOB_KEYS:
            faults.append(f"job file key {key!r} is not a job setting; known: {', '.join(sorted(JOB_KEYS))}")
        else:
            out[JOB_KEYS[k]] = value
    missing = [k for k in ("task", "epsilon", "owners") if k not in out]
    eps = out.get("epsilon")
    if isinstance(eps, list):
        if len(eps) != 1:
            faults.append(f"a job has one epsilon, got {eps}; submit one job per value")
            del out["epsilon"]
        else:
            out["epsilon"] = eps[0]
    if isinstance(out.get("epsilon"), str):
        out["epsilon"] = math.inf if out["epsilon"].strip().lower() == "inf" else out["epsilon"]
    if (
        "task" in out
    ):  # an unknown task first: what else it needs depends on it (W11-10: "task = 'svm'" was told owners)
        try:
            COMMON["task"].check(out["task"], "task")
        except ConfigError as exc:
            raise ConfigError("; ".join([str(exc), *faults])) from None
    faults += field_faults(out)
    if missing:
        faults.append(f"the job file needs {', '.join(missing)}")
    if faults:
        raise ConfigError("; ".join(faults))
    return out


def in_job_file_terms(text: str) -> str:
    """``text``, an error about a job's settings, with the flag of each job setting written as the job file's key
    (``--labels rr`` -> ``labels rr``): the checks are the command line's, but a data user wrote a job file. A
    command it quotes keeps its flags (:data:`_VERBATIM`): a span in backticks, or a ``privfed ...`` command line."""
    out, start = [], 0
    for kept in _VERBATIM.finditer(text):
        out += [_job_file_keys(text[start : kept.start()]), kept.group(0)]
        start = kept.end()
    return "".join([*out, _job_file_keys(text[start:])])


def _job_file_keys(prose: str) -> str:
    """``prose`` with the flag of each job setting written as the job file's key (:func:`in_job_file_terms`)."""
    return _FLAG.sub(lambda m: JOB_FILE_KEYS.get(m.group(0), m.group(0)), prose)


@contextmanager
def job_file_errors() -> Iterator[None]:
    """Raise a :class:`ConfigError` met inside in the job file's terms (:func:`in_job_file_terms`)."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(in_job_file_terms(str(exc))) from exc


def jsonable_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as JSON values (``inf`` as the text ``"inf"``)."""
    return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in settings.items()}


def job_config(settings: Mapping[str, Any], service: Mapping[str, Any]) -> JobConfig:
    """The :class:`JobConfig` of a job's stored settings over the ``service``'s own fields (its data
    set, schema, timeouts, store), which a job's settings override where it may."""
    values = {**service, **settings}
    if values.get("epsilon") == "inf":
        values["epsilon"] = math.inf
    try:
        return JobConfig.from_flat(**values)
    except TypeError as exc:
        raise ConfigError(f"job settings: {exc}") from exc


def bdt_release_hint(config: JobConfig) -> str | None:
    """What a bdt job on owners' own files is told at submission when its release is the default: such a service
    cannot know how many rows an owner holds, so the default is the paper's shares (and the evaluation mechanism for
    owners of many rows), never the marginal release the README's "Real tabular data" table measures for owners of
    one row (walkthrough 13, W13-1: anes96's 755 one-row owners, 0.66 at eps 3 by default against 0.88 with
    ``max_owner_rows = 1``; breast cancer's eps 1 job failed after its owners paid). None for another task, a
    built-in data set (its public split says the rows per owner), or a job that gives the release or the rows."""
    if config.task != "bdt" or config.schema is None or config.release_source != "default":
        return None
    if config.max_owner_rows is not None or config.rows_per_owner is not None:
        return None
    return (
        "bdt: the owners' rows come from their own files, so no public bound says how many rows an owner holds: "
        "this job runs release shares (the paper's pipeline, with the evaluation mechanism for owners of many "
        "rows); if each owner holds one row (a node's --shards equal to its file's rows), max_owner_rows = 1 runs "
        "the marginal release, what the README's table for one row per owner measures, and closer to AdaBoost "
        'there; release = "shares" keeps this one without this line'
    )


#: A column whose public half-range is below this share of a whole row's lies "near the centre" of FedDPDR's unit ball
#: (:func:`feddpdr_scaling_hint`).
NEAR_CENTRE = 0.01


def feddpdr_scaling_hint(config: JobConfig, schema: FederationSchema) -> str | None:
    """What a feddpdr job is told at submission when at least half of the schema's encoded columns have a public
    half-range below :data:`NEAR_CENTRE` of the whole row's, R = ||(hi - lo) / 2||: FedDPDR scales every row into the
    unit ball by R (README, "FedDPDR-DPML"), so those columns lie near its centre, under the noise, and the model
    reads little but the widest feature (walkthrough 13, W13-3: anes96's population in thousands beside 1-7 scales,
    every job at eps 1-8 answered one class; its own eps = inf reference, 0.508, was below the majority class,
    0.582). None for another task, another row scaling (``box`` scales each feature by its own range) or a schema
    of comparable ranges."""
    if config.task != "feddpdr" or getattr(config.params, "scaling", "ball") != "ball":
        return None
    cats, numeric = dict(schema.categories), schema.numeric_bounds
    halves: list[tuple[str, float]] = []  # (feature, public half-range) per encoded column
    for feature in schema.features:
        if feature in cats:
            halves += [(feature, 0.5)] * len(cats[feature])
        else:
            lo, hi = numeric.get(feature, (0.0, 1.0))
            halves.append((feature, (hi - lo) / 2.0))
    radius = math.sqrt(sum(h * h for _, h in halves))
    near = list(dict.fromkeys(f for f, h in halves if h < NEAR_CENTRE * radius))
    if len(halves) < 2 or 2 * sum(h < NEAR_CENTRE * radius for _, h in halves) < len(halves):
        return None
    widest, half = max(halves, key=lambda fh: fh[1])
    shown = ", ".join(near[:5]) + (f" and {len(near) - 5} more" if len(near) > 5 else "")
    return (
        f"feddpdr: every row is scaled into the unit ball by the public radius of a whole row ({radius:.4g}), of "
        f"which {widest}'s range holds {half * half / radius**2:.0%}; {shown} lie within {NEAR_CENTRE:.0%} of it "
        f"from the centre, where the noise drowns them, so the model may read little but {widest}: compare the "
        "first job's reference_accuracy (its model at eps = inf) with its majority class before spending more "
        'epsilon; ncc, lr, nb and bdt scale each feature by its own range, and so does scaling = "box"'
    )


def _why_no_model(state: str) -> str:
    """What a job in ``state`` without a model may still do, for the data user who asked for its model."""
    if state in ("queued", "running"):
        return " (ask again when it is done; privfed job show ID says how far it is)"
    return " (privfed job show ID says why)" if state in ("failed", "cancelled") else ""


class JobApi:
    """The job API's calls, served by a :class:`~privfed.server.service.CoordinatorService`."""

    def __init__(self, service: CoordinatorService, *, require_role: bool) -> None:
        self._service = service
        self._require_role = require_role
        tls = service.tls
        #: The service's own certificate: its holder is the operator, who may list and cancel any job (walkthrough
        #: 8, W8-14: one data user's job held the queue, and the operator could only revoke them and restart).
        self._operator = None if tls is None or not require_role else certificate_der(tls.cert.read_bytes())

    def handler(self) -> grpc.GenericRpcHandler:
        methods = {
            m: grpc.unary_unary_rpc_method_handler(
                self._guarded(m), request_deserializer=decode_json, response_serializer=encode_json
            )
            for m in JOB_METHODS
        }
        return grpc.method_handlers_generic_handler(JOB_SERVICE, methods)

    def _guarded(self, method: str) -> Callable[[dict[str, Any], grpc.ServicerContext], dict[str, Any]]:
        call = getattr(self, method.lower())

        def guarded(request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
            with outside_jobs():  # a data user's call: not in the running job's log (privfed.server.joblog)
                return serve(request, context)

        def serve(request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
            user = peer_identity(context) or ""
            if (
                self._operator is not None
                and method in OPERATOR_METHODS
                and peer_certificate(context) == self._operator
            ):
                log.info("job API %s by the operator (%s)", method, context.peer())
                try:
                    return dict(getattr(self, f"operator_{method.lower()}")(request))
                except PrivfedError as exc:
                    context.abort(grpc.StatusCode.NOT_FOUND, str(exc)[:1000])
                    raise AssertionError("abort raises") from exc
            if self._require_role and peer_role(context) != DATA_USER:
                log.warning("job API %s refused for %r (%s): not a data-user certificate", method, user, context.peer())
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"{user!r} holds no data-user certificate: only data users submit and manage jobs "
                    "(privfed certs --data-user NAME)",
                )
            if self._require_role and self._service.revoked.revoked(user):
                log.warning("job API %s refused for %r (%s): revoked", method, user, context.peer())
                context.abort(grpc.StatusCode.PERMISSION_DENIED, revoked_message(user))
            try:
                return dict(call(request, user))
            except OSError as exc:  # a full disk (walkthrough 9, W9-1: the caller read a raw "Exception calling ...")
                log.error("job API %s for %r: the job store cannot be written: %s", method, user, reason(exc))
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,  # not UNAVAILABLE: the CLI reads that as no service there
                    "the service cannot write its job store now (its operator is told in its log); try again later",
                )
                raise AssertionError("abort raises") from exc
            except (PrivfedError, TypeError, ValueError) as exc:  # a request that does not describe a job
                code = grpc.StatusCode.NOT_FOUND if str(exc).startswith("no job") else grpc.StatusCode.INVALID_ARGUMENT
                context.abort(code, str(exc)[:1000])
                raise AssertionError("abort raises") from exc

        return guarded

    def _own_job(self, request: dict[str, Any], user: str) -> JobRecord:
        """The record of the job ``request`` names; another data user's job answers as one that does not
        exist (with data-user certificates: without TLS every caller is the same nobody). Whose job it is
        is asked of the store's memory before its record is read (wt-redteam4): another's costs what a
        missing one does."""
        job_id = str(request.get("job_id", ""))
        if self._require_role and self._service.store.submitted_by(job_id) != user:
            raise no_job(job_id)
        return self._service.store.get(job_id)

    def submit(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        doc, token = request.get("job"), request.get("submission")
        if not isinstance(doc, dict):
            raise ConfigError("a submission carries its job's settings as a JSON object under 'job'")
        if token is not None and not (isinstance(token, str) and _TOKEN.fullmatch(token)):
            raise ConfigError("a submission's token ('submission') is 16 to 64 hex digits")
        record = self._service.submit(job_settings(doc), user, token)
        answer = {"job_id": record.job_id, "state": record.state}
        warnings = []
        short = self._service.short_of_owners(record.settings.get("owners"))
        if short is not None:  # it would wait for them: its register timeout, holding the queue
            warnings.append(
                f"the job asks for {record.settings['owners']} owners and {short}: it waits for the rest up to its "
                "register-timeout when it starts, and the jobs queued after it wait too"
            )
        config = job_config(record.settings, self._service.config.job_fields())
        hints = (bdt_release_hint(config), feddpdr_scaling_hint(config, self._service.schema))
        warnings += [hint for hint in hints if hint]
        if warnings:
            answer["warning"] = "; ".join(warnings)
        return answer

    def list(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        """The last ``request["last"]`` jobs (a positive integer; absent or null: every job, as older
        clients ask) and how many earlier ones are left out (``earlier``)."""
        last = request.get("last")
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
            raise ConfigError(f"'last' must be a positive whole number of jobs, got {last!r}")
        listing = self._service.listing(last, data_user=user if self._require_role else None)
        # each job's error and note as job show gives them (audit 26: a reason naming the job's journal in the store)
        return dict(json.loads(self._for_data_user(json.dumps(listing, ensure_ascii=False))))

    def show(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        """The job's record and report as its data user reads them: the report's settings without the operator's
        (:data:`OPERATOR_SETTINGS`), and no network address or store path in any text (:meth:`_for_data_user`;
        walkthrough 6, W6-10: ``job show`` gave what ``job logs`` hides)."""
        record = self._own_job(request, user)
        report = self._service.report_of(record.job_id)
        if report is not None and isinstance(report.get("config"), dict):
            report["config"] = {k: v for k, v in report["config"].items() if k not in OPERATOR_SETTINGS}
        if report is not None:
            report.pop("host", None)  # the service machine's name and make: the operator's (walkthrough 7)
        shown = {"job": record.to_json(), "report": report}  # unescaped: a path with non-ASCII letters is found too
        return dict(json.loads(self._for_data_user(json.dumps(shown, ensure_ascii=False))))

    def logs(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        path = self._service.store.job_dir(self._own_job(request, user).job_id) / "job.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return {"log": self._for_data_user(text[-LOG_TAIL:])}

    def _for_data_user(self, text: str) -> str:
        """A job's log as its data user reads it: without the owner nodes' network addresses and the
        operator's paths (walkthrough 5: `privfed job logs` showed both), nor which of an owner's limits on its
        spending over time declined the job (:data:`~privfed.server.report.SPENDING_LIMIT`); the operator's own copy keeps them."""
        text = spending_limit(_PEER_ADDRESS.sub("<address>", text))
        return _store_paths(self._service.store.root).sub("STORE", text)

    def model(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        """The finished job's ``model.json`` document as the service saved it (what ``privfed export`` turns
        into a scikit-learn file); a job that saved none answers why (walkthrough 5: a data user could only
        query a model, and only one whose first stage is linear)."""
        record = self._own_job(request, user)
        path = self._service.store.job_dir(record.job_id) / "model.json"
        if not path.is_file():
            raise ConfigError(f"job {record.job_id} has no model: it is {record.state}" + _why_no_model(record.state))
        return {"job_id": record.job_id, "model": json.loads(path.read_text(encoding="utf-8"))}

    def delete(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        """Delete a finished job (:meth:`~privfed.server.service.CoordinatorService.delete`): its state when deleted."""
        record = self._service.delete(self._own_job(request, user).job_id, user)
        return {"job_id": record.job_id, "state": record.state}

    def operator_list(self, request: dict[str, Any]) -> dict[str, Any]:
        """Every data user's jobs, as the status page lists them (the operator's own view of the store)."""
        last = request.get("last")
        return self._service.listing(
            last if isinstance(last, int) and not isinstance(last, bool) and last > 0 else None
        )

    def operator_cancel(self, request: dict[str, Any]) -> dict[str, Any]:
        """Cancel any data user's job (:meth:`cancel`'s answer); its report says the operator cancelled it."""
        was = self._service.store.get(str(request.get("job_id", "")))
        record = self._service.cancel(was.job_id, was.data_user, by=OPERATOR)
        return {"job_id": record.job_id, "state": record.state, "was": was.state}

    def cancel(self, request: dict[str, Any], user: str) -> dict[str, Any]:
        """The job's state after the cancel, and before it (``was``: a finished job has nothing to cancel)."""
        was = self._own_job(request, user)
        record = self._service.cancel(was.job_id, user)
        return {"job_id": record.job_id, "state": record.state, "was": was.state}
