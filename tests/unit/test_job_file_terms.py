"""What a data user reads of a job's messages in the job file's terms (:func:`in_job_file_terms`): the flags of job
settings named in prose are written as job-file keys, while a command it quotes keeps its flags, so that it runs when
pasted (walkthrough 9, W9-6: `privfed jobs`, the status page and job.log showed
`privfed simulate owners 36 task nb epsilon 0.5 --repeats 10`)."""

from __future__ import annotations

import json

from privfed.server.jobapi import in_job_file_terms
from privfed.server.jobstore import JobStore
from privfed.server.report import few_reports_warning
from privfed.server.statuspage import render

SIMULATE = "privfed simulate --owners 36 --task nb --epsilon 0.5 --repeats 10"


def test_a_command_in_backticks_keeps_its_flags_and_prose_gets_job_file_keys():
    warning = few_reports_warning("nb", 0.5, 36, one_report=True)
    assert warning is not None and f"`{SIMULATE}`" in warning
    assert in_job_file_terms(warning) == warning  # report.json's text, unchanged
    said = "only 3 of 4 owners (--min-owners 4); pass --labels rr or a larger --epsilon, or `privfed jobs --all`"
    assert in_job_file_terms(said) == (
        "only 3 of 4 owners (min_owners 4); pass labels rr or a larger epsilon, or `privfed jobs --all`"
    )


def test_a_privfed_command_line_outside_backticks_keeps_its_flags_up_to_the_prose_after_it():
    assert in_job_file_terms(f"run {SIMULATE} on your data") == f"run {SIMULATE} on your data"
    assert in_job_file_terms("privfed submit --owners=3; then --share-groups all") == (
        "privfed submit --owners=3; then share_groups all"
    )
    # a flag after the command's prose is prose again
    assert in_job_file_terms("privfed simulate --task nb on your data, then --rounds 3") == (
        "privfed simulate --task nb on your data, then rounds 3"
    )


def test_the_listing_note_of_a_done_job_keeps_the_suggested_command(tmp_path):
    """The note `privfed jobs` prints under its table and the status page shows: the report's warnings, in job
    file terms, whose suggested command is pasted as it reads."""
    from privfed.server.service import CoordinatorService, ServiceConfig

    store = JobStore(tmp_path / "store")
    job_id = store.submit({"task": "nb", "epsilon": 0.5, "owners": 36}, "alice").job_id
    store.transition(job_id, "queued", state="running")
    store.update(job_id, state="done")
    warnings = [few_reports_warning("nb", 0.5, 36, one_report=True), "warning: no --rounds given"]
    (store.job_dir(job_id) / "report.json").write_text(json.dumps({"status": "ok", "warnings": warnings}))
    service = CoordinatorService(
        ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    note = service.summary(service.store.get(job_id))["note"]
    assert f"`{SIMULATE}` on a data set like the owners'" in note and note.endswith("; no rounds given"), note
    assert f"`{SIMULATE}`" in render({"jobs": [service.summary(service.store.get(job_id))], "nodes": {}})
